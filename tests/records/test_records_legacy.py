import struct
import zlib

import pytest
from records_helpers import raises_code

from wire.errors import ErrorCode
from wire.records import (
    Record,
    build_batch,
    build_message_set,
    decode_batch,
    decode_message_set,
    from_v2_batches,
    iter_messages,
    read_header,
    to_v2_batches,
)
from wire.records.control import end_txn_marker

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python imports

LEGACY_CODECS = [0, 1, 2, 3]  # zstd needs magic 2 (KIP-110)

RECORDS = [
    Record(10, 1_700_000_000_000, b"key", b"value"),
    Record(11, 1_699_999_999_000, None, b"no key"),
    Record(12, 1_700_000_005_000, b"no value", None),
    Record(13, 1_700_000_000_001, b"", b"" * 1000),
]


def _without_timestamps(records: list[Record]) -> list[Record]:
    return [Record(r.offset, -1, r.key, r.value, []) for r in records]


# Hand-made bytes for the message format, checked field by field.


def test_golden_v0_and_v1_messages() -> None:
    v0 = build_message_set([Record(5, 99, b"k", b"v")], 0, 0)
    body = b"\x00\x00" + b"\x00\x00\x00\x01k" + b"\x00\x00\x00\x01v"
    assert v0 == struct.pack(">qiI", 5, 4 + len(body), zlib.crc32(body)) + body
    v1 = build_message_set([Record(5, 99, None, b"v")], 1, 0, timestamp_type=1)
    body = b"\x01\x08" + struct.pack(">q", 99) + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x01v"
    assert v1 == struct.pack(">qiI", 5, 4 + len(body), zlib.crc32(body)) + body


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_round_trip(codec: int, magic: int) -> None:
    buf = build_message_set(RECORDS, magic, codec)
    expected = RECORDS if magic == 1 else _without_timestamps(RECORDS)
    assert decode_message_set(buf) == expected
    shallow = list(iter_messages(buf))
    if codec:
        [wrapper] = shallow
        assert (wrapper.offset, wrapper.key, wrapper.compression) == (13, None, codec)
        assert wrapper.timestamp == (max(r.timestamp for r in RECORDS) if magic else -1)
    else:
        assert [m.offset for m in shallow] == [10, 11, 12, 13]


def test_magic1_inner_offsets_are_relative() -> None:
    [wrapper] = iter_messages(build_message_set(RECORDS, 1, 1))
    inner = list(iter_messages(zlib.decompress(wrapper.value, 31)))
    assert [m.offset for m in inner] == [0, 1, 2, 3]
    [wrapper0] = iter_messages(build_message_set(RECORDS, 0, 1))
    assert [m.offset for m in iter_messages(zlib.decompress(wrapper0.value, 31))] == [
        10,
        11,
        12,
        13,
    ]


def test_log_append_time_wrapper_sets_inner_timestamps() -> None:
    buf = build_message_set(RECORDS, 1, 2, timestamp_type=1)
    assert [r.timestamp for r in decode_message_set(buf)] == [1_700_000_005_000] * 4


def test_iteration_stops_at_truncated_tail_and_detects_crc() -> None:
    buf = build_message_set(RECORDS, 1, 0)
    for cut in range(len(buf) - 10, len(buf)):
        assert [r.offset for r in decode_message_set(buf[:cut])] == [10, 11, 12]
    bad = bytearray(buf)
    bad[25] ^= 1
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        decode_message_set(bad)


def _wrap(inner: bytes, magic: int, codec: int = 1, offset: int = 0) -> bytes:
    from wire.records.compression import compress
    from wire.records.legacy import _encode_message

    return _encode_message(offset, magic, codec, 0, None, compress(codec, inner))


@pytest.mark.parametrize(
    ("buf", "code"),
    [
        (_wrap(b"", 1), ErrorCode.INVALID_RECORD),  # empty wrapper
        (_wrap(build_message_set(RECORDS, 0, 0), 1), ErrorCode.INVALID_RECORD),  # magic mix
        (_wrap(build_message_set(RECORDS, 1, 1), 1), ErrorCode.INVALID_RECORD),  # nested
        (_wrap(build_message_set(RECORDS, 1, 0)[:-3], 1), ErrorCode.CORRUPT_MESSAGE),
        (
            build_message_set([Record(0, 0, None, None)], 1, 1)[:-4] + b"\xff" * 4,
            ErrorCode.CORRUPT_MESSAGE,
        ),  # bad CRC
    ],
    ids=["empty", "magic-mix", "nested", "partial-inner", "crc"],
)
def test_malformed_wrappers(buf: bytes, code: ErrorCode) -> None:
    with raises_code(code):
        decode_message_set(buf)


def test_wrapper_without_value() -> None:
    from wire.records.legacy import _encode_message

    with raises_code(ErrorCode.INVALID_RECORD):
        decode_message_set(_encode_message(0, 1, 2, 0, None, None))


def test_bad_lengths_and_magic() -> None:
    good = build_message_set([Record(0, 0, b"k", b"v")], 0, 0)
    for edit, fmt, value in [
        (8, ">i", 13),
        (16, ">b", 3),
        (16, ">b", 1),
        (18, ">i", 50),
        (18, ">i", -2),
    ]:
        bad = bytearray(good)
        struct.pack_into(fmt, bad, edit, value)
        struct.pack_into(">I", bad, 12, zlib.crc32(bad[16:]))
        with raises_code(ErrorCode.CORRUPT_MESSAGE):
            decode_message_set(bad)


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x00" + b"\x00\x00\x00\x06k" + b"\x00\x00\x00\x01v",  # key eats value length
        b"\x00\x00" + b"\x00\x00\x00\x01k" + b"\x00\x00\x00\x01v" + b"?",  # trailing byte
    ],
)
def test_fields_must_fill_the_message(body: bytes) -> None:
    buf = struct.pack(">qiI", 0, 4 + len(body), zlib.crc32(body)) + body
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        decode_message_set(buf)


