"""Legacy message sets (message format magic 0 and 1) and conversion to and from v2.

A message set is a sequence of entries, all integers big-endian (protocol guide,
"Message Sets"):

    offset        int64
    messageSize   int32    bytes of the message that follows
    crc           uint32   CRC-32 (zlib's) of magic..end
    magic         int8     0 or 1
    attributes    int8     bits 0-2 compression codec; bit 3 timestamp type (magic 1:
                           1 = LogAppendTime)
    timestamp     int64    magic 1 only
    key           int32 length (-1 = null) + bytes
    value         int32 length (-1 = null) + bytes

A compressed message is a wrapper: its key is null and its value is a compressed message
set of uncompressed inner messages of the same magic. For magic 1 (KIP-31) the inner offsets
are relative (0, 1, ...) and the wrapper's offset is the absolute offset of the last inner
message, so inner absolute = wrapper offset - last inner offset + inner offset; for magic 0
the inner offsets are absolute. A magic 1 wrapper of timestamp type LogAppendTime gives its
own timestamp to every inner message (KIP-32).

Up-conversion (Produce v0-2) turns a producer's message set into one v2 batch; down-
conversion (Fetch v0-3) turns each v2 batch into messages of the older format, a compressed
batch into one wrapper of the same codec. Headers, producer ids and control batches have
no legacy form: headers are dropped and control batches skipped, as Kafka does.
"""

import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from wire.errors import ErrorCode, KafkaError
from wire.records.batch import COMPRESSION_MASK, TIMESTAMP_TYPE_BIT, iter_batches
from wire.records.compression import (
    DEFAULT_MAX_MESSAGE_BYTES,
    ZSTD,
    compress,
    decompress,
    decompression_cap,
)
from wire.records.record import Record, build_batch, decode_batch

Buffer = bytes | bytearray | memoryview

_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
LOG_OVERHEAD = 12
# crc, magic, attributes, key length, value length; magic 1 adds an 8-byte timestamp
MIN_MESSAGE_SIZE = {0: 14, 1: 22}
NO_TIMESTAMP = -1


