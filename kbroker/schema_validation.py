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

Records are checked in runs, by a regular expression (the ``re`` engine walks them in C, about
50 ns a record against 0.8 us for the same walk in Python): the first record of a run gives
the run's shape (the bytes of its length, key length and value length fields, the widths of
its timestamp and offset deltas, its schema ids), and the expression matches every following
record of that shape whose ids are the first record's. A producer sending fixed-size records
serialized with one schema fills a batch with a few such runs (the deltas widen at 64, 8192,
...). Whatever the expression does not take (a record of another shape, an invalid record)
is walked in Python, which names the invalid records.
"""

from __future__ import annotations

import functools
import re

from kbroker.record_validation import RecordError, RecordValidationError
from kbroker.schema_registry.state import RegistryState
from wire.errors import DecodeError, ErrorCode, KafkaError
from wire.records.batch import BATCH_HEADER_SIZE, iter_batches
from wire.records.compression import decompress, decompression_cap
from wire.records.varint import read_varint, read_varlong

MAGIC = 0
PREFIX_SIZE = 5
# A run shorter than this hands the rest of the batch to the Python walk: records of varying
# size make one-record runs, and a pattern per record would cost more than the walk.
MIN_RUN = 16
# At most this many runs per records section, then the Python walk: a new pattern compiles in
# about 100 us (a cached one costs about 10 us to find), so a producer changing shapes every
# MIN_RUN records would cost far more than the walk. Fixed-size records make up to 6 runs
# (offset and timestamp deltas each widen at 64 and 8192).
MAX_RUNS = 8
# Compiled run patterns kept: a few shapes per producer and schema id.
PATTERN_CACHE_SIZE = 256

Buffer = bytes | bytearray | memoryview


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


def _varint_pattern(width: int) -> bytes:
    """A varint of exactly ``width`` bytes: continuation bytes, then one without the high bit."""
    last = rb"[\x00-\x7f]"
    return last if width == 1 else rb"[\x80-\xff]{%d}" % (width - 1) + last


def _skip_pattern(count: int) -> bytes:
    return rb".{%d}" % count if count else b""


@functools.lru_cache(maxsize=PATTERN_CACHE_SIZE)
def _compile(record: bytes) -> re.Pattern[bytes]:
    # Possessive: a run never gives records back, and keeps no backtracking state for them.
    return re.compile(b"(?:" + record + b")*+", re.DOTALL)


def _run_pattern_at(
    buf: Buffer,
    pos: int,
    end: int,
    key_prefixes: tuple[bytes, ...] | None,
    value_prefixes: tuple[bytes, ...] | None,
) -> tuple[re.Pattern[bytes], int] | None:
    """The pattern of the run starting with the record at ``pos`` and that record's size, or
    None when that record does not parse or is not valid (the Python walk reports it).

    A record the pattern matches has the first record's length, attributes of any value,
    timestamp and offset deltas of the same widths (so its key length field is where the first
    record's is), the same key length and value length fields, and the same key and value
    prefixes; the rest of its bytes are skipped by count. Its fields are therefore where the
    first record's are, and it is valid as the first record is."""
    try:
        length, at = read_varint(buf, pos)
        timestamp_at = at + 1
        offset_at = read_varlong(buf, timestamp_at)[1]
        key_length_at = read_varint(buf, offset_at)[1]
        key_length, key_at = read_varint(buf, key_length_at)
        value_length_at = key_at + max(key_length, 0)
        value_length, value_at = read_varint(buf, value_length_at)
    except DecodeError:
        return None
    record_end = at + length
    if length < 0 or record_end > end or value_at + max(value_length, 0) > record_end:
        return None
    parts = [
        re.escape(bytes(buf[pos:at])),
        b".",
        _varint_pattern(offset_at - timestamp_at),
        _varint_pattern(key_length_at - offset_at),
        re.escape(bytes(buf[key_length_at:key_at])),
    ]
    cursor = key_at
    checked = (
        (key_at, key_length, key_at, key_prefixes),
        (value_at, value_length, value_length_at, value_prefixes),
    )
    for field_at, field_length, literal_at, prefixes in checked:
        if prefixes is None:
            continue
        prefix = bytes(buf[field_at : field_at + PREFIX_SIZE])
        if field_length < PREFIX_SIZE or prefix not in prefixes:
            return None
        parts.append(_skip_pattern(literal_at - cursor))
        parts.append(re.escape(bytes(buf[literal_at : field_at + PREFIX_SIZE])))
        cursor = field_at + PREFIX_SIZE
    parts.append(_skip_pattern(record_end - cursor))
    return _compile(b"".join(parts)), record_end - pos


def _valid_runs(
    buf: Buffer,
    pos: int,
    end: int,
    key_prefixes: tuple[bytes, ...] | None,
    value_prefixes: tuple[bytes, ...] | None,
) -> tuple[int, int]:
    """(position, count): the ``count`` records from ``pos`` to ``position`` are valid, matched
    run by run; the records from ``position`` on are left to the Python walk."""
    count = 0
    runs = 0
    while pos < end and runs < MAX_RUNS:
        runs += 1
        run = _run_pattern_at(buf, pos, end, key_prefixes, value_prefixes)
        if run is None:
            break
        pattern, record_size = run
        matched = pattern.match(buf, pos, end)
        if matched is None:  # never: the run's first record matches its own pattern
            break
        records = (matched.end() - pos) // record_size
        count += records
        pos = matched.end()
        if records < MIN_RUN:
            break
    return pos, count


def _invalid_records(
    records: Buffer,
    start: int,
    end: int,
    first_index: int,
    topic: str,
    key_prefixes: tuple[bytes, ...] | None,
    value_prefixes: tuple[bytes, ...] | None,
) -> list[RecordError]:
    """The invalid records of the records section ``records[start:end]``, whose first record
    has index ``first_index`` in the request."""
    pos, valid = _valid_runs(records, start, end, key_prefixes, value_prefixes)
    if pos == end:
        return []
    rest = bytes(records[pos:end])
    try:
        bad = _scan(rest, 0, len(rest), key_prefixes, value_prefixes)
    except IndexError:
        raise KafkaError(ErrorCode.INVALID_RECORD, "records do not parse") from None
    errors: list[RecordError] = []
    reported: set[int] = set()
    for offset, what, field_at, length in bad:
        if offset not in reported:
            reported.add(offset)
            index = first_index + valid + offset
            errors.append(RecordError(index, _message(topic, what, rest, field_at, length)))
    return errors


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
    view = memoryview(batches)
    errors: list[RecordError] = []
    index = 0
    for pos, header in iter_batches(view):
        if header.is_control:
            continue
        records: Buffer = view
        start, end = pos + BATCH_HEADER_SIZE, pos + header.size
        if header.compression:
            cap = decompression_cap(max_message_bytes, header.records_count)
            records = decompress(header.compression, view[start:end], max_bytes=cap)
            start, end = 0, len(records)
        errors += _invalid_records(records, start, end, index, topic, key_prefixes, value_prefixes)
        index += header.records_count
    if errors:
        raise RecordValidationError(errors[0].message, errors)


def _message(topic: str, what: str, data: bytes | None, start: int, length: int) -> str:
    schema_id = _schema_id(data, start, length)
    if schema_id is None:
        return f"Log record {what} has no schema id (topic {topic} validates {what}s)"
    return f"Log record {what} schema id {schema_id} is not registered under subject {topic}-{what}"
