import pytest
from records_helpers import raises_code, refresh_crc

from wire.errors import ErrorCode
from wire.records import (
    Record,
    build_batch,
    build_message_set,
    decode_batch,
    decode_records,
    read_header,
)
from wire.records.control import (
    ABORT,
    COMMIT,
    control_type,
    end_txn_marker,
    marker_coordinator_epoch,
)
from wire.records.varint import encode_varint

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python imports

CODECS = [0, 1, 2, 3, 4]

RECORDS = [
    Record(10, 1_700_000_000_000, b"key", b"value", [("h1", b"x"), ("h2", None)]),
    Record(11, 1_699_999_999_000, None, b"no key"),  # timestamps may go back: negative delta
    Record(12, 1_700_000_005_000, b"no value", None),
    Record(13, -1, None, None, [("ünïcode", b"")]),
    Record(15, 1_700_000_000_001, b"", b"", []),  # an offset gap, as compaction leaves
    Record(16, 1_700_000_000_002, b"k" * 300, b"v" * 70_000),  # multi-byte length varints
]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("timestamp_type", [0, 1])
def test_round_trip(codec: int, timestamp_type: int) -> None:
    batch = build_batch(RECORDS, base_offset=10, compression=codec, timestamp_type=timestamp_type)
    header, records = decode_batch(batch)
    assert header.compression == codec and header.timestamp_type == timestamp_type
    assert header.last_offset_delta == 6 and header.records_count == len(RECORDS)
    assert header.base_timestamp == RECORDS[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in RECORDS)
    if timestamp_type == 0:
        assert records == RECORDS
    else:
        assert [r.timestamp for r in records] == [header.max_timestamp] * len(RECORDS)
        assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
            (r.offset, r.key, r.value, r.headers) for r in RECORDS
        ]


def test_producer_and_flag_fields_round_trip() -> None:
    batch = build_batch(
        [Record(0, 5, b"a", b"b")],
        producer_id=123456789012,
        producer_epoch=7,
        base_sequence=2_000_000_000,
        partition_leader_epoch=3,
        transactional=True,
    )
    h = read_header(batch)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (123456789012, 7, 2_000_000_000)
    assert h.is_transactional and not h.is_control and h.partition_leader_epoch == 3


def test_control_batch_with_end_txn_marker() -> None:
    marker = end_txn_marker(True, 17, offset=40, timestamp=99)
    batch = build_batch(
        [marker], base_offset=40, control=True, transactional=True, producer_id=5, producer_epoch=1
    )
    header, [record] = decode_batch(batch)
    assert header.is_control and header.is_transactional
    assert record.key == b"\x00\x00\x00\x01" and record.value == b"\x00\x00\x00\x00\x00\x11"
    assert control_type(record) == COMMIT and marker_coordinator_epoch(record) == 17
    assert control_type(end_txn_marker(False, 0, offset=0, timestamp=0)) == ABORT
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        control_type(Record(0, 0, b"\x00", None))
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        marker_coordinator_epoch(Record(0, 0, b"\x00\x00\x00\x00", None))


def test_empty_batch() -> None:
    header, records = decode_batch(build_batch([], base_offset=8, producer_id=1))
    assert records == [] and header.records_count == 0 and header.last_offset == 8
    assert header.base_timestamp == header.max_timestamp == -1


def test_build_batch_rejects_bad_offsets() -> None:
    with pytest.raises(ValueError):
        build_batch([Record(1, 0, None, None), Record(1, 0, None, None)], base_offset=0)
    with pytest.raises(ValueError):
        build_batch([Record(4, 0, None, None)], base_offset=5)
    with pytest.raises(ValueError):
        build_batch([Record(2**31, 0, None, None)], base_offset=0)


