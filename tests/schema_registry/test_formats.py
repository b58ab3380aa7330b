"""The three schema types: parsing, normal forms, and compatibility (reader vs writer), with
cases from the Avro specification's "Schema Resolution", Confluent's JSON Schema content-model
rules and Protobuf's wire-compatible changes."""

from __future__ import annotations

import json

import pytest
from google.protobuf import descriptor_pb2

from kbroker.schema_registry.avro import AvroFormat, fingerprint
from kbroker.schema_registry.json_schema import JsonSchemaFormat
from kbroker.schema_registry.parsed import ParsedSchema, SchemaParseError
from kbroker.schema_registry.protobuf import ProtobufFormat, serialized

AVRO = AvroFormat()
JSON_SCHEMA = JsonSchemaFormat()
PROTOBUF = ProtobufFormat()


def avro(obj: object) -> ParsedSchema:
    return AVRO.parse(json.dumps(obj), [], False)


def record(*fields: dict[str, object], name: str = "R") -> ParsedSchema:
    return avro({"type": "record", "name": name, "fields": list(fields)})


def reads(reader: ParsedSchema, writer: ParsedSchema) -> bool:
    return not AVRO.incompatibilities(reader, writer)


def test_avro_normal_form_canonical_form_and_fingerprint() -> None:
    parsed = AVRO.parse('{ "type" : "string" }', [], False)
    assert parsed.text == '"string"'
    with_doc = avro({"type": "record", "name": "R", "doc": "x", "fields": []})
    assert "doc" in with_doc.text  # doc is part of the schema, as in Confluent's registry
    normal = AVRO.parse(with_doc.text, [], True)
    assert normal.canonical == '{"name":"R","type":"record","fields":[]}'
    # The specification's CRC-64-AVRO fingerprint of "int" (its example value).
    assert fingerprint(avro("int")).hex() == "8f5c393f1ad57572"
    with pytest.raises(SchemaParseError):
        avro({"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]})


@pytest.mark.parametrize(
    ("writer", "reader"),
    [("int", "long"), ("int", "float"), ("int", "double"), ("long", "double"), ("float", "double")],
)
def test_avro_promotions(writer: str, reader: str) -> None:
    assert reads(avro(reader), avro(writer))
    assert not reads(avro(writer), avro(reader))


def test_avro_string_and_bytes_read_each_other() -> None:
    assert reads(avro("string"), avro("bytes")) and reads(avro("bytes"), avro("string"))


def test_avro_record_fields_need_defaults_when_added() -> None:
    old = record({"name": "a", "type": "int"})
    added_with_default = record(
        {"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1}
    )
    added_without = record({"name": "a", "type": "int"}, {"name": "b", "type": "int"})
    assert reads(added_with_default, old)
    assert not reads(added_without, old)
    # A field the reader drops is ignored.
    assert reads(old, added_without)
    problems = AVRO.incompatibilities(added_without, old)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in problems[0]


def test_avro_named_types_must_match_by_name_and_enum_symbols() -> None:
    assert not reads(
        record({"name": "a", "type": "int"}, name="S"), record({"name": "a", "type": "int"})
    )
    small = avro({"type": "enum", "name": "E", "symbols": ["A", "B"]})
    large = avro({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]})
    assert reads(large, small)
    assert not reads(small, large)  # C written, unknown to the reader (no default)
    with_default = avro({"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"})
    assert reads(with_default, large)


def test_avro_unions() -> None:
    nullable = avro(["null", "string"])
    assert reads(nullable, avro("string"))
    assert not reads(avro("string"), nullable)  # null written, the reader has no branch
    assert reads(avro(["null", "long"]), avro(["null", "int"]))


def test_avro_fixed_size() -> None:
    assert not reads(
        avro({"type": "fixed", "name": "F", "size": 4}),
        avro({"type": "fixed", "name": "F", "size": 8}),
    )


def schema_json(obj: object) -> ParsedSchema:
    return JSON_SCHEMA.parse(json.dumps(obj), [], False)


def obj(properties: dict[str, object], **extra: object) -> ParsedSchema:
    return schema_json({"type": "object", "properties": properties, **extra})


def test_json_schema_checks_the_meta_schema_of_its_draft() -> None:
    with pytest.raises(SchemaParseError):
        schema_json({"type": "nonsense"})
    with pytest.raises(SchemaParseError):
        JSON_SCHEMA.parse("{not json", [], False)
    draft = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}
    assert schema_json(draft).text == json.dumps(draft, separators=(",", ":"))


def test_json_schema_content_models() -> None:
    string = {"type": "string"}
    open_one = obj({"a": string})
    open_two = obj({"a": string, "b": {"type": "integer"}})
    closed_one = obj({"a": string}, additionalProperties=False)
    closed_two = obj({"a": string, "b": {"type": "integer"}}, additionalProperties=False)
    # A property added to an open model: data written before may hold anything under "b".
    assert JSON_SCHEMA.incompatibilities(open_two, open_one)
    # Added to a closed model: nothing was written under "b".
    assert not JSON_SCHEMA.incompatibilities(closed_two, closed_one)
    # Removed from an open reader: fine; from a closed one: the old data breaks it.
    assert not JSON_SCHEMA.incompatibilities(open_one, open_two)
    assert JSON_SCHEMA.incompatibilities(closed_one, closed_two)
    required = obj({"a": string}, required=["a"])
    assert JSON_SCHEMA.incompatibilities(required, open_one)
    assert not JSON_SCHEMA.incompatibilities(open_one, required)


def test_json_schema_types_enums_and_bounds() -> None:
    assert not JSON_SCHEMA.incompatibilities(
        schema_json({"type": "number"}), schema_json({"type": "integer"})
    )
    assert JSON_SCHEMA.incompatibilities(
        schema_json({"type": "integer"}), schema_json({"type": "number"})
    )
    assert not JSON_SCHEMA.incompatibilities(
        schema_json({"enum": [1, 2, 3]}), schema_json({"enum": [1, 2]})
    )
    assert JSON_SCHEMA.incompatibilities(schema_json({"enum": [1]}), schema_json({"enum": [1, 2]}))
    narrow = schema_json({"type": "string", "maxLength": 5})
    wide = schema_json({"type": "string", "maxLength": 10})
    assert JSON_SCHEMA.incompatibilities(narrow, wide)
    assert not JSON_SCHEMA.incompatibilities(wide, narrow)


USER_PROTO = """syntax = "proto3";
package demo;
import "google/protobuf/timestamp.proto";

message User {
  string name = 1;
  int32 age = 2;
  map<string, int64> tags = 3;
  oneof contact {
    string email = 4;
    int64 phone = 5;
  }
  google.protobuf.Timestamp created = 6;
  repeated Address addresses = 7;
  message Address { string city = 1; }
  enum Kind { UNKNOWN = 0; ADMIN = 1; }
  Kind kind = 8;
}
"""


def proto(text: str) -> ParsedSchema:
    return PROTOBUF.parse(text, [], False)


def test_protobuf_text_and_descriptor_are_one_schema() -> None:
    parsed = proto(USER_PROTO)
    assert parsed.text == USER_PROTO
    as_descriptor = PROTOBUF.parse(serialized(parsed), [], False)
    assert as_descriptor.canonical == parsed.canonical
    assert "message User" in as_descriptor.text  # stored as .proto text
    # The printed text compiles back to the same descriptor.
    again = proto(as_descriptor.text)
    assert again.canonical == parsed.canonical
    assert isinstance(again.native, descriptor_pb2.FileDescriptorProto)


def test_protobuf_errors_come_from_protoc() -> None:
    with pytest.raises(SchemaParseError, match="Strin"):
        proto('syntax = "proto3"; message X { Strin a = 1; }')


def test_protobuf_compatibility() -> None:
    base = proto('syntax = "proto3"; package p; message M { int32 a = 1; string b = 2; }')
    widened = proto('syntax = "proto3"; package p; message M { int64 a = 1; string b = 2; }')
    removed = proto('syntax = "proto3"; package p; message M { int32 a = 1; }')
    retyped = proto('syntax = "proto3"; package p; message M { string a = 1; string b = 2; }')
    renamed = proto('syntax = "proto3"; package q; message M { int32 a = 1; string b = 2; }')
    gone = proto('syntax = "proto3"; package p; message N { int32 a = 1; }')
    assert not PROTOBUF.incompatibilities(widened, base)  # int32 and int64 share a wire type
    assert not PROTOBUF.incompatibilities(removed, base)
    assert "FIELD_SCALAR_KIND_CHANGED" in PROTOBUF.incompatibilities(retyped, base)[0]
    assert "PACKAGE_CHANGED" in PROTOBUF.incompatibilities(renamed, base)[0]
    assert any("MESSAGE_REMOVED" in p for p in PROTOBUF.incompatibilities(gone, base))


def test_protobuf_references() -> None:
    other = proto('syntax = "proto3"; package lib; message Money { int64 cents = 1; }')
    text = 'syntax = "proto3"; import "lib/money.proto"; message Order { lib.Money total = 1; }'
    parsed = PROTOBUF.parse(text, [("lib/money.proto", other)], False)
    assert list(parsed.native.dependency) == ["lib/money.proto"]
    with pytest.raises(SchemaParseError):
        proto(text)
