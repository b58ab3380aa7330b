"""JSON Schema, with the ``jsonschema`` library for each draft's meta-schema (draft-04, -06, -07,
2019-09 and 2020-12, chosen by ``$schema``; draft-07 when absent, as Confluent's registry).

The stored text is the schema's compact JSON (key order kept). References name other subjects'
schemas by the URL the schema's ``$ref`` uses; they are registered with the ``referencing``
library so the meta-schema check and ``$ref`` resolution find them.

Compatibility (whether everything the writer schema accepts, the reader accepts too) follows the
rules of Confluent's JSON Schema checker for what schemas commonly change:

- ``type``: the reader must allow every type the writer allows (``integer`` fits ``number``);
- objects: a property the reader adds must not be required, and must not be added to a writer
  with an open content model (the writer's data may hold anything under that name:
  PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL); a property the writer has and the reader lacks is fine
  only if the reader's model is open (else PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL);
  ``additionalProperties`` may not go from allowed to forbidden; properties compared
  recursively;
- arrays: ``items`` compared recursively; ``enum``: the reader keeps every writer value;
- bounds (``minimum``, ``maximum``, ``minLength``, ``maxLength``, ``minItems``, ``maxItems``,
  ``minProperties``, ``maxProperties``, exclusive bounds): the reader may widen, not narrow;
  a ``pattern`` or ``format`` may not be added or changed;
- combined schemas (``oneOf``, ``anyOf``): each writer branch must fit some reader branch; a
  ``$ref`` or any other change the rules do not cover must stay exactly as it was.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import referencing
import referencing.exceptions
import referencing.jsonschema

from kbroker.schema_registry.parsed import ParsedSchema, SchemaParseError
from kbroker.schema_registry.records import JSON

_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_HANDLED = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "oneOf",
    "anyOf",
    "title",
    "description",
    "$schema",
    "$id",
    "default",
    "examples",
    "definitions",
    "$defs",
    *_LOWER_BOUNDS,
    *_UPPER_BOUNDS,
}


def _compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class JsonSchemaFormat:
    name = JSON

    def parse(
        self, text: str, references: list[tuple[str, ParsedSchema]], normalize: bool
    ) -> ParsedSchema:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SchemaParseError(f"Invalid JSON {text[:200]!r}: {exc}") from exc
        if not isinstance(obj, dict | bool):
            raise SchemaParseError("Invalid schema: a JSON schema is an object or a boolean")
        dependencies: list[tuple[str, ParsedSchema]] = []
        for name, parsed in references:
            dependencies.extend(parsed.dependencies)
            dependencies.append((name, parsed))
        default = jsonschema.validators.Draft7Validator
        validator = (
            jsonschema.validators.validator_for(obj, default=default)
            if isinstance(obj, dict)
            else default
        )
        try:
            validator.check_schema(obj)
            registry: referencing.Registry[Any] = referencing.Registry()
            for name, parsed in dependencies:
                resource = referencing.Resource.from_contents(
                    parsed.native, default_specification=referencing.jsonschema.DRAFT7
                )
                registry = registry.with_resource(name, resource)
            native = validator(obj, registry=registry)
        except jsonschema.exceptions.SchemaError as exc:
            raise SchemaParseError(f"Invalid schema: {exc.message}") from exc
        except referencing.exceptions.Unresolvable as exc:
            raise SchemaParseError(f"Invalid schema: {exc}") from exc
        stored = _compact(obj)
        canonical = json.dumps(obj, sort_keys=True, separators=(",", ":")) if normalize else stored
        return ParsedSchema(JSON, stored, canonical, native.schema, tuple(dependencies))

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        problems: list[str] = []
        _compare(reader.native, writer.native, "#", problems)
        return problems


def _types(schema: dict[str, Any]) -> set[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None
    return {declared} if isinstance(declared, str) else set(declared)


def _is_open(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is not False


def _compare(reader: Any, writer: Any, path: str, problems: list[str]) -> None:
    if reader == writer or reader is True or reader == {}:
        return
    if writer is False:
        return
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        problems.append(f"{{errorType:'TYPE_CHANGED', location:'{path}'}}")
        return
    if set(reader) - _HANDLED or set(writer) - _HANDLED:
        others = (set(reader) | set(writer)) - _HANDLED
        changed = sorted(k for k in others if reader.get(k) != writer.get(k))
        for keyword in changed:
            problems.append(f"{{errorType:'{keyword.upper()}_CHANGED', location:'{path}'}}")
    for combiner in ("oneOf", "anyOf"):
        if combiner in reader or combiner in writer:
            _compare_branches(reader, writer, combiner, path, problems)
    reader_types, writer_types = _types(reader), _types(writer)
    if reader_types is not None:
        if writer_types is None:
            problems.append(f"{{errorType:'TYPE_NARROWED', location:'{path}'}}")
        else:
            widened = reader_types | ({"integer"} if "number" in reader_types else set())
            if not writer_types <= widened:
                problems.append(
                    f"{{errorType:'TYPE_NARROWED', location:'{path}', "
                    f"additionalInfo:'{sorted(writer_types - widened)}'}}"
                )
    if "enum" in reader:
        writer_values = writer.get("enum")
        if writer_values is None or any(v not in reader["enum"] for v in writer_values):
            problems.append(f"{{errorType:'ENUM_ARRAY_NARROWED', location:'{path}'}}")
    for name in _LOWER_BOUNDS:
        if name in reader and (name not in writer or reader[name] > writer[name]):
            problems.append(f"{{errorType:'{name.upper()}_INCREASED', location:'{path}'}}")
    for name in _UPPER_BOUNDS:
        if name in reader and (name not in writer or reader[name] < writer[name]):
            problems.append(f"{{errorType:'{name.upper()}_DECREASED', location:'{path}'}}")
    _compare_objects(reader, writer, path, problems)
    if "items" in reader or "items" in writer:
        _compare(reader.get("items", True), writer.get("items", True), f"{path}/items", problems)


def _compare_branches(
    reader: dict[str, Any], writer: dict[str, Any], combiner: str, path: str, problems: list[str]
) -> None:
    reader_branches = reader.get(combiner) or reader.get("oneOf") or reader.get("anyOf") or [reader]
    writer_branches = writer.get(combiner) or writer.get("oneOf") or writer.get("anyOf") or [writer]
    for index, branch in enumerate(writer_branches):
        fits = False
        for candidate in reader_branches:
            trial: list[str] = []
            _compare(candidate, branch, f"{path}/{combiner}/{index}", trial)
            if not trial:
                fits = True
                break
        if not fits:
            problems.append(f"{{errorType:'COMBINED_TYPE_SUBSCHEMAS_CHANGED', location:'{path}'}}")
            return


def _compare_objects(
    reader: dict[str, Any], writer: dict[str, Any], path: str, problems: list[str]
) -> None:
    reader_props: dict[str, Any] = reader.get("properties", {})
    writer_props: dict[str, Any] = writer.get("properties", {})
    if not reader_props and not writer_props and "required" not in reader:
        if _is_open(writer) and not _is_open(reader):
            problems.append(f"{{errorType:'ADDITIONAL_PROPERTIES_REMOVED', location:'{path}'}}")
        return
    writer_required = set(writer.get("required", ()))
    for name in sorted(set(reader.get("required", ())) - writer_required):
        problems.append(
            f"{{errorType:'REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL', "
            f"location:'{path}/properties/{name}'}}"
        )
    for name, schema in reader_props.items():
        where = f"{path}/properties/{name}"
        if name in writer_props:
            _compare(schema, writer_props[name], where, problems)
        elif _is_open(writer):
            writer_extra = writer.get("additionalProperties", True)
            trial: list[str] = []
            _compare(schema, writer_extra, where, trial)
            if trial:
                problems.append(
                    f"{{errorType:'PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL', location:'{where}'}}"
                )
    for name, schema in writer_props.items():
        if name in reader_props:
            continue
        reader_extra = reader.get("additionalProperties", True)
        if reader_extra is False:
            problems.append(
                f"{{errorType:'PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL', "
                f"location:'{path}/properties/{name}'}}"
            )
        else:
            _compare(reader_extra, schema, f"{path}/properties/{name}", problems)
    if _is_open(writer) and not _is_open(reader):
        problems.append(f"{{errorType:'ADDITIONAL_PROPERTIES_REMOVED', location:'{path}'}}")
