import crc32c
import pytest
from records_helpers import patch, raises_code

from wire.errors import DecodeError, ErrorCode
from wire.records import (
    BATCH_HEADER_SIZE,
    Record,
    build_batch,
    build_message_set,
    compute_crc,
    decode_batch,
    iter_batches,
    peek_magic,
    read_header,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
    validate_batch,
    validate_produce_records,
)

# One uncompressed batch holding the record key b"k", value b"v", timestamp 1000, offset 0,
# laid out by hand from the protocol guide.
GOLDEN = bytes.fromhex(
    "0000000000000000"  # baseOffset 0
    "0000003a"  # batchLength 58 = 70 - 12
    "00000000"  # partitionLeaderEpoch 0
    "02"  # magic
    "716a6189"  # CRC-32C of the bytes from attributes to the end
    "0000"  # attributes
    "00000000"  # lastOffsetDelta
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003e8"  # maxTimestamp 1000
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000001"  # records count
    "10"  # record length 8 (zig-zag)
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "02"  # key length 1
    "6b"  # b"k"
    "02"  # value length 1
    "76"  # b"v"
    "00"  # headers count 0
)


def _batch(n: int = 3, **kwargs: int) -> bytes:
    base = kwargs.get("base_offset", 0)
    records = [Record(base + i, 1_000 + i, b"k%d" % i, b"v%d" % i) for i in range(n)]
    return build_batch(records, **kwargs)


def test_crc32c_check_value() -> None:
    assert crc32c.crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value


def test_golden_batch_encoding() -> None:
    assert crc32c.crc32c(GOLDEN[21:]) == 0x716A6189
    assert build_batch([Record(0, 1000, b"k", b"v")], partition_leader_epoch=0) == GOLDEN


def test_golden_batch_decoding() -> None:
    header, records = decode_batch(GOLDEN)
    assert header.size == len(GOLDEN) == BATCH_HEADER_SIZE + 9
    assert header.crc == 0x716A6189
    assert records == [Record(0, 1000, b"k", b"v", [])]


def test_header_properties() -> None:
    batch = _batch(
        4,
        base_offset=100,
        compression=1,
        timestamp_type=1,
        producer_id=7,
        producer_epoch=2,
        base_sequence=11,
        partition_leader_epoch=5,
        transactional=True,
    )
    h = read_header(batch)
    assert (h.base_offset, h.last_offset, h.next_offset, h.size) == (100, 103, 104, len(batch))
    assert (h.compression, h.timestamp_type, h.is_transactional, h.is_control) == (
        1,
        1,
        True,
        False,
    )
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 11)
    assert (h.partition_leader_epoch, h.records_count, h.has_producer_id) == (5, 4, True)
    assert (h.base_timestamp, h.max_timestamp, h.magic) == (1000, 1003, 2)
    assert not h.has_delete_horizon
    c = read_header(_batch(1, control=True))
    assert c.is_control and not c.has_producer_id


def test_read_header_needs_61_bytes() -> None:
    with pytest.raises(DecodeError):
        read_header(GOLDEN[:60])
    with pytest.raises(DecodeError):
        read_header(GOLDEN, 10)


def test_peek_magic() -> None:
    assert peek_magic(GOLDEN) == 2
    assert peek_magic(b"xx" + build_message_set([Record(0, 5, None, b"v")], 1, 0), 2) == 1
    with pytest.raises(DecodeError):
        peek_magic(GOLDEN[:16])


def test_crc_corruption_detected_everywhere_it_covers() -> None:
    batch = _batch()
    validate_batch(batch, 0, read_header(batch))
    for i in range(21, len(batch)):
        corrupted = bytearray(batch)
        corrupted[i] ^= 0x40
        with raises_code(ErrorCode.CORRUPT_MESSAGE):
            validate_batch(corrupted, 0, read_header(batch))


def test_rewrites_outside_crc_keep_batch_valid() -> None:
    buf = bytearray(b"\xaa" * 5 + _batch())
    set_base_offset(buf, 5, 1234)
    set_partition_leader_epoch(buf, 5, 9)
    header, records = decode_batch(buf, 5)
    assert (header.base_offset, header.partition_leader_epoch) == (1234, 9)
    assert [r.offset for r in records] == [1234, 1235, 1236]


def test_set_max_timestamp_log_append() -> None:
    buf = bytearray(_batch())
    set_max_timestamp_log_append(memoryview(buf), 0, 99_999)
    header, records = decode_batch(buf)
    assert header.timestamp_type == 1 and header.max_timestamp == 99_999
    assert header.base_timestamp == 1000
    assert [r.timestamp for r in records] == [99_999] * 3
    assert compute_crc(buf, 0, len(buf)) == header.crc