class LegacyMessage(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int  # -1 for magic 0
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.magic == 1 and self.attributes & TIMESTAMP_TYPE_BIT else 0


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def _read_bytes(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise _corrupt("message truncated before a length")
    (length,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < -1 or pos + length > end:
        raise _corrupt(f"bad key or value length {length}")
    return bytes(buf[pos : pos + length]), pos + length


def _walk(buf: Buffer, *, strict: bool) -> Iterator[LegacyMessage]:
    n = len(buf)
    pos = 0
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            if strict:
                raise _corrupt("trailing partial message")
            return
        (size,) = _INT32.unpack_from(buf, pos + 8)
        if size < MIN_MESSAGE_SIZE[0]:
            raise _corrupt(f"message size {size} is below the minimum")
        end = pos + LOG_OVERHEAD + size
        if end > n:
            if strict:
                raise _corrupt("trailing partial message")
            return
        offset, _, crc, magic, attributes = _ENTRY.unpack_from(buf, pos)
        if magic not in MIN_MESSAGE_SIZE:
            raise _corrupt(f"unknown magic {magic}")
        if size < MIN_MESSAGE_SIZE[magic]:
            raise _corrupt(f"message size {size} is below the minimum for magic {magic}")
        if zlib.crc32(memoryview(buf)[pos + 16 : end]) != crc:
            raise _corrupt(f"message CRC mismatch at offset {offset}")
        p = pos + 18
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(buf, p)
            p += 8
        key, p = _read_bytes(buf, p, end)
        value, p = _read_bytes(buf, p, end)
        if p != end:
            raise _corrupt("message size does not match its fields")
        yield LegacyMessage(offset, magic, attributes, timestamp, key, value)
        pos = end


def iter_messages(buf: Buffer) -> Iterator[LegacyMessage]:
    """The shallow messages (wrappers not opened) of a message set, CRCs checked
    (KafkaError(CORRUPT_MESSAGE)), stopping silently at a trailing partial message."""
    return _walk(buf, strict=False)


def _inner_records(wrapper: LegacyMessage, max_bytes: int) -> tuple[list[Record], int]:
    """The records inside one shallow message, with absolute offsets and timestamps, and
    how many bytes opening the wrapper took (at most `max_bytes`)."""
    if wrapper.compression == 0:
        return [Record(wrapper.offset, wrapper.timestamp, wrapper.key, wrapper.value, [])], 0
    if wrapper.value is None:
        raise KafkaError(ErrorCode.INVALID_RECORD, "compressed wrapper message without value")
    data = decompress(wrapper.compression, wrapper.value, max_bytes=max_bytes, magic=wrapper.magic)
    inner = list(_walk(data, strict=True))
    if not inner:
        raise KafkaError(ErrorCode.INVALID_RECORD, "compressed wrapper message is empty")
    for m in inner:
        if m.magic != wrapper.magic:
            raise KafkaError(ErrorCode.INVALID_RECORD, "inner magic differs from wrapper magic")
        if m.compression:
            raise KafkaError(ErrorCode.INVALID_RECORD, "nested compression")
    if wrapper.magic == 0:
        return [Record(m.offset, NO_TIMESTAMP, m.key, m.value, []) for m in inner], len(data)
    # A producer may leave the wrapper offset at 0 (kafka-python does); a negative base then
    # means "keep the relative offsets", as Kafka's own reader does.
    base = max(wrapper.offset - inner[-1].offset, 0)
    log_append = wrapper.timestamp_type == 1
    records = [
        Record(
            base + m.offset, wrapper.timestamp if log_append else m.timestamp, m.key, m.value, []
        )
        for m in inner
    ]
    return records, len(data)


def _open_wrappers(
    messages: Iterator[LegacyMessage], max_message_bytes: int
) -> Iterator[tuple[LegacyMessage, list[Record]]]:
    """Each shallow message with its records; all wrappers of one message set together
    decompress to at most decompression_cap(max_message_bytes)."""
    remaining = decompression_cap(max_message_bytes)
    for message in messages:
        records, used = _inner_records(message, remaining)
        remaining -= used
        yield message, records


def decode_message_set(
    buf: Buffer, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> list[Record]:
    """Every record of a message set, wrappers opened, stopping at a trailing partial
    message. Magic 0 records have timestamp -1."""
    out: list[Record] = []
    for _, records in _open_wrappers(iter_messages(buf), max_message_bytes):
        out.extend(records)
    return out


def _encode_message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
) -> bytes:
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(_INT64.pack(timestamp))
    for field in (key, value):
        if field is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_INT32.pack(len(field)))
            parts.append(bytes(field))
    body = b"".join(parts)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def build_message_set(
    records: Sequence[Record], magic: int, compression: int, *, timestamp_type: int = 0
) -> bytes:
    """Encode records as a message set of `magic` (0 or 1). Uncompressed: one message per
    record at its offset. Compressed: one wrapper at the last record's offset holding them
    all (relative inner offsets for magic 1), timestamped with the largest timestamp, or
    marked LogAppendTime when timestamp_type is 1. Headers are dropped."""
    if magic not in MIN_MESSAGE_SIZE:
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    if compression == ZSTD:
        raise ValueError("zstd has no legacy form (KIP-110)")
    ts_bits = TIMESTAMP_TYPE_BIT if magic == 1 and timestamp_type else 0
    if compression == 0 or not records:
        return b"".join(
            _encode_message(r.offset, magic, ts_bits, r.timestamp, r.key, r.value) for r in records
        )
    first = records[0].offset
    inner = b"".join(
        _encode_message(
            r.offset - first if magic == 1 else r.offset,
            magic,
            ts_bits,
            r.timestamp,
            r.key,
            r.value,
        )
        for r in records
    )
    return _encode_message(
        records[-1].offset,
        magic,
        compression | ts_bits,
        max(r.timestamp for r in records),
        None,
        compress(compression, inner, magic=magic),
    )


def to_v2_batches(
    message_set: Buffer, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> bytearray:
    """Up-convert a producer's message set into one v2 batch, as Kafka's broker does for
    Produce v0-2. The batch keeps the first message's offset as its base and numbers the
    records consecutively from it; its codec is that of the (last) compressed wrapper, NONE
    if there is none. Magic 0 records get timestamp -1.

    Raises KafkaError: CORRUPT_MESSAGE for damage or trailing partial bytes, INVALID_RECORD
    for mixed magics or malformed wrappers, INVALID_TIMESTAMP for a message claiming
    LogAppendTime, UNSUPPORTED_COMPRESSION_TYPE for zstd (KIP-110: magic 2 only), and
    DecompressionLimitError (INVALID_RECORD) when the wrappers decompress past
    decompression_cap(max_message_bytes). An empty input gives an empty result.
    """
    records: list[Record] = []
    codec = 0
    magic = None
    for message, inner in _open_wrappers(_walk(message_set, strict=True), max_message_bytes):
        if magic is None:
            magic = message.magic
        elif message.magic != magic:
            raise KafkaError(ErrorCode.INVALID_RECORD, "messages of different magic values")
        if message.timestamp_type == 1:
            raise KafkaError(ErrorCode.INVALID_TIMESTAMP, "producers may not set LogAppendTime")
        if message.compression == ZSTD:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs message format magic 2"
            )
        if message.compression:
            codec = message.compression
        records.extend(inner)
    if not records:
        return bytearray()
    base = records[0].offset
    for i, r in enumerate(records):
        r.offset = base + i
    return bytearray(build_batch(records, base_offset=base, compression=codec))


def from_v2_batches(
    batches: Buffer, magic: int, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> bytes:
    """Down-convert a buffer of v2 batches to a message set of `magic` (0 or 1), as Kafka's
    broker does for Fetch v0-3: one batch becomes uncompressed messages or one wrapper of
    the batch's codec, keeping offsets and (magic 1) timestamps and their type. Control and
    empty batches are skipped; a trailing partial batch is ignored. A zstd batch raises
    KafkaError(UNSUPPORTED_COMPRESSION_TYPE): old fetchers cannot read it (KIP-110)."""
    out = []
    for pos, header in iter_batches(batches):
        if header.is_control:
            continue
        if header.compression == ZSTD:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd batches cannot be down-converted"
            )
        _, records = decode_batch(batches, pos, max_message_bytes=max_message_bytes)
        if records:
            out.append(
                build_message_set(
                    records, magic, header.compression, timestamp_type=header.timestamp_type
                )
            )
    return b"".join(out)
