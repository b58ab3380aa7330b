"""Avro schemas, with Apache Avro's Python library.

- Parsing: ``avro.schema.make_avsc_object`` with the named types of the referenced schemas
  already known (a reference's name is the full name of the type it defines), so a schema may
  use them by name.
- The stored text is the schema as Avro's own JSON rendering gives it, compact (Confluent
  stores the Java library's ``toString()``, the same normalisation: ``{"type": "string"}`` is
  stored as ``"string"``, layout and whitespace are dropped, named types from references stay
  references). Two registrations are the same schema when these texts are equal; doc, default,
  aliases and custom properties are part of a schema, as in Confluent's registry.
- Compatibility: Avro's schema-resolution rules (the specification's "Schema Resolution":
  promotions int->long->float->double, string<->bytes, matching named types by unqualified
  name, reader fields missing from the writer need a default, enum symbols, union branches), as
  implemented by the library's ``ReaderWriterCompatibilityChecker``, itself a port of the Java
  library's ``SchemaCompatibility`` that Confluent's registry uses.
"""

from __future__ import annotations

import json

import avro.compatibility
import avro.errors
import avro.name
import avro.schema

from kbroker.schema_registry.parsed import ParsedSchema, SchemaParseError
from kbroker.schema_registry.records import AVRO

_DESCRIPTIONS = {
    "name_mismatch": "The name of the schema has changed",
    "fixed_size_mismatch": "The size of FIXED type field has changed",
    "missing_enum_symbols": "The new schema is missing enum symbols",
    "reader_field_missing_default_value": "A field in the new schema has no default value and "
    "is missing in the old schema",
    "type_mismatch": "The type of a field has changed",
    "missing_union_branch": "The new schema is missing a type inside a union field",
}


def _compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _names_with(dependencies: list[tuple[str, ParsedSchema]]) -> avro.name.Names:
    names = avro.name.Names()
    for _, dependency in dependencies:
        avro.schema.make_avsc_object(json.loads(dependency.text), names)
    return names


def _flatten(references: list[tuple[str, ParsedSchema]]) -> list[tuple[str, ParsedSchema]]:
    """Every schema the references bring in, dependencies first, each once."""
    out: list[tuple[str, ParsedSchema]] = []
    seen: set[str] = set()
    for name, parsed in references:
        for entry in (*parsed.dependencies, (name, parsed)):
            if entry[1].text not in seen:
                seen.add(entry[1].text)
                out.append(entry)
    return out


class AvroFormat:
    name = AVRO

    def parse(
        self, text: str, references: list[tuple[str, ParsedSchema]], normalize: bool
    ) -> ParsedSchema:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SchemaParseError(f"Invalid schema: {exc}") from exc
        dependencies = _flatten(references)
        try:
            names = _names_with(dependencies)
            schema = avro.schema.make_avsc_object(obj, names)
            rendering = avro.name.Names()
            for _, dependency in dependencies:
                dependency.native.to_json(rendering)
            stored = _compact(schema.to_json(rendering))
        except (avro.errors.AvroException, TypeError, KeyError, ValueError) as exc:
            raise SchemaParseError(f"Invalid schema: {exc}") from exc
        canonical = schema.canonical_form if normalize and not dependencies else stored
        return ParsedSchema(AVRO, stored, canonical, schema, tuple(dependencies))

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(
            reader.native, writer.native
        )
        if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
            return []
        kinds = [kind.value for kind in result.incompatibilities]
        where = ", ".join(sorted(result.locations)) or "/"
        details = ", ".join(sorted(result.messages)) if result.messages else ""
        return [
            f"{{errorType:'{kind.upper()}', description:'{_DESCRIPTIONS.get(kind, kind)}', "
            f"location:'{where}'" + (f", additionalInfo:'{details}'" if details else "") + "}"
            for kind in kinds
        ]


def fingerprint(parsed: ParsedSchema) -> bytes:
    """The schema's CRC-64-AVRO fingerprint of its Parsing Canonical Form (single-object
    encoding's schema fingerprint)."""
    return bytes(parsed.native.fingerprint("CRC-64-AVRO"))
