"""The registry's pure state and operations: ids, versions, deletes, configs, modes, and the
records of ``_schemas`` as Confluent's registry writes them."""

from __future__ import annotations

import json

import pytest

from kbroker.schema_registry import registry
from kbroker.schema_registry.errors import RegistryError
from kbroker.schema_registry.state import RegistryState

STRING = '{"type": "string"}'
USER_V1 = json.dumps(
    {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
)
USER_V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int", "default": 0},
        ],
    }
)
USER_BAD = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [{"name": "name", "type": "string"}, {"name": "email", "type": "string"}],
    }
)


def apply(state: RegistryState, records: list[tuple[bytes, bytes | None]]) -> None:
    for key, value in records:
        state.apply(state.offset + 1, key, value)


def register(
    state: RegistryState, subject: str, schema: str, schema_type: str = "AVRO", **extra: object
) -> int:
    body = {"schema": schema, "schemaType": schema_type, **extra}
    new = registry.new_schema(body, normalize=False, state=state)
    work = registry.prepare_register(state, subject, new)
    analysis = registry.analyse(work, {})
    answer, records = registry.finish_register(state, subject, work, analysis)
    apply(state, records)
    return int(answer["id"])


def code(excinfo: pytest.ExceptionInfo[RegistryError]) -> int:
    return excinfo.value.error_code


def test_ids_are_global_and_a_schema_registered_twice_keeps_its_id() -> None:
    state = RegistryState()
    assert register(state, "a-value", STRING) == 1
    assert register(state, "a-value", '"string"') == 1  # the same schema written otherwise
    assert register(state, "b-value", STRING) == 1  # another subject, the same id
    assert register(state, "c-value", USER_V1) == 2
    assert register(state, "c-value", USER_V2) == 3
    assert [v.version for v in state.versions("a-value")] == [1]
    assert [v.version for v in state.versions("c-value")] == [1, 2]
    assert state.schema(1).text == '"string"'


def test_backward_refuses_a_new_field_without_default_and_none_accepts_it() -> None:
    state = RegistryState()
    register(state, "users-value", USER_V1)
    assert register(state, "users-value", USER_V2) == 2
    with pytest.raises(RegistryError) as refused:
        register(state, "users-value", USER_BAD)
    assert refused.value.status == 409 and code(refused) == 409
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.value.message
    apply(state, state.plan_config("users-value", "NONE"))
    assert register(state, "users-value", USER_BAD) == 3


def test_transitive_levels_compare_with_every_version() -> None:
    state = RegistryState()
    apply(state, state.plan_config(None, "FORWARD_TRANSITIVE"))
    register(state, "s", USER_V2)  # has age (default 0)
    register(state, "s", USER_V1)  # FORWARD: v2 reads v1's data (age takes its default)
    third = json.dumps(
        {
            "type": "record",
            "name": "User",
            "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "string"}],
        }
    )
    apply(state, state.plan_config("s", "FORWARD"))
    # Against the latest (v1) alone it is forward compatible...
    assert register(state, "s", third) == 3
    apply(state, state.plan_delete_version("s", "3", permanent=False)[1])
    apply(state, state.plan_config("s", None))
    # ...but not against v1 of the transitive chain (age int vs string).
    with pytest.raises(RegistryError) as refused:
        register(state, "s", third)
    assert code(refused) == 409


def test_soft_then_permanent_deletes_and_their_errors() -> None:
    state = RegistryState()
    register(state, "s", USER_V1)
    register(state, "s", USER_V2)
    with pytest.raises(RegistryError) as not_soft:
        state.plan_delete_subject("s", permanent=True)
    assert code(not_soft) == 40405
    versions, records = state.plan_delete_subject("s", permanent=False)
    apply(state, records)
    assert versions == [1, 2]
    assert state.subject_names() == [] and state.subject_names(deleted=True) == ["s"]
    with pytest.raises(RegistryError) as again:
        state.plan_delete_subject("s", permanent=False)
    assert code(again) == 40404
    with pytest.raises(RegistryError) as gone:
        state.versions("s")
    assert code(gone) == 40401
    # A new registration continues the version numbers; the old id is found again.
    assert register(state, "s", USER_V1) == 1
    assert [v.version for v in state.versions("s")] == [3]
    apply(state, state.plan_delete_version("s", "3", permanent=False)[1])
    versions, records = state.plan_delete_subject("s", permanent=True)
    apply(state, records)
    assert versions == [1, 2, 3] and "s" not in state.subjects
    # Ids keep growing: a permanently deleted schema's id is not given again.
    assert register(state, "t", STRING) == 3


def test_version_errors() -> None:
    state = RegistryState()
    register(state, "s", STRING)
    for bad in ("0", "abc", str(2**31)):
        with pytest.raises(RegistryError) as invalid:
            state.version("s", bad)
        assert code(invalid) == 42202
    with pytest.raises(RegistryError) as missing:
        state.version("s", "7")
    assert code(missing) == 40402
    with pytest.raises(RegistryError) as no_subject:
        state.version("t", "1")
    assert code(no_subject) == 40401
    assert state.version("s", "latest").version == state.version("s", "-1").version == 1


