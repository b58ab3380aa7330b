"""Decoders fed arbitrary bytes raise only DecodeError or KafkaError."""

import struct
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from records_helpers import refresh_crc

from wire.errors import DecodeError, KafkaError
from wire.records import (
    Record,
    build_batch,
    build_message_set,
    decode_batch,
    decode_message_set,
    decode_records,
    iter_batches,
    iter_messages,
    to_v2_batches,
    validate_produce_records,
)
from wire.records.compression import compress, decompress

EXPECTED = (DecodeError, KafkaError)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SEED_BATCH = build_batch([Record(0, 5, b"key", b"value", [("h", b"v")]), Record(1, 6, None, None)])
SEED_LEGACY = build_message_set([Record(0, 5, b"key", b"value"), Record(1, 6, None, b"")], 1, 0)


def _run_all(data: bytes) -> None:
    for decode in (
        lambda: decode_batch(data),
        lambda: list(iter_batches(data)),
        lambda: decode_records(data),
        lambda: list(iter_messages(data)),
        lambda: decode_message_set(data),
        lambda: to_v2_batches(data),
        lambda: validate_produce_records(memoryview(data), 1 << 20),
    ):
        try:
            decode()
        except EXPECTED:
            pass


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    _run_all(data)


@FUZZ
@given(st.binary(max_size=200), st.integers(-5, 2**31 - 1), st.integers(0, 7))
def test_random_records_behind_a_valid_header(body: bytes, count: int, codec: int) -> None:
    # A correct CRC gets the bytes past validation into record parsing and decompression.
    batch = bytearray(SEED_BATCH[:61]) + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, codec)
    struct.pack_into(">i", batch, 57, count)
    _run_all(bytes(refresh_crc(batch)))


@FUZZ
@given(st.data())
def test_mutated_valid_batches(data: st.DataObject) -> None:
    batch = bytearray(SEED_BATCH)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(batch) - 1))
        batch[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        refresh_crc(batch)
    _run_all(bytes(batch))


@FUZZ
@given(st.data())
def test_mutated_legacy_messages(data: st.DataObject) -> None:
    buf = bytearray(SEED_LEGACY)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        # Fix the first message's CRC so the mutation reaches the field parsing.
        (size,) = struct.unpack_from(">i", buf, 8)
        if 4 <= size <= len(buf) - 12:
            struct.pack_into(">I", buf, 12, zlib.crc32(buf[16 : 12 + size]))
    _run_all(bytes(buf))


@FUZZ
@given(st.binary(max_size=120), st.integers(0, 3), st.integers(0, 1))
def test_random_inner_message_sets(inner: bytes, codec: int, magic: int) -> None:
    value = compress(codec, inner)
    body = struct.pack(">bb", magic, codec) + (b"\0" * 8 if magic else b"")
    body += b"\xff\xff\xff\xff" + struct.pack(">i", len(value)) + value
    _run_all(struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body)


@FUZZ
@given(st.integers(0, 7), st.binary(max_size=200), st.integers(0, 2))
def test_decompress_random_bytes(codec: int, data: bytes, magic: int) -> None:
    try:
        decompress(codec, data, magic=magic)
    except KafkaError:
        pass
