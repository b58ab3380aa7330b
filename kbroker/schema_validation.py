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


def _raw_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A varint at ``pos`` before zig-zag decoding: (raw value, position after it)."""
    shift = 0
    raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return raw, pos
        shift += 7


def _skip_varint(buf: bytes, pos: int) -> int:
    while buf[pos] >= 0x80:
        pos += 1
    return pos + 1


def _scan(
    buf: bytes,
    pos: int,
    end: int,
    key_prefixes: tuple[bytes, ...] | None,
    value_prefixes: tuple[bytes, ...] | None,
) -> list[tuple[int, str, int, int]]:
    """The records of an uncompressed records section whose key or value does not start with
    one of the valid prefixes: (index in the section, "key" or "value", start, length). The
    loop reads single-byte varints inline (records of a few hundred bytes or less have them)
    and checks prefixes with ``bytes.startswith``, so that a record costs a few operations."""
    bad: list[tuple[int, str, int, int]] = []
    startswith = buf.startswith
    index = 0
    while pos < end:
        byte = buf[pos]
        if byte < 0x80:
            raw = byte
            pos += 1
        elif buf[pos + 1] < 0x80:
            raw = (byte & 0x7F) | (buf[pos + 1] << 7)
            pos += 2
        else:
            raw, pos = _raw_varint(buf, pos)
        length = (raw >> 1) ^ -(raw & 1)
        record_end = pos + length
        # attributes, then the timestamp and offset deltas
        at = pos + 1
        at = at + 1 if buf[at] < 0x80 else at + 2 if buf[at + 1] < 0x80 else _skip_varint(buf, at)
        at = at + 1 if buf[at] < 0x80 else at + 2 if buf[at + 1] < 0x80 else _skip_varint(buf, at)
        byte = buf[at]
        if byte < 0x80:
            raw = byte
            at += 1
        elif buf[at + 1] < 0x80:
            raw = (byte & 0x7F) | (buf[at + 1] << 7)
            at += 2
        else:
            raw, at = _raw_varint(buf, at)
        key_length = (raw >> 1) ^ -(raw & 1)
        if key_prefixes is not None and (
            key_length < PREFIX_SIZE or not startswith(key_prefixes, at)
        ):
            bad.append((index, "key", at, key_length))
        if key_length > 0:
            at += key_length
        if value_prefixes is not None:
            byte = buf[at]
            if byte < 0x80:
                raw = byte
                at += 1
            elif buf[at + 1] < 0x80:
                raw = (byte & 0x7F) | (buf[at + 1] << 7)
                at += 2
            else:
                raw, at = _raw_varint(buf, at)
            value_length = (raw >> 1) ^ -(raw & 1)
            if value_length < PREFIX_SIZE or not startswith(value_prefixes, at):
                bad.append((index, "value", at, value_length))
        pos = record_end
        index += 1
    if pos != end:
        raise IndexError("records overrun their batch")
    return bad


def _schema_id(data: bytes | None, start: int, length: int) -> int | None:
    if data is None or length < PREFIX_SIZE or data[start] != MAGIC:
        return None
    return int.from_bytes(data[start + 1 : start + PREFIX_SIZE], "big")


def valid_ids(state: RegistryState, subject: str) -> frozenset[int]:
    """The ids registered, and not deleted, under ``subject``."""
    return frozenset(v.schema.id for v in state.subjects.get(subject, {}).values() if not v.deleted)


def _prefixes(ids: frozenset[int]) -> tuple[bytes, ...]:
    return tuple(bytes([MAGIC]) + i.to_bytes(4, "big") for i in sorted(ids) if 0 <= i < 2**32)


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
    if state is None:
        message = f"Schema validation of {topic} needs this broker's schema registry"
        count = sum(h.records_count for _, h in iter_batches(batches) if not h.is_control)
        raise RecordValidationError(message, [RecordError(i, message) for i in range(count)])
    value_ids = valid_ids(state, f"{topic}-value") if values else None
    key_ids = valid_ids(state, f"{topic}-key") if keys else None
    value_prefixes = None if value_ids is None else _prefixes(value_ids)
    key_prefixes = None if key_ids is None else _prefixes(key_ids)
    # One copy of the request's records, for bytes.startswith (memoryview has none).
    data = bytes(batches)
    errors: list[RecordError] = []
    index = 0
    for pos, header in iter_batches(data):
        if header.is_control:
            continue
        if header.attributes & COMPRESSION_MASK:
            records = decode_batch(data, pos, max_message_bytes=max_message_bytes)[1]
            for offset, record in enumerate(records):
                for what, field in (("key", record.key), ("value", record.value)):
                    prefixes = key_prefixes if what == "key" else value_prefixes
                    if prefixes is None:
                        continue
                    if field is None or not field.startswith(prefixes):
                        length = -1 if field is None else len(field)
                        errors.append(
                            RecordError(index + offset, _message(topic, what, field, 0, length))
                        )
                        break
            index += len(records)
            continue
        try:
            bad = _scan(
                data, pos + BATCH_HEADER_SIZE, pos + header.size, key_prefixes, value_prefixes
            )
        except IndexError:
            raise KafkaError(ErrorCode.INVALID_RECORD, "records do not parse") from None
        reported: set[int] = set()
        for offset, what, start, length in bad:
            if offset not in reported:
                reported.add(offset)
                errors.append(
                    RecordError(index + offset, _message(topic, what, data, start, length))
                )
        index += header.records_count
    if errors:
        raise RecordValidationError(errors[0].message, errors)


def _message(topic: str, what: str, data: bytes | None, start: int, length: int) -> str:
    schema_id = _schema_id(data, start, length)
    if schema_id is None:
        return f"Log record {what} has no schema id (topic {topic} validates {what}s)"
    return f"Log record {what} schema id {schema_id} is not registered under subject {topic}-{what}"
