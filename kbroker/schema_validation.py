"""Broker-side schema validation, as Confluent Server does it (topic configs
``confluent.value.schema.validation`` and ``confluent.key.schema.validation``).

With it on, the value (or key) of every record produced to the topic must be in the Schema
Registry wire format (a zero magic byte, then the 4-byte big-endian id of its schema) with an id
registered, and not deleted, under the topic's subject (``<topic>-value`` or ``<topic>-key``,
the serializers' default TopicNameStrategy), in this broker's schema registry. Otherwise the
batch is refused with INVALID_RECORD naming each offending record in ``record_errors``
(KIP-467), so the producer fails exactly those records and the others are written when it
retries them, as for a keyless record on a compacted topic (kbroker/record_validation.py).

Only topics with validation on pay for it: their records are read here (an uncompressed batch
in place, a compressed one decompressed with the topic's cap), reading no further into each
record than its key and the first bytes of its value.
"""

from __future__ import annotations

from kbroker.record_validation import RecordError, RecordValidationError
from kbroker.schema_registry.state import RegistryState
from wire.errors import ErrorCode, KafkaError
from wire.records.batch import BATCH_HEADER_SIZE, iter_batches
from wire.records.record import decode_batch

MAGIC = 0
PREFIX_SIZE = 5
# The RecordBatch attributes' compression bits.
COMPRESSION_MASK = 0x07


def _varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos``: (value, position after it)."""
    shift = 0
    raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _fields(
    buf: bytes | bytearray | memoryview, end: int, pos: int
) -> list[tuple[int, int, int, int]]:
    """Each record of an uncompressed records section as (key start, key length, value start,
    value length); -1 lengths for null."""
    out = []
    while pos < end:
        length, pos = _varint(buf, pos)
        record_end = pos + length
        pos += 1  # attributes
        _, pos = _varint(buf, pos)  # timestamp delta
        _, pos = _varint(buf, pos)  # offset delta
        key_length, pos = _varint(buf, pos)
        key_start = pos
        if key_length > 0:
            pos += key_length
        value_length, pos = _varint(buf, pos)
        out.append((key_start, key_length, pos, value_length))
        pos = record_end
    return out


def _schema_id(data: bytes | bytearray | memoryview, start: int, length: int) -> int | None:
    if length < PREFIX_SIZE or data[start] != MAGIC:
        return None
    return int.from_bytes(data[start + 1 : start + PREFIX_SIZE], "big")


def valid_ids(state: RegistryState, subject: str) -> frozenset[int]:
    """The ids registered, and not deleted, under ``subject``."""
    return frozenset(v.schema.id for v in state.subjects.get(subject, {}).values() if not v.deleted)


def check_schema_ids(
    batches: bytes | bytearray | memoryview,
    topic: str,
    state: RegistryState | None,
    *,
    keys: bool,
    values: bool,
    max_message_bytes: int,
) -> None:
    """Raise RecordValidationError naming every record whose value (with ``values``) or key
    (with ``keys``) lacks a schema id registered under the topic's subject."""
    value_ids = valid_ids(state, f"{topic}-value") if state is not None and values else frozenset()
    key_ids = valid_ids(state, f"{topic}-key") if state is not None and keys else frozenset()
    errors: list[RecordError] = []
    index = 0
    for pos, header in iter_batches(batches):
        if header.is_control:
            continue
        if header.attributes & COMPRESSION_MASK:
            records = decode_batch(batches, pos, max_message_bytes=max_message_bytes)[1]
            for key, value in ((r.key, r.value) for r in records):
                problem = _problem(
                    topic,
                    key,
                    0,
                    -1 if key is None else len(key),
                    value,
                    0,
                    -1 if value is None else len(value),
                    key_ids if keys else None,
                    value_ids if values else None,
                    state,
                )
                if problem is not None:
                    errors.append(RecordError(index, problem))
                index += 1
            continue
        try:
            fields = _fields(batches, pos + header.size, pos + BATCH_HEADER_SIZE)
        except IndexError:
            raise KafkaError(ErrorCode.INVALID_RECORD, "records do not parse") from None
        for key_start, key_length, value_start, value_length in fields:
            problem = _problem(
                topic,
                batches,
                key_start,
                key_length,
                batches,
                value_start,
                value_length,
                key_ids if keys else None,
                value_ids if values else None,
                state,
            )
            if problem is not None:
                errors.append(RecordError(index, problem))
            index += 1
    if errors:
        raise RecordValidationError(errors[0].message, errors)


def _problem(
    topic: str,
    key_data: bytes | bytearray | memoryview | None,
    key_start: int,
    key_length: int,
    value_data: bytes | bytearray | memoryview | None,
    value_start: int,
    value_length: int,
    key_ids: frozenset[int] | None,
    value_ids: frozenset[int] | None,
    state: RegistryState | None,
) -> str | None:
    for what, data, start, length, ids in (
        ("value", value_data, value_start, value_length, value_ids),
        ("key", key_data, key_start, key_length, key_ids),
    ):
        if ids is None:
            continue
        if state is None:
            return f"Schema validation of {topic} needs this broker's schema registry"
        schema_id = None if data is None else _schema_id(data, start, length)
        if schema_id is None:
            return f"Log record {what} has no schema id (topic {topic} validates {what}s)"
        if schema_id not in ids:
            return (
                f"Log record {what} schema id {schema_id} is not registered under subject "
                f"{topic}-{what}"
            )
    return None
