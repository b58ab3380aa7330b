"""Avro values as typed columns, through a schema registry: what Spark's ``from_avro`` /
``to_avro`` with Confluent's registry do, for the ``kbroker`` data source.

Reading (``valueFormat=avro``): the ``value`` column becomes a struct typed from the latest
schema of the value subject (``valueSubject``, default ``<topic>-value``), the reader schema.
Each record's value carries the id of the schema it was written with (the registry wire format:
a zero byte, the 4-byte id, the Avro binary); that writer schema is fetched once per id and
kept, and the record resolved to the reader schema by Avro's rules (fastavro).

Writing (``valueFormat=avro``): the ``value`` column, a struct, is encoded with the subject's
latest schema and framed with its id.

Avro types map to Spark's as ``from_avro`` maps them: boolean, int, long, float, double,
string (and enum) to their Spark types, bytes and fixed to binary, records to structs, arrays
to arrays, maps to maps with string keys, a union with null to a nullable column; the logical
types date, timestamp-millis/-micros and decimal to DateType, TimestampType and DecimalType.
Other unions are refused.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import urllib.parse
import urllib.request
from typing import Any

import fastavro
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

MAGIC = 0
HEADER = struct.Struct(">bI")
_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}


class AvroColumnError(ValueError):
    """A schema that has no Spark type, a value not in the registry's framing, an unknown id."""


class RegistryLookup:
    """Schemas by id (kept once fetched: an id's schema never changes) and a subject's latest,
    from a registry's REST API."""

    def __init__(self, url: str, user_info: str | None = None, timeout: float = 30.0) -> None:
        self._url = url.rstrip("/")
        self._timeout = timeout
        self._headers = {"Accept": "application/vnd.schemaregistry.v1+json"}
        if user_info:
            token = base64.b64encode(user_info.encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._by_id: dict[int, Any] = {}

    def _get(self, path: str) -> Any:
        request = urllib.request.Request(self._url + path, headers=self._headers)
        with urllib.request.urlopen(request, timeout=self._timeout) as answer:
            return json.loads(answer.read())

    def latest(self, subject: str) -> tuple[int, Any]:
        """(id, parsed schema) of the subject's latest version."""
        answer = self._get(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest")
        schema_id = int(answer["id"])
        if answer.get("schemaType", "AVRO") != "AVRO":
            raise AvroColumnError(f"subject {subject} holds {answer['schemaType']}, not Avro")
        self._by_id.setdefault(schema_id, fastavro.parse_schema(json.loads(answer["schema"])))
        return schema_id, self._by_id[schema_id]

    def by_id(self, schema_id: int) -> Any:
        found = self._by_id.get(schema_id)
        if found is None:
            answer = self._get(f"/schemas/ids/{schema_id}")
            found = fastavro.parse_schema(json.loads(answer["schema"]))
            self._by_id[schema_id] = found
        return found


def spark_type(schema: Any) -> DataType:
    """The Spark type of a (fastavro-parsed) Avro schema."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        raise AvroColumnError(f"Avro type {schema!r} has no Spark type")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise AvroColumnError(f"the union {schema} has no Spark type (only [null, T])")
        return spark_type(branches[0])
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical == "date":
        return DateType()
    if logical in ("timestamp-millis", "timestamp-micros"):
        return TimestampType()
    if logical == "decimal":
        return DecimalType(schema["precision"], schema.get("scale", 0))
    if kind == "record":
        return StructType(
            [
                StructField(f["name"], spark_type(f["type"]), _nullable(f["type"]))
                for f in schema["fields"]
            ]
        )
    if kind == "array":
        return ArrayType(spark_type(schema["items"]), _nullable(schema["items"]))
    if kind == "map":
        return MapType(StringType(), spark_type(schema["values"]), _nullable(schema["values"]))
    if kind == "enum":
        return StringType()
    if kind == "fixed":
        return BinaryType()
    return spark_type(kind)


def _nullable(schema: Any) -> bool:
    return isinstance(schema, list) and "null" in schema


def _to_row(value: Any, data_type: DataType) -> Any:
    """A decoded Avro value as the data source hands it to Spark (structs as tuples)."""
    if value is None:
        return None
    if isinstance(data_type, StructType):
        return tuple(_to_row(value.get(f.name), f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return [_to_row(v, data_type.elementType) for v in value]
    if isinstance(data_type, MapType):
        return {k: _to_row(v, data_type.valueType) for k, v in value.items()}
    return value


def _to_avro(value: Any, data_type: DataType) -> Any:
    """A Spark value (structs as Rows or tuples) as fastavro writes it (records as dicts)."""
    if value is None:
        return None
    if isinstance(data_type, StructType):
        items = (
            value.asDict()
            if hasattr(value, "asDict")
            else dict(zip(data_type.names, value, strict=True))
        )
        return {f.name: _to_avro(items.get(f.name), f.dataType) for f in data_type.fields}
    if isinstance(data_type, ArrayType):
        return [_to_avro(v, data_type.elementType) for v in value]
    if isinstance(data_type, MapType):
        return {k: _to_avro(v, data_type.valueType) for k, v in value.items()}
    if isinstance(data_type, BinaryType):
        return bytes(value)
    return value


class AvroDecoder:
    """Values framed with their schema id, decoded and resolved to the reader schema."""

    def __init__(self, lookup: RegistryLookup, reader: Any) -> None:
        self._lookup = lookup
        self._reader = reader
        self.data_type = spark_type(reader)

    def decode(self, value: bytes | None) -> Any:
        if value is None:
            return None
        if len(value) < HEADER.size or value[0] != MAGIC:
            raise AvroColumnError("a value without the schema registry framing (magic byte 0)")
        _, schema_id = HEADER.unpack_from(value)
        writer = self._lookup.by_id(schema_id)
        record = fastavro.schemaless_reader(io.BytesIO(value[HEADER.size :]), writer, self._reader)
        return _to_row(record, self.data_type)


class AvroEncoder:
    """Rows' struct values encoded with one schema and framed with its id."""

    def __init__(self, schema_id: int, schema: Any, data_type: DataType) -> None:
        self._prefix = HEADER.pack(MAGIC, schema_id)
        self._schema = schema
        self._data_type = data_type

    def encode(self, value: Any) -> bytes | None:
        if value is None:
            return None
        out = io.BytesIO()
        out.write(self._prefix)
        fastavro.schemaless_writer(out, self._schema, _to_avro(value, self._data_type))
        return out.getvalue()
