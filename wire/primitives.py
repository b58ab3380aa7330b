"""Kafka protocol primitive types: a bounds-checked Reader and a part-collecting Writer.

Wire formats (protocol guide, "Protocol Primitive Types"), all big-endian:
- int8/int16/int32/int64, uint16/uint32: fixed width two's complement / unsigned.
- float64: IEEE 754 double. bool: one byte, 0 is false, anything else is true.
- uuid: 16 bytes, most significant first; the zero UUID stands for "none".
- varint/varlong: zig-zag encoded, then unsigned varint (7 bits a byte, low bits first,
  high bit set on every byte but the last); at most 5 (varint) or 10 (varlong) bytes.
- string: int16 length then UTF-8 bytes; nullable strings use length -1 for null.
- bytes, records: int32 length then raw bytes; -1 for null.
- compact string/bytes/records/array (flexible versions, KIP-482): unsigned varint of
  length + 1, so 0 is null.
- array: int32 count (-1 null) or compact uvarint count + 1, then the elements.
- tagged fields (KIP-482): uvarint count, then for each field uvarint tag, uvarint size,
  and `size` bytes of value.

The Reader never raises anything but DecodeError on bad input. The Writer raises EncodeError
for values the format cannot carry. A Writer collects bytes in one bytearray plus *external
regions*: objects with an integer `nbytes` that are not bytes-like (e.g. a file region the IO
shell sends with sendfile); `parts()` returns the bytes and regions in order.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from wire.errors import DecodeError, EncodeError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")
_U64X2 = struct.Struct(">QQ")

_UUID = uuid.UUID
ZERO_UUID = uuid.UUID(int=0)

_MAX_STRING = 0x7FFF


def _out_of_range(what: str, v: object) -> EncodeError:
    return EncodeError(f"cannot encode {v!r} as {what}")


class Reader:
    """Reads Kafka primitives from a buffer, advancing `pos`."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.data = view
        self.pos = pos
        self.end = len(view)

    def remaining(self) -> int:
        return self.end - self.pos

    def _short(self, n: int) -> DecodeError:
        return DecodeError(f"need {n} bytes at offset {self.pos}, have {self.end - self.pos}")

    def _fixed(self, s: struct.Struct) -> Any:
        pos = self.pos
        try:
            v = s.unpack_from(self.data, pos)[0]
        except struct.error:
            raise self._short(s.size) from None
        self.pos = pos + s.size
        return v

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        pos = self.pos
        try:
            v = _I16.unpack_from(self.data, pos)[0]
        except struct.error:
            raise self._short(2) from None
        self.pos = pos + 2
        return v

    def int32(self) -> int:
        pos = self.pos
        try:
            v = _I32.unpack_from(self.data, pos)[0]
        except struct.error:
            raise self._short(4) from None
        self.pos = pos + 4
        return v

    def int64(self) -> int:
        pos = self.pos
        try:
            v = _I64.unpack_from(self.data, pos)[0]
        except struct.error:
            raise self._short(8) from None
        self.pos = pos + 8
        return v

    def uint16(self) -> int:
        return self._fixed(_U16)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def float64(self) -> float:
        return self._fixed(_F64)

    def bool(self) -> bool:
        pos = self.pos
        if pos >= self.end:
            raise self._short(1)
        self.pos = pos + 1
        return self.data[pos] != 0

    def uuid(self) -> uuid.UUID:
        pos = self.pos
        try:
            hi, lo = _U64X2.unpack_from(self.data, pos)
        except struct.error:
            raise self._short(16) from None
        self.pos = pos + 16
        return _UUID(int=(hi << 64) | lo)

    def unpack(self, s: struct.Struct) -> tuple[Any, ...]:
        """Several fixed-width fields at once (the generator groups adjacent ones)."""
        pos = self.pos
        try:
            v = s.unpack_from(self.data, pos)
        except struct.error:
            raise self._short(s.size) from None
        self.pos = pos + s.size
        return v

    def _uvar(self, max_bytes: int) -> int:
        data = self.data
        pos = self.pos
        end = self.end
        if pos >= end:
            raise self._short(1)
        b = data[pos]
        if b < 0x80:
            self.pos = pos + 1
            return b
        result = b & 0x7F
        shift = 7
        limit = 7 * max_bytes
        while True:
            pos += 1
            if pos >= end:
                raise DecodeError("truncated varint")
            b = data[pos]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift >= limit:
                raise DecodeError("varint too long")
        self.pos = pos + 1
        return result

    def uvarint(self) -> int:
        """Unsigned varint of at most 5 bytes."""
        return self._uvar(5)

    def uvarlong(self) -> int:
        """Unsigned varint of at most 10 bytes."""
        return self._uvar(10)

    def varint(self) -> int:
        v = self._uvar(5)
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        v = self._uvar(10)
        return (v >> 1) ^ -(v & 1)

    def _slice(self, n: int) -> memoryview:
        pos = self.pos
        end = pos + n
        if end > self.end:
            raise self._short(n)
        self.pos = end
        return self.data[pos:end]

    def raw(self, n: int) -> bytes:
        """`n` bytes, copied."""
        if n < 0:
            raise DecodeError(f"negative length {n}")
        return bytes(self._slice(n))

    def _utf8(self, n: int) -> str:
        try:
            return str(self._slice(n), "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"invalid UTF-8 in string: {e}") from None

    @staticmethod
    def _bad_length(n: int, nullable: bool) -> DecodeError:
        if n == -1 and not nullable:
            return DecodeError("null value in a non-nullable field")
        return DecodeError(f"invalid length {n}")

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise self._bad_length(n, False)
        return self._utf8(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n < 0:
            if n == -1:
                return None
            raise self._bad_length(n, True)
        return self._utf8(n)

    def compact_string(self) -> str:
        n = self._uvar(5) - 1
        if n < 0:
            raise self._bad_length(n, False)
        return self._utf8(n)

    def compact_nullable_string(self) -> str | None:
        n = self._uvar(5) - 1
        if n < 0:
            return None
        return self._utf8(n)

    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            raise self._bad_length(n, False)
        return bytes(self._slice(n))

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            if n == -1:
                return None
            raise self._bad_length(n, True)
        return bytes(self._slice(n))

    def compact_bytes(self) -> bytes:
        n = self._uvar(5) - 1
        if n < 0:
            raise self._bad_length(n, False)
        return bytes(self._slice(n))

    def compact_nullable_bytes(self) -> bytes | None:
        n = self._uvar(5) - 1
        if n < 0:
            return None
        return bytes(self._slice(n))

    def records(self, compact: bool) -> memoryview | None:
        """A zero-copy slice of the input, or None for null."""
        n = self._uvar(5) - 1 if compact else self.int32()
        if n < 0:
            if n == -1:
                return None
            raise self._bad_length(n, True)
        return self._slice(n)

    def array_len(self, compact: bool) -> int:
        """Element count of a non-nullable array."""
        n = self._uvar(5) - 1 if compact else self.int32()
        if n < 0:
            raise self._bad_length(n, False)
        if n > self.end - self.pos:
            # Every element takes at least one byte in practice; this keeps a forged count
            # from driving a huge loop (Kafka's generated readers make the same check).
            raise DecodeError(f"array of {n} elements with {self.end - self.pos} bytes left")
        return n

    def nullable_array_len(self, compact: bool) -> int:
        """Element count of a nullable array, -1 for null."""
        n = self._uvar(5) - 1 if compact else self.int32()
        if n < 0:
            if n == -1:
                return -1
            raise self._bad_length(n, True)
        if n > self.end - self.pos:
            raise DecodeError(f"array of {n} elements with {self.end - self.pos} bytes left")
        return n

    def _int_array(self, code: str, size: int, n: int) -> list[int]:
        pos = self.pos
        if pos + size * n > self.end:
            raise self._short(size * n)
        self.pos = pos + size * n
        return list(struct.unpack_from(f">{n}{code}", self.data, pos))

    def int8_array(self, n: int) -> list[int]:
        return self._int_array("b", 1, n)

    def int16_array(self, n: int) -> list[int]:
        return self._int_array("h", 2, n)

    def int32_array(self, n: int) -> list[int]:
        return self._int_array("i", 4, n)

    def int64_array(self, n: int) -> list[int]:
        return self._int_array("q", 8, n)

    def unknown_tags(self) -> list[tuple[int, bytes]]:
        """A tagged-field buffer none of whose tags this struct knows."""
        n = self._uvar(5)
        if not n:
            return []
        out = []
        for _ in range(n):
            tag = self._uvar(5)
            out.append((tag, bytes(self._slice(self._uvar(5)))))
        return out

    def tag_end(self, size: int) -> int:
        """End position of a known tagged field's value of `size` bytes."""
        end = self.pos + size
        if end > self.end:
            raise self._short(size)
        return end

    def finish_tag(self, end: int) -> None:
        """After reading a known tagged field: skip any excess, reject an overrun."""
        if self.pos > end:
            raise DecodeError("tagged field value overruns its size")
        self.pos = end


class Writer:
    """Collects an encoded message: bytes in `buf`, external regions recorded by offset."""

    __slots__ = ("buf", "_regions", "_region_bytes")

    def __init__(self) -> None:
        self.buf = bytearray()
        self._regions: list[tuple[int, object]] = []
        self._region_bytes = 0

    @property
    def nbytes(self) -> int:
        return len(self.buf) + self._region_bytes

    def parts(self) -> list[bytes | object]:
        """Bytes chunks and external regions, in order."""
        buf = self.buf
        if not self._regions:
            return [bytes(buf)]
        out: list[bytes | object] = []
        start = 0
        for offset, region in self._regions:
            if offset > start:
                out.append(bytes(buf[start:offset]))
            out.append(region)
            start = offset
        if start < len(buf):
            out.append(bytes(buf[start:]))
        return out

    def getvalue(self) -> bytes:
        if self._regions:
            raise EncodeError("message holds an external region; use parts()")
        return bytes(self.buf)

    def _fixed(self, s: struct.Struct, v: Any, what: str) -> None:
        try:
            self.buf += s.pack(v)
        except struct.error:
            raise _out_of_range(what, v) from None

    def int8(self, v: int) -> None:
        self._fixed(_I8, v, "int8")

    def int16(self, v: int) -> None:
        try:
            self.buf += _I16.pack(v)
        except struct.error:
            raise _out_of_range("int16", v) from None

    def int32(self, v: int) -> None:
        try:
            self.buf += _I32.pack(v)
        except struct.error:
            raise _out_of_range("int32", v) from None

    def int64(self, v: int) -> None:
        try:
            self.buf += _I64.pack(v)
        except struct.error:
            raise _out_of_range("int64", v) from None

    def uint16(self, v: int) -> None:
        self._fixed(_U16, v, "uint16")

    def uint32(self, v: int) -> None:
        self._fixed(_U32, v, "uint32")

    def float64(self, v: float) -> None:
        self._fixed(_F64, v, "float64")

    def bool(self, v: bool) -> None:
        if v is None:
            raise _out_of_range("bool", v)
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID) -> None:
        try:
            self.buf += v.bytes
        except AttributeError:
            raise _out_of_range("uuid", v) from None

    def pack(self, s: struct.Struct, *values: Any) -> None:
        """Several fixed-width fields at once (the generator groups adjacent ones)."""
        try:
            self.buf += s.pack(*values)
        except struct.error:
            raise _out_of_range(s.format, values) from None

    def patch_int32(self, pos: int, v: int) -> None:
        """Overwrite 4 bytes at `pos` (a size prefix written before its value was known)."""
        _I32.pack_into(self.buf, pos, v)

    def uvarint(self, v: int) -> None:
        if 0 <= v < 0x80:
            self.buf.append(v)
            return
        if v < 0 or v > 0xFFFFFFFF:
            raise _out_of_range("uvarint", v)
        self._uvar(v)

    def uvarlong(self, v: int) -> None:
        if v < 0 or v > 0xFFFFFFFFFFFFFFFF:
            raise _out_of_range("uvarlong", v)
        self._uvar(v)

    def _uvar(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.buf += out

    def varint(self, v: int) -> None:
        if not -0x80000000 <= v <= 0x7FFFFFFF:
            raise _out_of_range("varint", v)
        self._uvar(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
            raise _out_of_range("varlong", v)
        self._uvar(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    @staticmethod
    def _utf8(v: str | None) -> bytes:
        if v is None:
            raise EncodeError("null value in a non-nullable string field")
        try:
            return v.encode("utf-8")
        except (AttributeError, UnicodeEncodeError):
            raise _out_of_range("string", v) from None

    def string(self, v: str) -> None:
        b = self._utf8(v)
        if len(b) > _MAX_STRING:
            raise EncodeError(f"string of {len(b)} bytes is longer than {_MAX_STRING}")
        self.buf += _I16.pack(len(b))
        self.buf += b

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.string(v)

    def compact_string(self, v: str) -> None:
        b = self._utf8(v)
        if len(b) > _MAX_STRING:
            raise EncodeError(f"string of {len(b)} bytes is longer than {_MAX_STRING}")
        self.uvarint(len(b) + 1)
        self.buf += b

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    @staticmethod
    def _bytes_len(v: object) -> int:
        if v is None:
            raise EncodeError("null value in a non-nullable bytes field")
        if isinstance(v, memoryview):
            return v.nbytes
        if isinstance(v, bytes | bytearray):
            return len(v)
        raise _out_of_range("bytes", v)

    def bytes_(self, v: bytes) -> None:
        n = self._bytes_len(v)
        self.int32(n)
        self.buf += v

    def nullable_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes_(v)

    def compact_bytes(self, v: bytes) -> None:
        n = self._bytes_len(v)
        self.uvarint(n + 1)
        self.buf += v

    def compact_nullable_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    def records(self, value: object, compact: bool) -> None:
        """None, bytes-like (copied), or an external region (recorded, not read)."""
        if value is None:
            if compact:
                self.buf.append(0)
            else:
                self.buf += b"\xff\xff\xff\xff"
            return
        if isinstance(value, bytes | bytearray | memoryview):
            n = self._bytes_len(value)
            region = None
        else:
            n = getattr(value, "nbytes", None)
            if not isinstance(n, int) or n < 0:
                raise _out_of_range("records", value)
            region = value
        if compact:
            self.uvarint(n + 1)
        else:
            self.int32(n)
        if region is None:
            self.buf += value  # type: ignore[operator]
        else:
            self._regions.append((len(self.buf), region))
            self._region_bytes += n

    def array_len(self, n: int, compact: bool) -> None:
        if compact:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def null_array(self, compact: bool) -> None:
        if compact:
            self.buf.append(0)
        else:
            self.buf += b"\xff\xff\xff\xff"

    def _int_array(self, code: str, values: list[int]) -> None:
        try:
            self.buf += struct.pack(f">{len(values)}{code}", *values)
        except struct.error:
            raise _out_of_range(f"array of {code}", values) from None

    def int8_array(self, values: list[int]) -> None:
        self._int_array("b", values)

    def int16_array(self, values: list[int]) -> None:
        self._int_array("h", values)

    def int32_array(self, values: list[int]) -> None:
        self._int_array("i", values)

    def int64_array(self, values: list[int]) -> None:
        self._int_array("q", values)

    def tagged_fields(self, fields: list[tuple[int, bytes]]) -> None:
        """A tagged-field buffer; `fields` must be sorted by tag."""
        if not fields:
            self.buf.append(0)
            return
        self.uvarint(len(fields))
        for tag, value in fields:
            self.uvarint(tag)
            self.uvarint(len(value))
            self.buf += value
