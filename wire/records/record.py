"""Records inside a RecordBatch v2: building whole batches and decoding them.

Layout of one record (protocol guide, "Record"; varints are zig-zag, see varint.py):

    length            varint   bytes of the record after this field
    attributes        int8     unused, 0
    timestampDelta    varlong  timestamp - batch baseTimestamp
    offsetDelta       varint   offset - batch baseOffset
    keyLength         varint   -1 for a null key
    key               bytes
    valueLength       varint   -1 for a null value
    value             bytes
    headersCount      varint
    headers           per header: keyLength varint, key UTF-8 (never null),
                      valueLength varint (-1 for null), value bytes

The records follow the 61-byte batch header (batch.py); when the batch's codec is not NONE
they are compressed together as one block. In a LogAppendTime batch every record's
timestamp is the batch's maxTimestamp, whatever its delta says.
"""

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from wire.errors import DecodeError, ErrorCode, KafkaError
from wire.records.batch import (
    BATCH_HEADER_SIZE,
    CONTROL_BIT,
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    compute_crc,
    read_header,
    validate_batch,
)
from wire.records.compression import (
    DEFAULT_MAX_MESSAGE_BYTES,
    compress,
    decompress,
    decompression_cap,
)
from wire.records.varint import encode_varint, read_varint, read_varlong

Buffer = bytes | bytearray | memoryview

_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class Record:
    """One record with its absolute offset and effective timestamp (-1 for none)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _encode_bytes(value: bytes | None) -> bytes:
    if value is None:
        return b"\x01"  # zig-zag -1
    return encode_varint(len(value)) + bytes(value)


def encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int) -> bytes:
    """The uncompressed records section for `records` relative to the given bases."""
    out = []
    for r in records:
        parts = [
            b"\x00",
            encode_varint(r.timestamp - base_timestamp),
            encode_varint(r.offset - base_offset),
            _encode_bytes(r.key),
            _encode_bytes(r.value),
            encode_varint(len(r.headers)),
        ]
        for hkey, hvalue in r.headers:
            parts.append(_encode_bytes(hkey.encode()))
            parts.append(_encode_bytes(hvalue))
        body = b"".join(parts)
        out.append(encode_varint(len(body)))
        out.append(body)
    return b"".join(out)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    timestamp_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """Encode one v2 batch. Record offsets must increase and not precede base_offset; the
    base timestamp is the first record's, the max timestamp the largest. An empty batch
    (as compaction leaves) has lastOffsetDelta 0 and no timestamps."""
    previous = base_offset - 1
    for r in records:
        if r.offset <= previous:
            raise ValueError(f"record offsets must increase from base_offset: {r.offset}")
        previous = r.offset
    if previous - base_offset > _INT32_MAX:
        raise ValueError("offset delta exceeds int32")
    if records:
        base_timestamp = records[0].timestamp
        max_timestamp = max(r.timestamp for r in records)
        last_offset_delta = records[-1].offset - base_offset
    else:
        base_timestamp = max_timestamp = NO_TIMESTAMP
        last_offset_delta = 0
    body = encode_records(records, base_offset, base_timestamp)
    if compression:
        body = compress(compression, body)
    attributes = (
        compression
        | (TIMESTAMP_TYPE_BIT if timestamp_type else 0)
        | (TRANSACTIONAL_BIT if transactional else 0)
        | (CONTROL_BIT if control else 0)
    )
    batch = bytearray(BATCH_HEADER_SIZE + len(body))
    HEADER_STRUCT.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    batch[BATCH_HEADER_SIZE:] = body
    _UINT32.pack_into(batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def decode_batch(
    buf: Buffer, pos: int = 0, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> tuple[BatchHeader, list[Record]]:
    """Validate (validate_batch) and decode the v2 batch at `pos`.

    Raises DecodeError if the header is incomplete, KafkaError(CORRUPT_MESSAGE) for damage
    (CRC, length, decompression) and KafkaError(INVALID_RECORD) for records that do not
    parse or do not match the header's count, and DecompressionLimitError (INVALID_RECORD)
    for a records section that would decompress past
    ``decompression_cap(max_message_bytes, records_count)`` (the topic's max.message.bytes).
    """
    header = read_header(buf, pos)
    validate_batch(buf, pos, header)
    body = bytes(memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size])
    if header.compression:
        cap = decompression_cap(max_message_bytes, header.records_count)
        body = decompress(header.compression, body, max_bytes=cap)
    try:
        records = _decode_records(body, header)
    except DecodeError as e:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"malformed record: {e}") from e
    return header, records


def _read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos)
    if length == -1:
        return None, pos
    if length < -1 or pos + length > end:
        raise DecodeError(f"bad length {length}")
    return data[pos : pos + length], pos + length


def _decode_records(data: bytes, header: BatchHeader) -> list[Record]:
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.max_timestamp if header.timestamp_type else None
    n = len(data)
    pos = 0
    out = []
    for _ in range(header.records_count):
        length, pos = read_varint(data, pos)
        end = pos + length
        if length < 0 or end > n:
            raise DecodeError(f"bad record length {length}")
        pos += 1  # attributes, unused
        ts_delta, pos = read_varlong(data, pos)
        offset_delta, pos = read_varint(data, pos)
        key, pos = _read_bytes(data, pos, end)
        value, pos = _read_bytes(data, pos, end)
        count, pos = read_varint(data, pos)
        if count < 0:
            raise DecodeError(f"negative header count {count}")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            hkey, pos = _read_bytes(data, pos, end)
            if hkey is None:
                raise DecodeError("null header key")
            hvalue, pos = _read_bytes(data, pos, end)
            try:
                headers.append((hkey.decode(), hvalue))
            except UnicodeDecodeError as e:
                raise DecodeError("header key is not UTF-8") from e
        if pos != end:
            raise DecodeError(f"record length {length} does not match its fields")
        timestamp = base_timestamp + ts_delta if log_append_time is None else log_append_time
        out.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    if pos != n:
        raise DecodeError(f"bytes left after {header.records_count} records")
    return out


def iter_entries(buf: Buffer) -> Iterator[tuple[int, int, int]]:
    """Yield (position, size, magic) of each complete entry, v2 batch or legacy message,
    stopping at a trailing partial one. Both formats start with an int64 offset and an
    int32 count of the bytes that follow, and keep the magic at byte 16."""
    n = len(buf)
    pos = 0
    while n - pos > MAGIC_OFFSET:
        (length,) = _INT32.unpack_from(buf, pos + 8)
        if length < MAGIC_OFFSET - LOG_OVERHEAD + 1:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"entry length {length} is too small")
        size = length + LOG_OVERHEAD
        if pos + size > n:
            return
        magic = buf[pos + MAGIC_OFFSET]
        yield pos, size, magic - 256 if magic > 127 else magic
        pos += size


def decode_records(
    buf: Buffer, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> list[Record]:
    """Every record of a buffer of batches, v2 and legacy alike, with absolute offsets,
    stopping at a trailing partial entry. Control batches are included. Decompression is
    capped per batch by ``max_message_bytes`` (see decode_batch)."""
    # Imported here: legacy.py builds its conversions on this module.
    from wire.records.legacy import decode_message_set

    out: list[Record] = []
    for pos, size, magic in iter_entries(buf):
        if magic == 2:
            out.extend(decode_batch(buf, pos, max_message_bytes=max_message_bytes)[1])
        elif magic in (0, 1):
            entry = memoryview(buf)[pos : pos + size]
            out.extend(decode_message_set(entry, max_message_bytes=max_message_bytes))
        else:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown magic {magic}")
    return out
