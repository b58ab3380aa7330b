"""The registry's operations over its state, in three steps so the slow part runs off the
event loop:

1. ``prepare_*`` (on the loop, fast): check the request against the state and gather what the
   slow part needs, as immutable values (the referenced schemas, the versions to compare with);
2. ``analyse`` (in a worker thread, pure): parse the new schema and the stored ones not parsed
   yet, and check compatibility;
3. ``finish_*`` (on the loop, fast): the answer, and the records a write appends.

Compatibility (Confluent's levels): BACKWARD means the new schema reads data written with the
latest version, FORWARD that the latest reads data written with the new one, FULL both; the
TRANSITIVE forms compare with every live version instead of the latest; NONE with none. A
schema of another type than the version it is compared with is incompatible.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kbroker.schema_registry import errors
from kbroker.schema_registry.avro import AvroFormat
from kbroker.schema_registry.json_schema import JsonSchemaFormat
from kbroker.schema_registry.parsed import ParsedSchema, SchemaFormat, SchemaParseError
from kbroker.schema_registry.protobuf import ProtobufFormat
from kbroker.schema_registry.records import AVRO, SCHEMA_TYPES, Reference
from kbroker.schema_registry.state import (
    RegistryState,
    StoredSchema,
    SubjectVersion,
    identity_of,
    parse_version,
)

FORMATS: dict[str, SchemaFormat] = {
    AVRO: AvroFormat(),
    "JSON": JsonSchemaFormat(),
    "PROTOBUF": ProtobufFormat(),
}
# How deep references may nest (a cycle or a runaway chain is refused).
MAX_REFERENCE_DEPTH = 32


@dataclass(frozen=True, slots=True)
class SchemaTree:
    """A stored schema with the schemas it references, by the names it uses for them."""

    schema: StoredSchema
    references: tuple[tuple[str, SchemaTree], ...]


@dataclass(frozen=True, slots=True)
class NewSchema:
    """A schema in a request body."""

    schema_type: str
    text: str
    references: tuple[Reference, ...]
    resolved: tuple[tuple[str, SchemaTree], ...]
    normalize: bool
    requested_id: int | None = None
    requested_version: int | None = None


@dataclass(frozen=True, slots=True)
class Work:
    """What ``analyse`` needs: the new schema, the stored versions to check it against (with
    the direction of each check), and the stored schemas it should find it among."""

    new: NewSchema
    level: str
    compared: tuple[SchemaTree, ...] = ()
    candidates: tuple[SchemaTree, ...] = ()


@dataclass(slots=True)
class Analysis:
    parsed: ParsedSchema
    problems: list[str]
    # Ids among the candidates whose schema has the new schema's canonical form.
    same_as: set[int]
    # Stored schemas parsed on the way (for the registry's cache).
    parsed_stored: dict[int, ParsedSchema] = field(default_factory=dict)


def new_schema(body: Any, *, normalize: bool, state: RegistryState) -> NewSchema:
    """The schema of a register / lookup / compatibility request body (42201 / 422 on a bad
    body, 40401 / 40402 for references that do not exist)."""
    if not isinstance(body, dict):
        raise errors.unprocessable("Unrecognized request body: expected a JSON object")
    text = body.get("schema")
    if not isinstance(text, str):
        raise errors.invalid_schema("Empty schema")
    schema_type = body.get("schemaType") or AVRO
    if schema_type not in SCHEMA_TYPES:
        raise errors.RegistryError(422, 422, f"Invalid schema type {schema_type}")
    references: list[Reference] = []
    raw_refs = body.get("references") or []
    if not isinstance(raw_refs, list):
        raise errors.unprocessable("references: expected a list")
    for ref in raw_refs:
        if not isinstance(ref, dict):
            raise errors.unprocessable("a reference is an object")
        name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version")
        if not isinstance(name, str) or not isinstance(subject, str):
            raise errors.invalid_schema("reference without a name or subject")
        number = parse_version(version if isinstance(version, int | str) else "")
        if number == -1:
            number = state.version(subject, -1).version
        references.append(Reference(name, subject, number))
    requested_id = body.get("id")
    requested_version = body.get("version")
    return NewSchema(
        schema_type=schema_type,
        text=text,
        references=tuple(references),
        resolved=tuple(
            (r.name, tree_of(state, state.version(r.subject, r.version, deleted=True).schema))
            for r in references
        ),
        normalize=normalize,
        requested_id=requested_id if isinstance(requested_id, int) else None,
        requested_version=requested_version if isinstance(requested_version, int) else None,
    )


def tree_of(state: RegistryState, schema: StoredSchema, depth: int = 0) -> SchemaTree:
    if depth > MAX_REFERENCE_DEPTH:
        raise errors.invalid_schema("references nest too deep (or form a cycle)")
    return SchemaTree(
        schema,
        tuple(
            (
                r.name,
                tree_of(state, state.version(r.subject, r.version, deleted=True).schema, depth + 1),
            )
            for r in schema.references
        ),
    )


def _parse_tree(tree: SchemaTree, cache: dict[int, ParsedSchema]) -> ParsedSchema:
    found = cache.get(tree.schema.id)
    if found is not None:
        return found
    dependencies = [(name, _parse_tree(sub, cache)) for name, sub in tree.references]
    parsed = FORMATS[tree.schema.schema_type].parse(tree.schema.text, dependencies, False)
    cache[tree.schema.id] = parsed
    return parsed


def analyse(work: Work, known: Mapping[int, ParsedSchema]) -> Analysis:
    """Parse and check (pure; run in a worker thread). ``known``: schemas parsed before."""
    cache = dict(known)
    new = work.new
    try:
        dependencies = [(name, _parse_tree(tree, cache)) for name, tree in new.resolved]
        parsed = FORMATS[new.schema_type].parse(new.text, dependencies, new.normalize)
    except SchemaParseError as exc:
        raise errors.invalid_schema(str(exc)) from exc
    problems: list[str] = []
    for tree in work.compared:
        if tree.schema.schema_type != new.schema_type:
            problems.append(
                f"Incompatible because of different schema type "
                f"({new.schema_type} after {tree.schema.schema_type})"
            )
            continue
        try:
            other = _parse_tree(tree, cache)
        except SchemaParseError as exc:
            problems.append(f"stored schema {tree.schema.id} does not parse: {exc}")
            continue
        problems.extend(_check(FORMATS[new.schema_type], work.level, parsed, other))
    same_as: set[int] = set()
    for tree in work.candidates:
        if tree.schema.schema_type != new.schema_type:
            continue
        try:
            other = _parse_tree(tree, cache)
        except SchemaParseError:
            continue
        if other.canonical == parsed.canonical:
            same_as.add(tree.schema.id)
    fresh = {i: p for i, p in cache.items() if i not in known}
    return Analysis(parsed, problems, same_as, fresh)


def _check(fmt: SchemaFormat, level: str, new: ParsedSchema, old: ParsedSchema) -> list[str]:
    problems: list[str] = []
    if level.startswith(("BACKWARD", "FULL")):
        problems.extend(fmt.incompatibilities(new, old))
    if level.startswith(("FORWARD", "FULL")):
        problems.extend(fmt.incompatibilities(old, new))
    return problems


# --- register --------------------------------------------------------------------------------


def prepare_register(state: RegistryState, subject: str, new: NewSchema) -> Work:
    state.check_writable(subject)
    level = state.compatibility_of(subject)
    if state.mode_of(subject) == "IMPORT":
        level = "NONE"
    compared = tuple(tree_of(state, v.schema) for v in state.compared_versions(subject, level))
    return Work(new, level, compared, _candidates(state, subject, new))


def _candidates(state: RegistryState, subject: str, new: NewSchema) -> tuple[SchemaTree, ...]:
    """The subject's versions of the new schema's type: one may be the same schema written
    differently (a Protobuf descriptor and its text, a schema registered with normalize)."""
    versions = state.subjects.get(subject, {}).values()
    unique = {
        v.schema.id: v.schema
        for v in versions
        if v.schema.schema_type == new.schema_type and v.schema.references == new.references
    }
    return tuple(tree_of(state, s) for s in unique.values())


def finish_register(
    state: RegistryState, subject: str, work: Work, analysis: Analysis
) -> tuple[dict[str, Any], list[tuple[bytes, bytes | None]]]:
    """The answer (``{"id": N}``) and the record to append (none when the subject already has
    the schema)."""
    new = work.new
    text = analysis.parsed.text
    identity = identity_of(new.schema_type, text, new.references)
    existing = state.find(subject, identity, analysis.same_as)
    if existing is not None and new.requested_id in (None, -1, existing.schema.id):
        return {"id": existing.schema.id}, []
    if analysis.problems:
        raise errors.incompatible(analysis.problems)
    schema_id, _, records = state.plan_register(
        subject,
        new.schema_type,
        text,
        new.references,
        analysis.same_as,
        requested_id=new.requested_id,
        requested_version=new.requested_version,
    )
    return {"id": schema_id}, records


# --- lookup and compatibility ------------------------------------------------------------


def prepare_lookup(state: RegistryState, subject: str, new: NewSchema, deleted: bool) -> Work:
    if subject not in state.subjects or not state.subject_names(deleted=True, prefix=subject):
        raise errors.subject_not_found(subject)
    pool = [v.schema for v in state.subjects[subject].values() if deleted or not v.deleted]
    unique = {s.id: s for s in pool}
    return Work(new, "NONE", (), tuple(tree_of(state, s) for s in unique.values()))


def finish_lookup(
    state: RegistryState, subject: str, work: Work, analysis: Analysis, deleted: bool
) -> SubjectVersion:
    identity = identity_of(work.new.schema_type, analysis.parsed.text, work.new.references)
    found = state.find(subject, identity, analysis.same_as, deleted=deleted)
    if found is None:
        raise errors.schema_not_found("Schema not found")
    return found


def prepare_compatibility(
    state: RegistryState, subject: str, version: str | None, new: NewSchema
) -> Work:
    """Against one version (``version``: a number or latest), or with None every version the
    subject's level compares with."""
    level = state.compatibility_of(subject)
    if version is None:
        versions = state.compared_versions(subject, level)
    else:
        number = parse_version(version)
        if number == -1 and not state.subject_names(prefix=subject):
            versions = []
        else:
            versions = [state.version(subject, number)]
        if level == "NONE":
            versions = []
    return Work(new, level, tuple(tree_of(state, v.schema) for v in versions))


def compatibility_answer(analysis: Analysis, verbose: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {"is_compatible": not analysis.problems}
    if verbose:
        answer["messages"] = analysis.problems
    return answer


# --- answers ---------------------------------------------------------------------------------


def schema_fields(schema: StoredSchema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if schema.schema_type != AVRO:
        out["schemaType"] = schema.schema_type
    if schema.references:
        out["references"] = [r.to_json() for r in schema.references]
    return out


def version_answer(entry: SubjectVersion, schema_text: str | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "subject": entry.subject,
        "version": entry.version,
        "id": entry.schema.id,
    }
    answer.update(schema_fields(entry.schema))
    answer["schema"] = entry.schema.text if schema_text is None else schema_text
    if entry.deleted:
        answer["deleted"] = True
    return answer
