"""Protobuf schemas: ``.proto`` text or a base64 ``FileDescriptorProto``, as clients send them.

confluent-kafka's ``ProtobufSerializer`` registers the base64 serialized descriptor of the
message's file and its deserializer asks for it back (``?format=serialized``); the Java
serializers and people send ``.proto`` text. Both become a ``FileDescriptorProto``:

- text goes through protoc itself (grpcio-tools' bundled compiler, run as a child process so
  that its messages can be given back and a crash or a runaway input cannot hurt the broker),
  with the referenced schemas written under the names the imports use and the well-known types
  (``google/protobuf/*.proto``) on the include path;
- a base64 descriptor is decoded and built in a descriptor pool with its references, which
  checks that every type it names exists.

The descriptor is then printed back as ``.proto`` text (fully qualified type names): that text
decides whether two registrations are the same schema, so the text and the descriptor of one
schema get one id; a schema registered as a descriptor is stored as that text, as Confluent's
registry does.

Compatibility follows Confluent's Protobuf rules for the changes that break readers: a message
removed, a field's kind (scalar, message, enum, map), scalar type outside its wire-compatible
group, named type or cardinality changed, a required field added or removed, a field moved into
or out of a oneof, the package changed. Adding and removing optional fields and enum values is
compatible (unknown fields are skipped).
"""

from __future__ import annotations

import base64
import binascii
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from kbroker.schema_registry.parsed import ParsedSchema, SchemaParseError
from kbroker.schema_registry.records import PROTOBUF

FDP = descriptor_pb2.FileDescriptorProto
FIELD = descriptor_pb2.FieldDescriptorProto
PROTOC_TIMEOUT_SECONDS = 30
MAIN_FILE = "schema.proto"
WELL_KNOWN_PREFIX = "google/protobuf/"

_SCALARS = {
    FIELD.TYPE_DOUBLE: "double",
    FIELD.TYPE_FLOAT: "float",
    FIELD.TYPE_INT64: "int64",
    FIELD.TYPE_UINT64: "uint64",
    FIELD.TYPE_INT32: "int32",
    FIELD.TYPE_FIXED64: "fixed64",
    FIELD.TYPE_FIXED32: "fixed32",
    FIELD.TYPE_BOOL: "bool",
    FIELD.TYPE_STRING: "string",
    FIELD.TYPE_BYTES: "bytes",
    FIELD.TYPE_UINT32: "uint32",
    FIELD.TYPE_SFIXED32: "sfixed32",
    FIELD.TYPE_SFIXED64: "sfixed64",
    FIELD.TYPE_SINT32: "sint32",
    FIELD.TYPE_SINT64: "sint64",
}
# Scalars that read each other's wire values (the Protobuf language guide's "Updating A Message
# Type"), as Confluent's checker groups them.
_WIRE_GROUPS = [
    {FIELD.TYPE_INT32, FIELD.TYPE_UINT32, FIELD.TYPE_INT64, FIELD.TYPE_UINT64, FIELD.TYPE_BOOL},
    {FIELD.TYPE_SINT32, FIELD.TYPE_SINT64},
    {FIELD.TYPE_FIXED32, FIELD.TYPE_SFIXED32},
    {FIELD.TYPE_FIXED64, FIELD.TYPE_SFIXED64},
    {FIELD.TYPE_STRING, FIELD.TYPE_BYTES},
]
_LABELS = {FIELD.LABEL_OPTIONAL: "optional", FIELD.LABEL_REQUIRED: "required"}


def _well_known_dir() -> Path:
    return Path(str(resources.files("grpc_tools") / "_proto"))


def _decode_base64(text: str) -> FDP | None:
    stripped = "".join(text.split())
    if not stripped or any(c in stripped for c in ';{}"'):
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        proto = FDP.FromString(raw)
    except DecodeError:
        return None
    return proto if proto.ByteSize() else None