# Up-conversion (Produce v0-2) and down-conversion (Fetch v0-3).


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_up_conversion(codec: int, magic: int) -> None:
    batch = to_v2_batches(build_message_set(RECORDS, magic, codec))
    assert isinstance(batch, bytearray)
    header, records = decode_batch(batch)
    assert header.compression == codec and header.timestamp_type == 0
    assert header.base_offset == 10 and header.records_count == 4
    assert not header.has_producer_id
    assert records == (RECORDS if magic == 1 else _without_timestamps(RECORDS))


def test_up_conversion_renumbers_offsets_consecutively() -> None:
    v0_producer = [Record(0, -1, None, b"a"), Record(0, -1, None, b"b")]  # all offsets 0
    header, records = decode_batch(to_v2_batches(build_message_set(v0_producer, 0, 0)))
    assert [r.offset for r in records] == [0, 1] and header.last_offset_delta == 1


def test_up_conversion_of_several_wrappers() -> None:
    buf = build_message_set(RECORDS[:2], 1, 2) + build_message_set(RECORDS[2:], 1, 2)
    header, records = decode_batch(to_v2_batches(buf))
    assert records == RECORDS and header.compression == 2


@pytest.mark.parametrize(
    ("buf", "code"),
    [
        (build_message_set(RECORDS, 1, 0)[:-1], ErrorCode.CORRUPT_MESSAGE),
        (build_message_set(RECORDS, 1, 0) + b"\x00" * 5, ErrorCode.CORRUPT_MESSAGE),
        (
            build_message_set(RECORDS[:1], 1, 0) + build_message_set(RECORDS[1:], 0, 0),
            ErrorCode.INVALID_RECORD,
        ),
        (build_message_set(RECORDS, 1, 0, timestamp_type=1), ErrorCode.INVALID_TIMESTAMP),
        (
            _wrap(build_message_set(RECORDS, 1, 0), 1, codec=4),
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        ),
    ],
    ids=["partial", "trailing-bytes", "mixed-magic", "log-append-time", "zstd"],
)
def test_up_conversion_rejects(buf: bytes, code: ErrorCode) -> None:
    with raises_code(code):
        to_v2_batches(buf)


def test_up_conversion_of_nothing() -> None:
    assert to_v2_batches(b"") == bytearray()


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_down_conversion(codec: int, magic: int) -> None:
    with_headers = [Record(r.offset, r.timestamp, r.key, r.value, [("h", b"x")]) for r in RECORDS]
    batches = (
        build_batch(with_headers[:2], base_offset=10, compression=codec)
        + build_batch(
            [end_txn_marker(True, 0, offset=12, timestamp=5)], base_offset=12, control=True
        )
        + build_batch([], base_offset=13)
        + build_batch(with_headers[2:], base_offset=12, compression=codec)
    )
    buf = from_v2_batches(batches + batches[:70], magic)  # a partial batch at the end is dropped
    expected = RECORDS if magic == 1 else _without_timestamps(RECORDS)
    assert decode_message_set(buf) == expected
    shallow = list(iter_messages(buf))
    assert {m.magic for m in shallow} == {magic}
    assert len(shallow) == (2 if codec else 4)


def test_down_conversion_keeps_log_append_time() -> None:
    buf = bytearray(build_batch(RECORDS, base_offset=10, compression=1, timestamp_type=1))
    [wrapper] = iter_messages(from_v2_batches(buf, 1))
    assert wrapper.timestamp_type == 1 and wrapper.timestamp == read_header(buf).max_timestamp
    uncompressed = from_v2_batches(build_batch(RECORDS, base_offset=10, timestamp_type=1), 1)
    assert {m.timestamp_type for m in iter_messages(uncompressed)} == {1}


def test_down_conversion_refuses_zstd() -> None:
    with raises_code(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
        from_v2_batches(build_batch(RECORDS, base_offset=10, compression=4), 1)


def test_build_message_set_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        build_message_set(RECORDS, 2, 0)
    with pytest.raises(ValueError):
        build_message_set(RECORDS, 1, 4)


# Interoperability with kafka-python's legacy encoder and decoder.


def _kafka_python_message_set(magic: int, codec: int, records: list[Record]) -> bytes:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic, codec, batch_size=10_000_000)
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_decodes_kafka_python_message_sets(codec: int, magic: int) -> None:
    records = [Record(i, r.timestamp, r.key, r.value, []) for i, r in enumerate(RECORDS)]
    buf = _kafka_python_message_set(magic, codec, records)
    assert decode_message_set(buf) == (records if magic else _without_timestamps(records))


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_decodes_our_message_sets(codec: int, magic: int) -> None:
    from kafka.record.memory_records import MemoryRecords

    theirs = MemoryRecords(build_message_set(RECORDS, magic, codec))
    decoded = []
    while (batch := theirs.next_batch()) is not None:
        assert batch.validate_crc()
        decoded.extend(batch)
    assert [(r.offset, r.key, r.value) for r in decoded] == [
        (r.offset, r.key, r.value) for r in RECORDS
    ]
    if magic == 1:
        assert [r.timestamp for r in decoded] == [r.timestamp for r in RECORDS]
