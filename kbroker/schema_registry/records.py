"""The records of the ``_schemas`` topic, in Confluent Schema Registry's key and value formats,
so that a ``_schemas`` topic written by Confluent's registry can be read, and the other way round.

Keys and values are JSON (UTF-8). Keys are written compactly with their fields in Confluent's
order (``keytype``, ``subject``, ``version``, ``magic``), since compaction keeps the latest
record per key *bytes*: a key written in another layout would not replace Confluent's.

=================  ==============================================================  ===========
key                value                                                           meaning
=================  ==============================================================  ===========
``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}``
                   ``{"subject":S,"version":V,"id":N,"schemaType":T,"references":[...],
                   "schema":"...","deleted":false}`` (``schemaType`` absent for AVRO)  a version
``{"keytype":"CONFIG","subject":S|null,"magic":0}``
                   ``{"compatibilityLevel":"BACKWARD"}``                            compatibility
``{"keytype":"MODE","subject":S|null,"magic":0}``
                   ``{"mode":"READWRITE"}``                                          mode
``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}``
                   ``{"subject":S,"version":V}``: versions up to V soft-deleted
``{"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}``
                   ``{"subject":S}``: the subject's soft-deleted versions are gone
``{"keytype":"NOOP","magic":0}``  (any)                                            ignored
=================  ==============================================================  ===========

A null value (tombstone) removes the key: a SCHEMA tombstone is a permanently deleted version,
a CONFIG or MODE tombstone a subject's setting removed. Unknown key types (newer Confluent
releases add some: contexts, associations) are skipped, as Confluent's reader skips what it
does not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SCHEMAS_TOPIC = "_schemas"

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)


class RecordFormatError(ValueError):
    """A key or value of ``_schemas`` that is not valid JSON of the expected shape."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema's reference to another subject's version, by the name the schema uses."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaKey:
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False
    # Fields of newer Confluent releases (metadata, ruleSet, ...) kept as they came.
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class ConfigKey:
    subject: str | None


@dataclass(frozen=True, slots=True)
class ModeKey:
    subject: str | None


@dataclass(frozen=True, slots=True)
class DeleteSubjectKey:
    subject: str


@dataclass(frozen=True, slots=True)
class ClearSubjectKey:
    subject: str


Key = SchemaKey | ConfigKey | ModeKey | DeleteSubjectKey | ClearSubjectKey


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def encode_key(key: Key) -> bytes:
    if isinstance(key, SchemaKey):
        return _dumps(
            {"keytype": "SCHEMA", "subject": key.subject, "version": key.version, "magic": 1}
        )
    if isinstance(key, ConfigKey):
        return _dumps({"keytype": "CONFIG", "subject": key.subject, "magic": 0})
    if isinstance(key, ModeKey):
        return _dumps({"keytype": "MODE", "subject": key.subject, "magic": 0})
    if isinstance(key, DeleteSubjectKey):
        return _dumps({"keytype": "DELETE_SUBJECT", "subject": key.subject, "magic": 0})
    return _dumps({"keytype": "CLEAR_SUBJECT", "subject": key.subject, "magic": 0})


def encode_schema_value(value: SchemaValue) -> bytes:
    body: dict[str, Any] = {"subject": value.subject, "version": value.version, "id": value.id}
    if value.schema_type != AVRO:
        body["schemaType"] = value.schema_type
    if value.references:
        body["references"] = [r.to_json() for r in value.references]
    body.update(value.extra)
    body["schema"] = value.schema
    body["deleted"] = value.deleted
    return _dumps(body)


def encode_config_value(compatibility: str) -> bytes:
    return _dumps({"compatibilityLevel": compatibility})


def encode_mode_value(mode: str) -> bytes:
    return _dumps({"mode": mode})


def encode_delete_subject_value(subject: str, version: int) -> bytes:
    return _dumps({"subject": subject, "version": version})


def encode_clear_subject_value(subject: str) -> bytes:
    return _dumps({"subject": subject})


def _load(data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordFormatError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise RecordFormatError("not a JSON object")
    return obj


def _subject(obj: dict[str, Any], nullable: bool = False) -> Any:
    subject = obj.get("subject")
    if subject is None and nullable:
        return None
    if not isinstance(subject, str):
        raise RecordFormatError(f"bad subject {subject!r}")
    return subject


def _int(obj: dict[str, Any], name: str) -> int:
    value = obj.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordFormatError(f"bad {name} {value!r}")
    return value


def decode_key(data: bytes) -> Key | None:
    """The key, or None for key types the registry ignores (NOOP and unknown ones)."""
    obj = _load(data)
    keytype = obj.get("keytype")
    if keytype == "SCHEMA":
        return SchemaKey(_subject(obj), _int(obj, "version"))
    if keytype == "CONFIG":
        return ConfigKey(_subject(obj, nullable=True))
    if keytype == "MODE":
        return ModeKey(_subject(obj, nullable=True))
    if keytype == "DELETE_SUBJECT":
        return DeleteSubjectKey(_subject(obj))
    if keytype == "CLEAR_SUBJECT":
        return ClearSubjectKey(_subject(obj))
    return None


_SCHEMA_FIELDS = {"subject", "version", "id", "schemaType", "references", "schema", "deleted"}


def decode_schema_value(data: bytes) -> SchemaValue:
    obj = _load(data)
    schema = obj.get("schema")
    if not isinstance(schema, str):
        raise RecordFormatError("schema value without a schema")
    schema_type = obj.get("schemaType") or AVRO
    if schema_type not in SCHEMA_TYPES:
        raise RecordFormatError(f"unknown schemaType {schema_type!r}")
    references = []
    for ref in obj.get("references") or ():
        if not isinstance(ref, dict):
            raise RecordFormatError("bad reference")
        name = ref.get("name")
        if not isinstance(name, str):
            raise RecordFormatError("reference without a name")
        references.append(Reference(name, _subject(ref), _int(ref, "version")))
    return SchemaValue(
        subject=_subject(obj),
        version=_int(obj, "version"),
        id=_int(obj, "id"),
        schema_type=schema_type,
        schema=schema,
        references=tuple(references),
        deleted=bool(obj.get("deleted", False)),
        extra={k: v for k, v in obj.items() if k not in _SCHEMA_FIELDS and v is not None},
    )


def decode_config_value(data: bytes) -> str | None:
    """The compatibility level of a CONFIG value (None if it sets none)."""
    level = _load(data).get("compatibilityLevel")
    return level if isinstance(level, str) else None


def decode_mode_value(data: bytes) -> str:
    mode = _load(data).get("mode")
    if not isinstance(mode, str):
        raise RecordFormatError(f"bad mode {mode!r}")
    return mode


def decode_delete_subject_value(data: bytes) -> int:
    return _int(_load(data), "version")