def _compile(text: str, dependencies: list[tuple[str, ParsedSchema]]) -> FDP:
    """protoc on ``text`` with the references written under their import names."""
    with tempfile.TemporaryDirectory(prefix="kbroker-proto-") as tmp:
        root = Path(tmp)
        main = MAIN_FILE
        names = {name for name, _ in dependencies}
        while main in names:
            main = "_" + main
        for name, parsed in dependencies:
            path = root / name
            if not path.resolve().is_relative_to(root.resolve()):
                raise SchemaParseError(f"Invalid schema: reference name {name!r} is not a path")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(to_text(parsed.native) if parsed.native is not None else parsed.text)
        (root / main).write_text(text)
        out = root / "descriptor.pb"
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "grpc_tools.protoc",
                    f"-I{root}",
                    f"-I{_well_known_dir()}",
                    f"--descriptor_set_out={out}",
                    main,
                ],
                capture_output=True,
                text=True,
                timeout=PROTOC_TIMEOUT_SECONDS,
                cwd=root,
            )
        except subprocess.TimeoutExpired as exc:
            raise SchemaParseError("Invalid schema: protoc took too long") from exc
        if done.returncode != 0:
            message = done.stderr.strip().replace(str(root) + "/", "")
            raise SchemaParseError(f"Invalid schema: {message or 'protoc failed'}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return files[-1]


def _well_known(name: str) -> FDP | None:
    if not name.startswith(WELL_KNOWN_PREFIX):
        return None
    pool = descriptor_pool.Default()
    module = name[len(WELL_KNOWN_PREFIX) : -len(".proto")] + "_pb2"
    try:
        __import__(f"google.protobuf.{module}")
        found = pool.FindFileByName(name)
    except (ImportError, KeyError):
        return None
    proto = FDP()
    found.CopyToProto(proto)
    return proto


def _check_builds(proto: FDP, dependencies: list[tuple[str, ParsedSchema]]) -> None:
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: FDP) -> None:
        if file.name in added:
            return
        for dependency in file.dependency:
            known = _well_known(dependency)
            if known is not None:
                add(known)
        added.add(file.name)
        pool.Add(file)

    try:
        for name, parsed in dependencies:
            dependency = FDP()
            dependency.CopyFrom(parsed.native)
            dependency.name = name
            add(dependency)
        add(proto)
        pool.FindFileByName(proto.name)
    except (TypeError, KeyError, ValueError) as exc:
        raise SchemaParseError(f"Invalid schema: {exc}") from exc


class ProtobufFormat:
    name = PROTOBUF

    def parse(
        self, text: str, references: list[tuple[str, ParsedSchema]], normalize: bool
    ) -> ParsedSchema:
        dependencies: list[tuple[str, ParsedSchema]] = []
        for name, parsed in references:
            dependencies.extend(parsed.dependencies)
            dependencies.append((name, parsed))
        proto = _decode_base64(text)
        if proto is not None:
            if not proto.name:
                proto.name = MAIN_FILE
            _check_builds(proto, dependencies)
            printed = to_text(proto)
            return ParsedSchema(PROTOBUF, printed, printed, proto, tuple(dependencies))
        proto = _compile(text, dependencies)
        printed = to_text(proto)
        stored = printed if normalize else text
        return ParsedSchema(PROTOBUF, stored, printed, proto, tuple(dependencies))

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        problems: list[str] = []
        old, new = writer.native, reader.native
        if old.package != new.package:
            problems.append("{errorType:'PACKAGE_CHANGED', location:'#/'}")
        old_messages = _messages(old)
        new_messages = _messages(new)
        for name, message in old_messages.items():
            if name not in new_messages:
                problems.append(f"{{errorType:'MESSAGE_REMOVED', location:'#/{name}'}}")
                continue
            _compare_message(new_messages[name], message, name, new_messages, problems)
        return problems


