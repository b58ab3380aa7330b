import cramjam
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wire.errors import DecodeError
from wire.records.varint import encode_varint, read_varint, read_varlong
from wire.records.xxhash32 import xxh32


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
    ],
)
def test_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert read_varlong(encoded, 0) == (value, len(encoded))


@given(st.integers(-(2**63), 2**63 - 1), st.binary(max_size=3))
def test_varlong_round_trip(value: int, suffix: bytes) -> None:
    data = b"\x00" + encode_varint(value) + suffix
    assert read_varlong(data, 1) == (value, len(data) - len(suffix))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    data = encode_varint(value)
    assert read_varint(data, 0) == (value, len(data))


def test_truncated_varint() -> None:
    with pytest.raises(DecodeError):
        read_varint(b"\x80\x80", 0)


def test_overlong_varint() -> None:
    with pytest.raises(DecodeError):
        read_varint(b"\x80\x80\x80\x80\x80\x01", 0)
    assert read_varlong(b"\x80\x80\x80\x80\x80\x01", 0)[1] == 6


@pytest.mark.parametrize(
    ("data", "digest"),
    [
        (b"", 0x02CC5D05),
        (b"a", 0x550D7456),
        (b"abc", 0x32D153FF),
        (b"Nobody inspects the spammish repetition", 0xE2293B2F),
    ],
)
def test_xxh32_reference_values(data: bytes, digest: int) -> None:
    assert xxh32(data) == digest


def test_xxh32_matches_lz4_frame_descriptor_checksum() -> None:
    frame = bytes(cramjam.lz4.compress(b"x" * 100))
    assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF
