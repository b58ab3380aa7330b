"""Values written by schema-registry serializers, decoded with the writer's schema.

The registry is asked over Confluent's REST API (``GET /schemas/ids/{id}``, and the
referenced subjects' versions), on aiohttp, with basic authentication when configured;
each schema is fetched once and kept. Decoding itself is pure:

- Avro: fastavro reads the payload with the writer's schema (named types from references);
- Protobuf: the payload starts with the message indexes (a zigzag varint count, then each
  index; a single 0 for the first message), then the message. The schema is asked for as a
  serialized file descriptor (``?format=serialized``), built in a descriptor pool with its
  references, and the message printed as JSON by protobuf's json_format;
- JSON Schema: the payload is JSON.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor

from kbroker.console.record_view import Shown, pretty_json, schema_framed, show

AVRO = "AVRO"
PROTOBUF = "PROTOBUF"
JSON_SCHEMA = "JSON"
REQUEST_TIMEOUT_SECONDS = 5.0
WELL_KNOWN_PREFIX = "google/protobuf/"


class SchemaError(Exception):
    """A schema cannot be had or a payload does not decode with it."""


@dataclass
class RegisteredSchema:
    schema_id: int
    schema_type: str
    schema: str
    # Referenced schemas, dependencies first: (name, schema text).
    references: list[tuple[str, str]] = field(default_factory=list)
    decoder: Any = None


def _zigzag_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise SchemaError("truncated message indexes")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise SchemaError("bad varint in message indexes")


def protobuf_indexes(payload: bytes) -> tuple[list[int], bytes]:
    """Confluent's message indexes: which message of the file (a path through nested
    types) the payload holds, and the rest of the payload."""
    count, pos = _zigzag_varint(payload, 0)
    if count == 0:
        return [0], payload[pos:]
    if count < 0 or count > 100:
        raise SchemaError(f"bad message index count {count}")
    indexes = []
    for _ in range(count):
        index, pos = _zigzag_varint(payload, pos)
        indexes.append(index)
    return indexes, payload[pos:]


def _well_known(pool: descriptor_pool.DescriptorPool, name: str) -> None:
    # protobuf's own modules register the well-known types in the default pool when imported.
    from google.protobuf import (  # noqa: F401
        any_pb2,
        duration_pb2,
        empty_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    proto = descriptor_pb2.FileDescriptorProto()
    descriptor_pool.Default().FindFileByName(name).CopyToProto(proto)
    pool.Add(proto)


def protobuf_decoder(schema: RegisteredSchema) -> Any:
    """The file descriptor of a schema given as serialized descriptors (base64), with its
    references added first."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    files = [*schema.references, ("", schema.schema)]
    for _, encoded in files:
        proto = descriptor_pb2.FileDescriptorProto()
        try:
            proto.ParseFromString(base64.b64decode(encoded))
        except Exception as exc:  # protobuf raises its own DecodeError and others
            raise SchemaError(f"schema {schema.schema_id}: not a file descriptor: {exc}") from None
        for dependency in proto.dependency:
            if dependency.startswith(WELL_KNOWN_PREFIX) and dependency not in added:
                _well_known(pool, dependency)
                added.add(dependency)
        if proto.name not in added:
            pool.Add(proto)
            added.add(proto.name)
    return pool.FindFileByName(proto.name)


def _message_descriptor(file: Any, indexes: list[int]) -> Descriptor:
    types = list(file.message_types_by_name.values())
    descriptor = None
    for index in indexes:
        if index < 0 or index >= len(types):
            raise SchemaError(f"no message at index {index}")
        descriptor = types[index]
        types = list(descriptor.nested_types)
    assert descriptor is not None
    return descriptor


def avro_decoder(schema: RegisteredSchema) -> Any:
    named: dict[str, Any] = {}
    try:
        for _, text in schema.references:
            fastavro.parse_schema(json.loads(text), named_schemas=named)
        return fastavro.parse_schema(json.loads(schema.schema), named_schemas=named)
    except (ValueError, fastavro.schema.SchemaParseException) as exc:
        raise SchemaError(f"schema {schema.schema_id}: {exc}") from None


