"""RecordBatch v2 headers: parsing, validation and in-place rewriting (KIP-98).

On-disk and wire layout of one batch, all integers big-endian (protocol guide, "Record
Batch"):

    offset  size  field
    0       8     baseOffset              int64
    8       4     batchLength             int32, bytes after this field (size - 12)
    12      4     partitionLeaderEpoch    int32
    16      1     magic                   int8, 2 (bytes 16 of legacy messages hold theirs)
    17      4     crc                     uint32, CRC-32C (Castagnoli) of bytes 21..end
    21      2     attributes              int16: bits 0-2 compression codec, bit 3
                                          timestamp type (1 = LogAppendTime), bit 4
                                          transactional, bit 5 control, bit 6 delete
                                          horizon set (KIP-534)
    23      4     lastOffsetDelta         int32
    27      8     baseTimestamp           int64 (the delete horizon when bit 6 is set)
    35      8     maxTimestamp            int64
    43      8     producerId              int64, -1 if none
    51      2     producerEpoch           int16
    53      4     baseSequence            int32
    57      4     recordsCount            int32
    61      ...   records (compressed as one block when the codec is not NONE)

The CRC does not cover baseOffset, batchLength or partitionLeaderEpoch, so the broker
rewrites those in place without recomputing it. The record layout is in record.py.
"""

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from wire.errors import DecodeError, ErrorCode, KafkaError
from wire.records import compression

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength, the part before what batchLength counts
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
# The smallest record: length, attributes, timestampDelta, offsetDelta, key length,
# value length and header count, one byte each.
MIN_RECORD_SIZE = 7

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

Buffer = bytes | bytearray | memoryview


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, from baseOffset to its last record."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at `pos` (no validation beyond its presence)."""
    if len(buf) - pos < BATCH_HEADER_SIZE or pos < 0:
        raise DecodeError(f"record batch header needs {BATCH_HEADER_SIZE} bytes")
    return BatchHeader._make(HEADER_STRUCT.unpack_from(buf, pos))


def peek_magic(buf: Buffer, pos: int = 0) -> int:
    """The magic byte of the batch or legacy message at `pos`."""
    if len(buf) - pos <= MAGIC_OFFSET or pos < 0:
        raise DecodeError("too short to hold a magic byte")
    magic = buf[pos + MAGIC_OFFSET]
    return magic - 256 if magic > 127 else magic


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of the batch of `size` bytes at `pos`, over attributes..end."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def validate_batch(buf: Buffer, pos: int, header: BatchHeader) -> None:
    """Check that the batch at `pos` is whole, of magic 2, with a matching CRC and counts
    that fit its length. Raises KafkaError(CORRUPT_MESSAGE) for damage, or
    KafkaError(INVALID_RECORD) for a record count its bytes cannot hold."""
    if header.batch_length < MIN_BATCH_LENGTH:
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE,
            f"batch length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}",
        )
    if pos + header.size > len(buf):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch is truncated")
    if header.magic != 2:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unexpected magic {header.magic}")
    crc = compute_crc(buf, pos, header.size)
    if crc != header.crc:
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE,
            f"record batch CRC mismatch: stored {header.crc:#010x}, computed {crc:#010x}",
        )
    if header.records_count < 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"negative records count {header.records_count}")
    if (
        header.compression == compression.NONE
        and header.records_count * MIN_RECORD_SIZE > header.batch_length - MIN_BATCH_LENGTH
    ):
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"{header.records_count} records cannot fit in {header.size} bytes",
        )


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Rewrite baseOffset in place (outside the CRC)."""
    _INT64.pack_into(buf, pos, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (outside the CRC)."""
    _INT32.pack_into(buf, pos + 12, epoch)


def set_max_timestamp_log_append(buf: bytearray | memoryview, pos: int, ts: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp `ts` and recompute its CRC.

    Readers then take every record's timestamp to be `ts` (baseTimestamp and the deltas are
    left alone, as Kafka's broker does).
    """
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts)
    (length,) = _INT32.unpack_from(buf, pos + 8)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, length + LOG_OVERHEAD))


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each complete batch, stopping silently at a trailing
    partial batch (as a fetch response or a torn log tail ends). Raises
    KafkaError(CORRUPT_MESSAGE) for a batchLength below the header's own size or a whole
    entry whose magic is not 2. The CRC is not checked here: see validate_batch."""
    n = len(buf)
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        (length,) = _INT32.unpack_from(buf, pos + 8)
        if length < MIN_BATCH_LENGTH:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"batch length {length} at position {pos} is below the minimum",
            )
        size = length + LOG_OVERHEAD
        if pos + size > n:
            return
        header = BatchHeader._make(HEADER_STRUCT.unpack_from(buf, pos))
        if header.magic != 2:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unexpected magic {header.magic}")
        yield pos, header
        pos += size


def validate_produce_records(buf: Buffer, max_batch_bytes: int) -> list[tuple[int, BatchHeader]]:
    """Validate the records of one partition of a Produce request (v3 and later).

    Checks, in the order Kafka's broker applies them (ProduceRequest validation, then the
    log's analysis, then its validator for client appends):
    - the bytes hold exactly one batch (KIP-98): none or several -> INVALID_RECORD; a
      batchLength too small or trailing partial bytes -> CORRUPT_MESSAGE;
    - magic 2 -> else INVALID_RECORD;
    - size <= max_batch_bytes -> else MESSAGE_TOO_LARGE;
    - CRC-32C and record count vs. length -> CORRUPT_MESSAGE / INVALID_RECORD;
    - a known codec, recordsCount >= 1, lastOffsetDelta + 1 == recordsCount, not a control
      batch, a sequence number when there is a producer id -> else INVALID_RECORD;
    - CreateTime timestamp type (a producer may not claim LogAppendTime) -> INVALID_TIMESTAMP.
    Returns [(position, header)].
    """
    n = len(buf)
    positions = []
    pos = 0
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "trailing partial record batch")
        (length,) = _INT32.unpack_from(buf, pos + 8)
        if length < MIN_BATCH_LENGTH:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"batch length {length} is too small")
        if pos + length + LOG_OVERHEAD > n:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "trailing partial record batch")
        positions.append(pos)
        pos += length + LOG_OVERHEAD
    if len(positions) != 1:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"produce records must hold exactly one record batch, not {len(positions)}",
        )
    header = read_header(buf, 0)
    if header.magic != 2:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"produce requires magic 2, not {header.magic}")
    if header.size > max_batch_bytes:
        raise KafkaError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"record batch of {header.size} bytes exceeds the maximum {max_batch_bytes}",
        )
    validate_batch(buf, 0, header)
    _validate_client_header(header)
    return [(0, header)]


def _validate_client_header(header: BatchHeader) -> None:
    if header.compression not in compression.CODEC_NAMES:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"unknown codec {header.compression}")
    if header.records_count <= 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"invalid record count {header.records_count}")
    if header.last_offset_delta + 1 != header.records_count:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"offset range of {header.last_offset_delta + 1} does not match "
            f"record count {header.records_count}",
        )
    if header.is_control:
        raise KafkaError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
    if header.has_producer_id and header.base_sequence < 0:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"invalid sequence {header.base_sequence} for producer id {header.producer_id}",
        )
    if header.timestamp_type == 1:
        raise KafkaError(ErrorCode.INVALID_TIMESTAMP, "producers may not set LogAppendTime")
