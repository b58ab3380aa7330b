"""Reader and Writer: formats, bounds and error types."""

from __future__ import annotations

import uuid

import pytest

from wire.errors import DecodeError, EncodeError
from wire.primitives import ZERO_UUID, Reader, Writer


def written(fn_name: str, *args: object) -> bytes:
    w = Writer()
    getattr(w, fn_name)(*args)
    return w.getvalue()


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01")],
)
def test_varint_zigzag(value: int, encoded: bytes) -> None:
    assert written("varint", value) == encoded
    assert Reader(encoded).varint() == value


@pytest.mark.parametrize("value", [0, 1, -1, 2**31 - 1, -(2**31)])
def test_varint_extremes(value: int) -> None:
    assert Reader(written("varint", value)).varint() == value


@pytest.mark.parametrize("value", [0, 300, 2**63 - 1, -(2**63)])
def test_varlong(value: int) -> None:
    assert Reader(written("varlong", value)).varlong() == value


def test_uvarint_known_bytes() -> None:
    assert written("uvarint", 300) == b"\xac\x02"
    assert Reader(b"\xac\x02").uvarint() == 300
    assert Reader(b"\xff\xff\xff\xff\x0f").uvarint() == 2**32 - 1


def test_uvarint_too_long_or_truncated() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff\xff\x01").uvarint()
    with pytest.raises(DecodeError):
        Reader(b"\x80").uvarint()


@pytest.mark.parametrize(
    "method",
    [
        "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "uuid",
        "varint", "varlong", "uvarint", "string", "nullable_string", "compact_string",
        "compact_nullable_string", "bytes_", "nullable_bytes", "compact_bytes",
        "compact_nullable_bytes", "unknown_tags",
    ],
)  # fmt: skip
def test_every_read_past_end_is_decode_error(method: str) -> None:
    with pytest.raises(DecodeError):
        getattr(Reader(b""), method)()


def test_fixed_width_round_trip() -> None:
    w = Writer()
    w.int8(-2)
    w.int16(-300)
    w.int32(-70000)
    w.int64(-(2**40))
    w.uint16(65535)
    w.uint32(2**32 - 1)
    w.float64(0.5)
    w.bool(True)
    w.uuid(uuid.UUID(int=12345))
    r = Reader(w.getvalue())
    assert (r.int8(), r.int16(), r.int32(), r.int64()) == (-2, -300, -70000, -(2**40))
    assert (r.uint16(), r.uint32(), r.float64(), r.bool()) == (65535, 2**32 - 1, 0.5, True)
    assert r.uuid() == uuid.UUID(int=12345)
    assert r.remaining() == 0


def test_bool_reads_any_nonzero_as_true() -> None:
    assert Reader(b"\x02").bool() is True
    assert Reader(b"\x00").bool() is False


def test_strings() -> None:
    assert written("string", "ab") == b"\x00\x02ab"
    assert written("nullable_string", None) == b"\xff\xff"
    assert written("compact_string", "ab") == b"\x03ab"
    assert written("compact_nullable_string", None) == b"\x00"
    assert Reader(b"\x00\x02ab").string() == "ab"
    assert Reader(b"\xff\xff").nullable_string() is None
    assert Reader(b"\x00").compact_nullable_string() is None
    assert Reader("é".encode() and b"\x03\xc3\xa9").compact_string() == "é"


def test_bad_lengths_are_decode_errors() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff").string()  # null where not nullable
    with pytest.raises(DecodeError):
        Reader(b"\xff\xfe").nullable_string()  # -2
    with pytest.raises(DecodeError):
        Reader(b"\x00\x05ab").string()  # past the end
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xfe").nullable_bytes()
    with pytest.raises(DecodeError):
        Reader(b"\x00").compact_string()
    with pytest.raises(DecodeError):
        Reader(b"\x00\x02\xff\xfe").string()  # invalid UTF-8


def test_array_lengths() -> None:
    assert Reader(b"\xff\xff\xff\xff").nullable_array_len(False) == -1
    assert Reader(b"\x00").nullable_array_len(True) == -1
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff").array_len(False)
    with pytest.raises(DecodeError):
        Reader(b"\x7f\xff\xff\xff").array_len(False)  # more elements than bytes left
    assert Reader(b"\x00\x00\x00\x01\x00").array_len(False) == 1


def test_int_arrays() -> None:
    w = Writer()
    w.int32_array([1, -2, 3])
    r = Reader(w.getvalue())
    assert r.int32_array(3) == [1, -2, 3]
    with pytest.raises(DecodeError):
        Reader(b"\x00\x00").int32_array(1)


def test_records_are_zero_copy_slices() -> None:
    data = b"\x00\x00\x00\x03xyz"
    view = Reader(data).records(False)
    assert view is not None and bytes(view) == b"xyz" and view.obj is data
    assert Reader(b"\x04xyz").records(True) == b"xyz"
    assert Reader(b"\xff\xff\xff\xff").records(False) is None
    with pytest.raises(DecodeError):
        Reader(b"\x00\x00\x00\x09xyz").records(False)


class Region:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


def test_writer_external_region() -> None:
    w = Writer()
    w.int8(1)
    region = Region(10)
    w.records(region, compact=False)
    w.int8(2)
    assert w.nbytes == 1 + 4 + 10 + 1
    assert w.parts() == [b"\x01\x00\x00\x00\x0a", region, b"\x02"]
    with pytest.raises(EncodeError):
        w.getvalue()


def test_writer_records_bytes_like_are_copied() -> None:
    w = Writer()
    w.records(memoryview(b"ab"), compact=True)
    w.records(None, compact=True)
    w.records(bytearray(b"c"), compact=False)
    assert w.getvalue() == b"\x03ab\x00\x00\x00\x00\x01c"
    with pytest.raises(EncodeError):
        Writer().records(object(), compact=False)


@pytest.mark.parametrize(
    ("method", "value"),
    [
        ("int8", 128),
        ("int16", 2**15),
        ("int32", None),
        ("uint16", -1),
        ("uvarint", -1),
        ("varint", 2**31),
        ("string", None),
        ("string", "x" * 40000),
        ("compact_string", None),
        ("bytes_", None),
        ("uuid", None),
        ("bool", None),
    ],
)
def test_writer_rejects_unencodable_values(method: str, value: object) -> None:
    with pytest.raises(EncodeError):
        getattr(Writer(), method)(value)


def test_tagged_fields_and_unknown_tags() -> None:
    w = Writer()
    w.tagged_fields([(1, b"a"), (300, b"")])
    data = w.getvalue()
    assert data == b"\x02\x01\x01a\xac\x02\x00"
    assert Reader(data).unknown_tags() == [(1, b"a"), (300, b"")]


def test_reader_accepts_any_buffer_and_offset() -> None:
    r = Reader(bytearray(b"\x00\x01\x00\x02"), 2)
    assert r.int16() == 2
    assert ZERO_UUID == uuid.UUID(int=0)


def test_patch_int32() -> None:
    w = Writer()
    w.int32(0)
    w.int8(9)
    w.patch_int32(0, w.nbytes - 4)
    assert w.getvalue() == b"\x00\x00\x00\x01\x09"
