"""Compression codecs of Kafka record batches and legacy wrapper messages.

The codec id sits in attribute bits 0-2: NONE 0, GZIP 1, SNAPPY 2, LZ4 3, ZSTD 4. The bytes
compressed are the records section of a v2 batch, or the inner message set of a legacy
wrapper message. What each codec's stream looks like on the wire:

- GZIP: one standard gzip member (RFC 1952).
- SNAPPY: the Java client writes the xerial "snappy-java" stream: a 16-byte header
  (0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00, then int32 version 1 and int32 minimum compatible
  version 1, big-endian), then blocks, each an int32 big-endian length and one raw snappy
  block compressing at most 32 KiB of input. librdkafka and kafka-python read both that
  stream and bare raw snappy, and write either; we read both (the header decides) and
  write the xerial stream, which every client reads.
- LZ4: the LZ4 frame format (magic 0x184D2204 little-endian, FLG, BD, HC descriptor
  checksum, blocks of int32 little-endian size with the high bit meaning "stored
  uncompressed", a zero end mark). We write what Kafka's own LZ4 output stream writes:
  FLG 0x60 (version 1, independent blocks, no checksums, no content size), BD 0x40 (64 KiB
  blocks). Independent blocks matter: the Java reader decompresses each block on its own.
  Kafka before 0.10 (message format magic 0) hashed the frame magic too when computing HC
  (KAFKA-3160); for magic 0 we write that value and, when reading, ignore the stored HC.
- ZSTD: standard zstd frames (RFC 8878), level 3 as Kafka's default.

All decoding failures raise KafkaError(CORRUPT_MESSAGE).
"""

import struct

import cramjam

from wire.errors import ErrorCode, KafkaError
from wire.records.xxhash32 import xxh32

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60
_LZ4_BD = 0x40
_LZ4_BLOCK = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000
_ZSTD_LEVEL = 3

Buffer = bytes | bytearray | memoryview


def compress(codec: int, data: Buffer, *, magic: int = 2) -> bytes:
    """Compress `data` with `codec` as a Kafka client of message format `magic` would."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _snappy_xerial(data)
    if codec == LZ4:
        return _lz4_frame(data, legacy_checksum=magic == 0)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer, *, magic: int = 2) -> bytes:
    """Decompress `data`; raises KafkaError(CORRUPT_MESSAGE) on unknown codecs or bad data."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decode(data)
        if codec == LZ4:
            if magic == 0:
                data = _lz4_fix_header_checksum(data)
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{CODEC_NAMES[codec]}: {e}") from e
    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec {codec}")


def _snappy_xerial(data: Buffer) -> bytes:
    view = memoryview(data)
    out = [_XERIAL_HEADER]
    for i in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[i : i + _XERIAL_BLOCK]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decode(data: Buffer) -> bytes:
    view = memoryview(data)
    if len(view) < 16 or view[:8] != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    # The version words are not checked: some writers put them in little-endian order.
    out = []
    pos = 16
    n = len(view)
    while pos < n:
        if n - pos < 4:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "snappy: truncated block length")
        (length,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if length < 0 or pos + length > n:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "snappy: bad block length")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
        pos += length
    return b"".join(out)


def _lz4_frame(data: Buffer, *, legacy_checksum: bool) -> bytes:
    view = memoryview(data)
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    hashed = _LZ4_MAGIC + descriptor if legacy_checksum else descriptor
    out = [_LZ4_MAGIC, descriptor, bytes(((xxh32(hashed) >> 8) & 0xFF,))]
    for i in range(0, len(view), _LZ4_BLOCK):
        chunk = view[i : i + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            out.append(struct.pack("<I", len(chunk) | _LZ4_UNCOMPRESSED))
            out.append(bytes(chunk))
        else:
            out.append(struct.pack("<I", len(block)))
            out.append(block)
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)


def _lz4_fix_header_checksum(data: Buffer) -> bytes:
    """Replace the descriptor checksum of a frame with the correct one (KAFKA-3160)."""
    frame = bytearray(data)
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        return bytes(frame)  # not a frame: let the decoder report it
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(frame) <= end:
        return bytes(frame)
    frame[end] = (xxh32(bytes(frame[4:end])) >> 8) & 0xFF
    return bytes(frame)