def test_invalid_schema_and_levels() -> None:
    state = RegistryState()
    with pytest.raises(RegistryError) as bad_schema:
        register(state, "s", '{"type": "nope"}')
    assert code(bad_schema) == 42201
    with pytest.raises(RegistryError) as bad_level:
        state.plan_config(None, "SIDEWAYS")
    assert code(bad_level) == 42203
    with pytest.raises(RegistryError) as bad_mode:
        state.plan_mode(None, "SOMETIMES")
    assert code(bad_mode) == 42204


def test_read_only_mode_refuses_writes_and_import_mode_takes_ids() -> None:
    state = RegistryState()
    apply(state, state.plan_mode(None, "READONLY"))
    with pytest.raises(RegistryError) as read_only:
        register(state, "s", STRING)
    assert code(read_only) == 42205
    apply(state, state.plan_mode(None, "IMPORT"))
    assert register(state, "s", STRING, id=42, version=7) == 42
    assert state.version("s", "7").schema.id == 42
    apply(state, state.plan_mode(None, "READWRITE"))
    assert register(state, "t", USER_V1) == 43
    with pytest.raises(RegistryError) as not_import:
        register(state, "u", USER_V2, id=100)
    assert code(not_import) == 42205


def test_references_resolve_and_protect_what_they_reference() -> None:
    state = RegistryState()
    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "com.example",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "fields": [{"name": "home", "type": "com.example.Address"}],
        }
    )
    register(state, "address", address)
    refs = [{"name": "com.example.Address", "subject": "address", "version": 1}]
    person_id = register(state, "person-value", person, references=refs)
    stored = state.schema(person_id)
    assert stored.references[0].subject == "address"
    assert "com.example.Address" in stored.text  # named by reference, not inlined
    assert state.referenced_by("address", 1) == [person_id]
    with pytest.raises(RegistryError) as in_use:
        state.plan_delete_version("address", "1", permanent=False)
    assert code(in_use) == 42206
    with pytest.raises(RegistryError) as unresolved:
        register(state, "other", person)
    assert code(unresolved) == 42201


# Records as Confluent's registry writes them to _schemas (its KafkaStore key and value JSON).
CONFLUENT_RECORDS = [
    (b'{"keytype":"NOOP","magic":0}', None),
    (
        b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}',
        b'{"subject":"orders-value","version":1,"id":1,"schema":"\\"string\\"","deleted":false}',
    ),
    (
        b'{"keytype":"SCHEMA","subject":"orders-key","version":1,"magic":1}',
        b'{"subject":"orders-key","version":1,"id":2,"schemaType":"JSON",'
        b'"schema":"{\\"type\\":\\"string\\"}","deleted":false}',
    ),
    (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL"}'),
    (b'{"keytype":"CONFIG","subject":"orders-key","magic":0}', b'{"compatibilityLevel":"NONE"}'),
    (b'{"keytype":"MODE","subject":null,"magic":0}', b'{"mode":"READWRITE"}'),
    (
        b'{"keytype":"DELETE_SUBJECT","subject":"orders-key","magic":0}',
        b'{"subject":"orders-key","version":1}',
    ),
    (b'{"keytype":"CONTEXT","tenant":"default","context":".","magic":0}', b"{}"),
    (b"not json", b"{}"),
]


def test_reads_what_confluents_registry_wrote() -> None:
    state = RegistryState()
    apply(state, CONFLUENT_RECORDS)
    assert state.subject_names() == ["orders-value"]
    assert state.subject_names(deleted=True) == ["orders-key", "orders-value"]
    assert state.schema(2).schema_type == "JSON"
    assert state.compatibility_of(None) == "FULL"
    assert state.compatibility_of("orders-key") == "NONE"
    assert state.max_id == 2
    assert register(state, "new", json.dumps({"type": "long"})) == 3
    apply(state, [(b'{"keytype":"CLEAR_SUBJECT","subject":"orders-key","magic":0}', b"{}")])
    assert "orders-key" not in state.subjects


def test_written_keys_are_confluents_bytes() -> None:
    """Compaction keys on bytes: a key written in another layout would not replace
    Confluent's."""
    state = RegistryState()
    (key, value), *_ = state.plan_config(None, "FULL")
    assert key == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert json.loads(value or b"") == {"compatibilityLevel": "FULL"}
    _, _, records = state.plan_register("s", "AVRO", '"int"', (), set())
    assert records[0][0] == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    assert json.loads(records[0][1] or b"") == {
        "subject": "s",
        "version": 1,
        "id": 1,
        "schema": '"int"',
        "deleted": False,
    }
