"""Zig-zag variable-length integers, as used inside RecordBatch v2 records.

Format (protocol guide, "Record"; the same encoding as Protocol Buffers' sint32/sint64):
a signed value v is first zig-zag mapped to an unsigned one, (v << 1) ^ (v >> 63), so that
small magnitudes of either sign stay small; the unsigned value is then written 7 bits at a
time, least significant group first, with the high bit of each byte set when more bytes
follow. A varint (int32) takes at most 5 bytes, a varlong (int64) at most 10.

These helpers live here rather than in wire.primitives because record decoding is the hot
path of the broker and wants plain functions over `bytes` with explicit positions.
"""

from wire.errors import DecodeError

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10

# Single-byte encodings of the zig-zag values -64..63, the common case for deltas and lengths.
_SMALL = {v: bytes(((v << 1) ^ (v >> 63),)) for v in range(-64, 64)}


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed integer (int32 or int64 range)."""
    small = _SMALL.get(value)
    if small is not None:
        return small
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def read_varint(data: bytes, pos: int, max_bytes: int = VARINT_MAX_BYTES) -> tuple[int, int]:
    """Decode one zig-zag varint at `pos`; returns (value, position after it).

    `max_bytes` is 5 for a varint and 10 for a varlong; a longer run of continuation bytes,
    or one running past the end of `data`, raises DecodeError.
    """
    result = 0
    shift = 0
    end = pos + max_bytes
    n = len(data)
    while True:
        if pos >= n or pos >= end:
            raise DecodeError("truncated or overlong varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def read_varlong(data: bytes, pos: int) -> tuple[int, int]:
    """Decode one zig-zag varlong (up to 10 bytes) at `pos`."""
    return read_varint(data, pos, VARLONG_MAX_BYTES)