def decode(schema: RegisteredSchema, payload: bytes) -> Shown:
    """A framed value's payload decoded with its schema, as JSON text."""
    try:
        if schema.schema_type == AVRO:
            if schema.decoder is None:
                schema.decoder = avro_decoder(schema)
            value = fastavro.schemaless_reader(io.BytesIO(payload), schema.decoder, None)
            return Shown("avro", pretty_json(value), schema_id=schema.schema_id)
        if schema.schema_type == PROTOBUF:
            if schema.decoder is None:
                schema.decoder = protobuf_decoder(schema)
            indexes, body = protobuf_indexes(payload)
            descriptor = _message_descriptor(schema.decoder, indexes)
            message = message_factory.GetMessageClass(descriptor)()
            message.ParseFromString(body)
            value = json_format.MessageToDict(message, preserving_proto_field_name=True)
            return Shown(
                "protobuf",
                pretty_json(value),
                note=descriptor.full_name,
                schema_id=schema.schema_id,
            )
        return Shown("json-schema", pretty_json(json.loads(payload)), schema_id=schema.schema_id)
    except SchemaError:
        raise
    except Exception as exc:  # each decoder raises its own errors on a payload that does not fit
        raise SchemaError(f"does not decode with schema {schema.schema_id}: {exc}") from None


class RegistryClient:
    """Schemas by id from a schema registry, each fetched once."""

    def __init__(self, url: str, auth: tuple[str, str] | None = None, ssl: Any = None) -> None:
        self._url = url.rstrip("/")
        self._headers: dict[str, str] = {}
        if auth is not None:
            credentials = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            self._headers["Authorization"] = f"Basic {credentials}"
        self._ssl = ssl
        self._schemas: dict[int, RegisteredSchema] = {}
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _get(self, path: str) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS),
            )
        try:
            async with self._session.get(self._url + path, ssl=self._ssl) as response:
                body = await response.json(content_type=None)
                if response.status != 200:
                    message = body.get("message") if isinstance(body, dict) else body
                    raise SchemaError(f"registry answered {response.status}: {message}")
                return body
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SchemaError(
                f"schema registry at {self._url}: {exc or type(exc).__name__}"
            ) from None

    async def _references(self, refs: list[dict[str, Any]], serialized: bool) -> list[Any]:
        found: list[tuple[str, str]] = []
        for ref in refs or []:
            query = "?format=serialized" if serialized else ""
            path = f"/subjects/{ref['subject']}/versions/{ref['version']}{query}"
            answer = await self._get(path)
            found += await self._references(answer.get("references", []), serialized)
            found.append((ref["name"], answer["schema"]))
        return found

    async def schema(self, schema_id: int) -> RegisteredSchema:
        known = self._schemas.get(schema_id)
        if known is not None:
            return known
        answer = await self._get(f"/schemas/ids/{schema_id}")
        schema_type = answer.get("schemaType", AVRO)
        if schema_type == PROTOBUF:
            answer = await self._get(f"/schemas/ids/{schema_id}?format=serialized")
        references = await self._references(answer.get("references", []), schema_type == PROTOBUF)
        schema = RegisteredSchema(schema_id, schema_type, answer["schema"], references)
        self._schemas[schema_id] = schema
        return schema

    async def show(self, data: bytes | None, wanted: str) -> Shown:
        """``data`` shown as record_view.show does, but a schema-framed value decoded with
        its schema when ``wanted`` is auto."""
        framed = schema_framed(data) if data is not None and wanted == "auto" else None
        if framed is None:
            return show(data, wanted)
        schema_id, payload = framed
        try:
            return decode(await self.schema(schema_id), payload)
        except SchemaError as exc:
            fallback = show(data, "hex")
            return Shown(fallback.kind, fallback.text, note=str(exc), schema_id=schema_id)
