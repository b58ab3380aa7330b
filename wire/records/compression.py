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

Decompression is always bounded (a compression bomb must cost neither memory nor time): it
streams, and stops with DecompressionLimitError (INVALID_RECORD) as soon as the output
passes ``max_bytes``, before expanding further. ``decompression_cap`` derives the bound from
the topic's max.message.bytes and the batch's record count. gzip uses the standard library's
zlib (``max_length``), zstd the zstandard package's stream reader, LZ4 the lz4 package's
frame decompressor (``max_length``), and snappy checks each block's declared length before
decompressing it: cramjam's decompressors have no output bound (``decompress_into`` needs
the whole output buffer allocated up front).
"""

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

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


# Kafka's default message.max.bytes: the bound when a caller knows no topic config.
DEFAULT_MAX_MESSAGE_BYTES = 1048588
# However many records a batch claims, its records section may expand to at most this many
# times max.message.bytes (64 MiB at the default). The limit is on the compressed batch, and
# producers fill batches by uncompressed size (librdkafka) or a compression-ratio estimate
# (the Java client), so real batches stay far below this ratio.
MAX_EXPANSION_FACTOR = 64
_CHUNK = 256 * 1024
_ZSTD_MAX_RATIO = 128 * 1024 // 4


class DecompressionLimitError(KafkaError):
    """The data would decompress past the allowed size: refused as INVALID_RECORD."""

    def __init__(self, codec: int, max_bytes: int) -> None:
        super().__init__(
            ErrorCode.INVALID_RECORD,
            f"{CODEC_NAMES.get(codec, codec)} data decompresses to more than {max_bytes} bytes",
        )


def decompression_cap(max_message_bytes: int, record_count: int | None = None) -> int:
    """The most bytes a batch's records section may decompress to: each record at most
    max.message.bytes (no producer sends a larger one), and the whole at most
    MAX_EXPANSION_FACTOR times max.message.bytes. ``record_count`` None: a legacy wrapper
    message, whose count is unknown."""
    ceiling = MAX_EXPANSION_FACTOR * max_message_bytes
    if record_count is None:
        return ceiling
    return max(0, min(record_count * max_message_bytes, ceiling))


def decompress(
    codec: int,
    data: Buffer,
    *,
    max_bytes: int = MAX_EXPANSION_FACTOR * DEFAULT_MAX_MESSAGE_BYTES,
    magic: int = 2,
) -> bytes:
    """Decompress `data` into at most `max_bytes` bytes (DecompressionLimitError past it);
    raises KafkaError(CORRUPT_MESSAGE) on unknown codecs or bad data."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return _gzip_decode(data, max_bytes)
        if codec == SNAPPY:
            return _snappy_decode(data, max_bytes)
        if codec == LZ4:
            if magic == 0:
                data = _lz4_fix_header_checksum(data)
            return _lz4_decode(data, max_bytes)
        if codec == ZSTD:
            return _zstd_decode(data, max_bytes)
    except (cramjam.DecompressionError, zlib.error, zstandard.ZstdError, RuntimeError) as e:
        # lz4.frame reports damage as RuntimeError.
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{CODEC_NAMES[codec]}: {e}") from e
    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec {codec}")


class _Output:
    """Decompressed chunks, refused once they pass the bound."""

    def __init__(self, codec: int, max_bytes: int) -> None:
        self.codec = codec
        self.max_bytes = max_bytes
        self.chunks: list[bytes] = []
        self.size = 0

    def room(self) -> int:
        """How many more bytes to ask a decoder for: one past the bound detects a bomb."""
        return self.max_bytes + 1 - self.size

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise DecompressionLimitError(self.codec, self.max_bytes)
        self.chunks.append(chunk)

    def value(self) -> bytes:
        return self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)


def _gzip_decode(data: Buffer, max_bytes: int) -> bytes:
    out = _Output(GZIP, max_bytes)
    rest = bytes(data)
    # Members one after another make one stream (RFC 1952 2.2), as Java's GZIPInputStream
    # reads them.
    while rest:
        decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        pending = rest
        while not decoder.eof:
            chunk = decoder.decompress(pending, min(_CHUNK, out.room()))
            out.add(chunk)
            pending = decoder.unconsumed_tail
            if not chunk and not pending and not decoder.eof:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "gzip: truncated stream")
        rest = decoder.unused_data
    return out.value()


def _zstd_decode(data: Buffer, max_bytes: int) -> bytes:
    # zstandard's decompressor has no output bound, but zstd's expansion per input byte has
    # one: a block decompresses to at most 128 KiB and takes at least 4 bytes (an RLE block).
    # Feeding it input in steps of room // _ZSTD_MAX_RATIO bytes never overshoots the cap.
    out = _Output(ZSTD, max_bytes)
    view = memoryview(data)
    decoder = zstandard.ZstdDecompressor().decompressobj()
    pos = 0
    while pos < len(view):
        step = max(1, out.room() // _ZSTD_MAX_RATIO)
        out.add(decoder.decompress(view[pos : pos + step]))
        pos = min(pos + step, len(view))
        if decoder.eof:
            # Frames one after another make one stream; the next starts where this ended.
            pos -= len(decoder.unused_data)
            decoder = zstandard.ZstdDecompressor().decompressobj()
            if pos == len(view):
                return out.value()
    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "zstd: truncated frame")


def _lz4_decode(data: Buffer, max_bytes: int) -> bytes:
    out = _Output(LZ4, max_bytes)
    decoder = lz4.frame.LZ4FrameDecompressor()
    pending: Buffer = data
    while True:
        out.add(decoder.decompress(pending, max_length=min(_CHUNK, out.room())))
        pending = b""
        if decoder.eof:
            return out.value()
        if decoder.needs_input:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "lz4: truncated frame")


def _snappy_xerial(data: Buffer) -> bytes:
    view = memoryview(data)
    out = [_XERIAL_HEADER]
    for i in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[i : i + _XERIAL_BLOCK]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_block(view: memoryview, out: _Output) -> None:
    # A raw snappy block starts with its uncompressed length: checked before decompressing.
    if cramjam.snappy.decompress_raw_len(view) > out.room() - 1:
        raise DecompressionLimitError(SNAPPY, out.max_bytes)
    out.add(bytes(cramjam.snappy.decompress_raw(view)))


def _snappy_decode(data: Buffer, max_bytes: int) -> bytes:
    view = memoryview(data)
    out = _Output(SNAPPY, max_bytes)
    if len(view) < 16 or view[:8] != _XERIAL_MAGIC:
        _snappy_block(view, out)
        return out.value()
    # The version words are not checked: some writers put them in little-endian order.
    pos = 16
    n = len(view)
    while pos < n:
        if n - pos < 4:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "snappy: truncated block length")
        (length,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if length < 0 or pos + length > n:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "snappy: bad block length")
        _snappy_block(view[pos : pos + length], out)
        pos += length
    return out.value()


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