def _messages(proto: FDP) -> dict[str, descriptor_pb2.DescriptorProto]:
    out: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(prefix: str, messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            if message.options.map_entry:
                continue
            name = f"{prefix}.{message.name}" if prefix else message.name
            out[name] = message
            walk(name, list(message.nested_type))

    walk(proto.package, list(proto.message_type))
    return out


def _kind(
    field: descriptor_pb2.FieldDescriptorProto, message: descriptor_pb2.DescriptorProto
) -> str:
    if field.type == FIELD.TYPE_MESSAGE:
        entry = field.type_name.rsplit(".", 1)[-1]
        for nested in message.nested_type:
            if nested.name == entry and nested.options.map_entry:
                return "map"
        return "message"
    if field.type == FIELD.TYPE_ENUM:
        return "enum"
    return "scalar"


def _real_oneof(field: descriptor_pb2.FieldDescriptorProto) -> int | None:
    if field.HasField("oneof_index") and not field.proto3_optional:
        return field.oneof_index
    return None


def _compare_message(
    new: descriptor_pb2.DescriptorProto,
    old: descriptor_pb2.DescriptorProto,
    path: str,
    new_messages: dict[str, descriptor_pb2.DescriptorProto],
    problems: list[str],
) -> None:
    new_fields = {f.number: f for f in new.field}
    old_fields = {f.number: f for f in old.field}
    for number, field in old_fields.items():
        where = f"#/{path}/{number}"
        if number not in new_fields:
            if field.label == FIELD.LABEL_REQUIRED:
                problems.append(f"{{errorType:'REQUIRED_FIELD_REMOVED', location:'{where}'}}")
            continue
        other = new_fields[number]
        old_kind, new_kind = _kind(field, old), _kind(other, new)
        if old_kind != new_kind:
            problems.append(f"{{errorType:'FIELD_KIND_CHANGED', location:'{where}'}}")
        elif old_kind == "scalar" and field.type != other.type:
            if not any(field.type in g and other.type in g for g in _WIRE_GROUPS):
                problems.append(f"{{errorType:'FIELD_SCALAR_KIND_CHANGED', location:'{where}'}}")
        elif old_kind in ("message", "enum") and field.type_name != other.type_name:
            problems.append(f"{{errorType:'FIELD_NAMED_TYPE_CHANGED', location:'{where}'}}")
        if (field.label == FIELD.LABEL_REPEATED) != (other.label == FIELD.LABEL_REPEATED):
            problems.append(f"{{errorType:'FIELD_KIND_CHANGED', location:'{where}'}}")
        if (_real_oneof(field) is None) != (_real_oneof(other) is None):
            problems.append(f"{{errorType:'FIELD_ONEOF_CHANGED', location:'{where}'}}")
    for number, field in new_fields.items():
        if number not in old_fields and field.label == FIELD.LABEL_REQUIRED:
            problems.append(f"{{errorType:'REQUIRED_FIELD_ADDED', location:'#/{path}/{number}'}}")


# --- printing a descriptor as .proto text -----------------------------------------------------


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _option_value(value: object, field: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    enum_type = getattr(field, "enum_type", None)
    if enum_type is not None and isinstance(value, int):
        return enum_type.values_by_number[value].name
    return str(value)


def _options(options: object) -> list[str]:
    out = []
    for field, value in options.ListFields():  # type: ignore[attr-defined]
        if field.label == field.LABEL_REPEATED or field.message_type is not None:
            continue
        out.append(f"{field.name} = {_option_value(value, field)}")
    return out


def _camel(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _field_type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    if field.type in (FIELD.TYPE_MESSAGE, FIELD.TYPE_ENUM, FIELD.TYPE_GROUP):
        return field.type_name
    return _SCALARS[field.type]


def _field_line(field: descriptor_pb2.FieldDescriptorProto, syntax: str, in_oneof: bool) -> str:
    label = ""
    if not in_oneof:
        if field.label == FIELD.LABEL_REPEATED:
            label = "repeated "
        elif syntax == "proto2":
            label = _LABELS.get(field.label, "optional") + " "
        elif field.proto3_optional:
            label = "optional "
    options = []
    if field.HasField("default_value"):
        value = field.default_value
        quoted = field.type in (FIELD.TYPE_STRING, FIELD.TYPE_BYTES)
        options.append(f"default = {_quote(value) if quoted else value}")
    if field.HasField("json_name") and field.json_name != _camel(field.name):
        options.append(f"json_name = {_quote(field.json_name)}")
    options.extend(_options(field.options))
    suffix = f" [{', '.join(options)}]" if options else ""
    return f"{label}{_field_type(field)} {field.name} = {field.number}{suffix};"


def _print_enum(enum: descriptor_pb2.EnumDescriptorProto, indent: str, out: list[str]) -> None:
    out.append(f"{indent}enum {enum.name} {{")
    for option in _options(enum.options):
        out.append(f"{indent}  option {option};")
    for value in enum.value:
        options = _options(value.options)
        suffix = f" [{', '.join(options)}]" if options else ""
        out.append(f"{indent}  {value.name} = {value.number}{suffix};")
    for reserved in enum.reserved_range:
        out.append(f"{indent}  reserved {reserved.start} to {reserved.end};")
    for name in enum.reserved_name:
        out.append(f"{indent}  reserved {_quote(name)};")
    out.append(f"{indent}}}")


def _print_message(
    message: descriptor_pb2.DescriptorProto, syntax: str, indent: str, out: list[str]
) -> None:
    out.append(f"{indent}message {message.name} {{")
    inner = indent + "  "
    for option in _options(message.options):
        out.append(f"{inner}option {option};")
    maps = {nested.name: nested for nested in message.nested_type if nested.options.map_entry}
    oneofs: dict[int, list[descriptor_pb2.FieldDescriptorProto]] = {}
    for field in message.field:
        index = _real_oneof(field)
        if index is not None:
            oneofs.setdefault(index, []).append(field)
            continue
        entry = field.type_name.rsplit(".", 1)[-1] if field.type == FIELD.TYPE_MESSAGE else None
        if entry in maps and field.label == FIELD.LABEL_REPEATED:
            key, value = maps[entry].field[0], maps[entry].field[1]
            out.append(
                f"{inner}map<{_field_type(key)}, {_field_type(value)}> {field.name} = "
                f"{field.number};"
            )
            continue
        out.append(inner + _field_line(field, syntax, in_oneof=False))
    for index, fields in sorted(oneofs.items()):
        out.append(f"{inner}oneof {message.oneof_decl[index].name} {{")
        for field in fields:
            out.append(inner + "  " + _field_line(field, syntax, in_oneof=True))
        out.append(f"{inner}}}")
    for nested in message.nested_type:
        if not nested.options.map_entry:
            _print_message(nested, syntax, inner, out)
    for enum in message.enum_type:
        _print_enum(enum, inner, out)
    for reserved in message.reserved_range:
        out.append(f"{inner}reserved {reserved.start} to {reserved.end - 1};")
    for name in message.reserved_name:
        out.append(f"{inner}reserved {_quote(name)};")
    out.append(f"{indent}}}")


def to_text(proto: FDP) -> str:
    """The descriptor as .proto text protoc reads back into the same descriptor."""
    syntax = proto.syntax or "proto2"
    out = [f"syntax = {_quote(syntax)};"] if syntax != "editions" else []
    if syntax == "editions":
        out.append(f"edition = {_quote(str(proto.edition))};")
    if proto.package:
        out.append(f"package {proto.package};")
    public = set(proto.public_dependency)
    for index, dependency in enumerate(proto.dependency):
        out.append(f"import {'public ' if index in public else ''}{_quote(dependency)};")
    for option in _options(proto.options):
        out.append(f"option {option};")
    out.append("")
    for message in proto.message_type:
        _print_message(message, syntax, "", out)
    for enum in proto.enum_type:
        _print_enum(enum, "", out)
    for service in proto.service:
        out.append(f"service {service.name} {{")
        for method in service.method:
            client = "stream " if method.client_streaming else ""
            server = "stream " if method.server_streaming else ""
            out.append(
                f"  rpc {method.name} ({client}{method.input_type}) returns "
                f"({server}{method.output_type});"
            )
        out.append("}")
    return "\n".join(out) + "\n"


def serialized(parsed: ParsedSchema) -> str:
    """``?format=serialized``: the base64 FileDescriptorProto."""
    return base64.standard_b64encode(parsed.native.SerializeToString()).decode("ascii")
