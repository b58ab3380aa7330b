"""XXH32, the 32-bit xxHash, for the LZ4 frame descriptor checksum.

The LZ4 frame format stores one header-checksum byte (HC): the second byte,
(xxh32(descriptor, seed=0) >> 8) & 0xFF, of the hash of the frame descriptor. Only a few
bytes are ever hashed here, so a plain Python implementation of the published algorithm
(lanes of 16 bytes, then 4-byte and 1-byte tails, then the avalanche) is fast enough and
saves a dependency.
"""

_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 13) * _P1) & _M


def xxh32(data: bytes, seed: int = 0) -> int:
    """The XXH32 hash of `data`."""
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M
        v2 = (seed + _P2) & _M
        v3 = seed & _M
        v4 = (seed - _P1) & _M
        while i <= n - 16:
            v1 = _round(v1, int.from_bytes(data[i : i + 4], "little"))
            v2 = _round(v2, int.from_bytes(data[i + 4 : i + 8], "little"))
            v3 = _round(v3, int.from_bytes(data[i + 8 : i + 12], "little"))
            v4 = _round(v4, int.from_bytes(data[i + 12 : i + 16], "little"))
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 4 <= n:
        h = (h + int.from_bytes(data[i : i + 4], "little") * _P3) & _M
        h = (_rotl(h, 17) * _P4) & _M
        i += 4
    while i < n:
        h = (h + data[i] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    h ^= h >> 16
    return h