def test_decode_records_over_mixed_buffer_and_partial_tail() -> None:
    v2a = build_batch(RECORDS[:2], base_offset=10)
    legacy = build_message_set([Record(12, 7, b"l", b"m")], 1, 1)
    v2b = build_batch(RECORDS[4:5], base_offset=15, compression=4)
    buf = v2a + legacy + v2b
    assert [r.offset for r in decode_records(buf)] == [10, 11, 12, 15]
    assert [r.offset for r in decode_records(buf[:-1])] == [10, 11, 12]
    assert [r.offset for r in decode_records(buf[: len(v2a) + 20])] == [10, 11]
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        decode_records(v2a[:16] + b"\x05" + v2a[17:])


def _raw_batch(body: bytes, count: int) -> bytearray:
    """A batch around hand-made record bytes, with a valid CRC."""
    batch = bytearray(build_batch([Record(0, 0, None, None)]))[:61] + body
    batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
    batch[57:61] = count.to_bytes(4, "big", signed=True)
    return refresh_crc(batch)


def _record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


GOOD = b"\x00\x00\x00\x02k\x02v\x00"


@pytest.mark.parametrize(
    ("body", "count"),
    [
        (_record(GOOD), 2),  # fewer records than declared
        (_record(GOOD) * 2, 1),  # bytes left over
        (_record(GOOD + b"\x00"), 1),  # record length longer than its fields
        (_record(GOOD[:-1]), 1),  # record length shorter than its fields
        (_record(b"\x00\x00\x00\x03k\x02v\x00\x00\x00\x00"), 1),  # key length -2
        (_record(b"\x00\x00\x00\x40k\x02v\x00"), 1),  # key length past the record
        (_record(b"\x00\x00\x00\x02k\x02v\x02\x01\x00"), 1),  # null header key
        (_record(b"\x00\x00\x00\x02k\x02v\x02\x02\xff\x00"), 1),  # header key not UTF-8
        (_record(b"\x00\x00\x00\x02k\x02v\x01"), 1),  # negative header count
        (b"\x80\x80\x80\x80\x80\x80\x80", 1),  # overlong length varint
    ],
)
def test_malformed_records_are_invalid_record(body: bytes, count: int) -> None:
    with raises_code(ErrorCode.INVALID_RECORD):
        decode_batch(_raw_batch(body, count))


def test_hand_made_record_decodes() -> None:
    assert decode_batch(_raw_batch(_record(GOOD), 1))[1] == [Record(0, 0, b"k", b"v", [])]


# Interoperability with kafka-python's own v2 encoder and decoder.


def _kafka_python_batch(codec: int, records: list[Record], **state: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, batch_size=10_000_000)
    if state:
        builder.set_producer_state(**state)
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value, r.headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_decodes_kafka_python_batches(codec: int) -> None:
    records = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(RECORDS)]
    records[3].timestamp = 1  # kafka-python replaces None, not -1; keep it a plain value
    batch = _kafka_python_batch(
        codec, records, producer_id=9, producer_epoch=1, base_sequence=5, is_transactional=True
    )
    header, decoded = decode_batch(batch)
    assert decoded == records
    assert (header.compression, header.producer_id, header.base_sequence) == (codec, 9, 5)
    assert header.is_transactional


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("timestamp_type", [0, 1])
def test_kafka_python_decodes_our_batches(codec: int, timestamp_type: int) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    batch = build_batch(
        RECORDS,
        base_offset=10,
        compression=codec,
        timestamp_type=timestamp_type,
        producer_id=3,
        producer_epoch=4,
        base_sequence=8,
    )
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (3, 4, 8)
    assert theirs.timestamp_type == timestamp_type
    decoded = list(theirs)
    assert [(r.offset, r.key, r.value) for r in decoded] == [
        (r.offset, r.key, r.value) for r in RECORDS
    ]
    assert [list(r.headers) for r in decoded] == [list(r.headers) for r in RECORDS]
    if timestamp_type == 0:
        assert [r.timestamp for r in decoded] == [r.timestamp for r in RECORDS]