def test_iter_batches_and_truncated_tail() -> None:
    batches = [_batch(2, base_offset=0), _batch(3, base_offset=2), _batch(1, base_offset=5)]
    buf = b"".join(batches)
    assert [(p, h.base_offset) for p, h in iter_batches(buf)] == [
        (0, 0),
        (len(batches[0]), 2),
        (len(batches[0]) + len(batches[1]), 5),
    ]
    start_of_last = len(batches[0]) + len(batches[1])
    for cut in range(start_of_last, len(buf)):
        assert [h.base_offset for _, h in iter_batches(memoryview(buf)[:cut])] == [0, 2]


def test_iter_batches_rejects_small_batch_length() -> None:
    bad = patch(GOLDEN, 8, ">i", 48)
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        list(iter_batches(bad))
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        list(iter_batches(GOLDEN + bad[:12]))  # even when the rest is missing


def test_iter_batches_rejects_legacy_entries() -> None:
    legacy = build_message_set([Record(0, 5, b"k" * 60, b"v")], 1, 0)
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        list(iter_batches(legacy))


def test_validate_batch_rejects_truncation_and_impossible_counts() -> None:
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        validate_batch(GOLDEN[:-1], 0, read_header(GOLDEN))
    too_many = patch(GOLDEN, 57, ">i", 2)  # 2 records cannot fit in 9 bytes
    with raises_code(ErrorCode.INVALID_RECORD):
        validate_batch(too_many, 0, read_header(too_many))
    negative = patch(GOLDEN, 57, ">i", -1)
    with raises_code(ErrorCode.INVALID_RECORD):
        validate_batch(negative, 0, read_header(negative))


# validate_produce_records: what the Produce handler checks before appending.

MAX = 1_000_000


def test_produce_accepts_a_client_batch() -> None:
    batch = _batch(3, compression=3, producer_id=4, producer_epoch=0, base_sequence=0)
    [(pos, header)] = validate_produce_records(memoryview(batch), MAX)
    assert pos == 0 and header.records_count == 3


@pytest.mark.parametrize(
    ("buf", "code"),
    [
        (b"", ErrorCode.INVALID_RECORD),
        (GOLDEN + GOLDEN, ErrorCode.INVALID_RECORD),
        (GOLDEN + GOLDEN[:30], ErrorCode.CORRUPT_MESSAGE),
        (GOLDEN + GOLDEN[:5], ErrorCode.CORRUPT_MESSAGE),
        (GOLDEN[:-1], ErrorCode.CORRUPT_MESSAGE),
        (patch(GOLDEN, 8, ">i", 40), ErrorCode.CORRUPT_MESSAGE),
        (GOLDEN[:-1] + b"\x01", ErrorCode.CORRUPT_MESSAGE),
        (patch(GOLDEN, 16, ">b", 1), ErrorCode.INVALID_RECORD),
        (build_message_set([Record(0, 5, b"k" * 60, b"v")], 1, 0), ErrorCode.INVALID_RECORD),
        (_batch(0), ErrorCode.INVALID_RECORD),
        (build_batch([Record(0, 1, b"", b""), Record(2, 1, b"", b"")]), ErrorCode.INVALID_RECORD),
        (patch(GOLDEN, 23, ">i", -1), ErrorCode.INVALID_RECORD),
        (_batch(1, control=True), ErrorCode.INVALID_RECORD),
        (_batch(1, producer_id=3, producer_epoch=0), ErrorCode.INVALID_RECORD),
        (_batch(1, timestamp_type=1), ErrorCode.INVALID_TIMESTAMP),
        (patch(_batch(1, compression=1), 21, ">h", 5), ErrorCode.INVALID_RECORD),
    ],
    ids=[
        "empty",
        "two-batches",
        "partial-tail",
        "partial-length",
        "truncated",
        "small-length",
        "bad-crc",
        "magic-1-header",
        "legacy-message",
        "no-records",
        "offset-gap",
        "negative-last-offset-delta",
        "control",
        "no-sequence",
        "log-append-time",
        "unknown-codec",
    ],
)
def test_produce_rejects(buf: bytes, code: ErrorCode) -> None:
    with raises_code(code):
        validate_produce_records(memoryview(buf), MAX)


def test_produce_batch_size_limit() -> None:
    assert validate_produce_records(memoryview(GOLDEN), len(GOLDEN))
    with raises_code(ErrorCode.MESSAGE_TOO_LARGE):
        validate_produce_records(memoryview(GOLDEN), len(GOLDEN) - 1)
