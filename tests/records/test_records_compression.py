import gzip
import os
import struct

import cramjam
import lz4.frame as lz4_frame
import pytest
import snappy
import zstandard
from kafka.codec import (
    lz4_decode_old_kafka,
    lz4_encode_old_kafka,
    snappy_decode,
    snappy_encode,
)
from records_helpers import raises_code

from wire.errors import ErrorCode
from wire.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress
from wire.records.xxhash32 import xxh32

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
PAYLOADS = {
    "empty": b"",
    "small": b"hello kafka",
    "repetitive": b"abcdefgh" * 40_000,  # several snappy and lz4 blocks
    "random": os.urandom(150_000),  # incompressible: lz4 stores blocks raw
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name", PAYLOADS)
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_round_trip(codec: int, name: str, magic: int) -> None:
    data = PAYLOADS[name]
    assert decompress(codec, compress(codec, data, magic=magic), magic=magic) == data


def test_accepts_memoryview() -> None:
    data = memoryview(b"xx" + PAYLOADS["repetitive"])[2:]
    for codec in CODECS:
        assert decompress(codec, memoryview(compress(codec, data))) == bytes(data)


def test_snappy_writes_xerial_stream_with_32k_blocks() -> None:
    data = PAYLOADS["repetitive"]
    out = compress(SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [32768] * 9 + [len(data) - 9 * 32768]
    assert b"".join(blocks) == data


def test_snappy_reads_raw_and_little_endian_xerial_versions() -> None:
    data = b"raw snappy " * 100
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    block = bytes(cramjam.snappy.compress_raw(data))
    odd = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(SNAPPY, odd) == data


@pytest.mark.parametrize("bad_tail", [b"\x00\x00", struct.pack(">i", 100) + b"abc"])
def test_snappy_bad_xerial_blocks(bad_tail: bytes) -> None:
    stream = compress(SNAPPY, b"payload") + bad_tail
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        decompress(SNAPPY, stream)


def test_lz4_frame_layout_matches_kafka_output_stream() -> None:
    out = compress(LZ4, PAYLOADS["repetitive"])
    assert out[:6] == b"\x04\x22\x4d\x18\x60\x40"  # magic, FLG independent blocks, BD 64 KiB
    assert out[6] == (xxh32(b"\x60\x40") >> 8) & 0xFF
    assert out.endswith(b"\x00\x00\x00\x00")


def test_lz4_magic0_writes_kafka_legacy_header_checksum() -> None:
    out = compress(LZ4, b"old kafka", magic=0)
    assert out[6] == (xxh32(out[:6]) >> 8) & 0xFF
    assert out[6] != (xxh32(out[4:6]) >> 8) & 0xFF
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        decompress(LZ4, out, magic=1)  # a magic >= 1 reader checks the checksum


@pytest.mark.parametrize("frame", [b"\x04\x22\x4d\x18\x68\x40\x00\x00", b"\x04\x22", b"junk" * 4])
def test_lz4_magic0_short_or_foreign_frames(frame: bytes) -> None:
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        decompress(LZ4, frame, magic=0)


def test_lz4_reads_linked_blocks_and_checksums() -> None:
    data = PAYLOADS["repetitive"]
    assert decompress(LZ4, bytes(cramjam.lz4.compress(data))) == data


def test_zstd_reads_streamed_frames_without_content_size() -> None:
    data = PAYLOADS["repetitive"]
    c = cramjam.zstd.Compressor()
    c.compress(data)
    frame = bytes(c.finish())
    assert decompress(ZSTD, frame) == data


def test_gzip_interoperates_with_stdlib() -> None:
    data = PAYLOADS["repetitive"]
    assert gzip.decompress(compress(GZIP, data)) == data
    assert decompress(GZIP, gzip.compress(data)) == data


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_is_corrupt_message(codec: int) -> None:
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        decompress(codec, b"\x82SNAPPY\x00 this is not compressed data at all")


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_truncated_stream_is_corrupt_message(codec: int) -> None:
    out = compress(codec, PAYLOADS["random"])
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        decompress(codec, out[: len(out) // 2])


def test_unknown_codec() -> None:
    with raises_code(ErrorCode.CORRUPT_MESSAGE):
        decompress(5, b"x")
    with pytest.raises(ValueError):
        compress(7, b"x")


# Interoperability with the libraries other Python clients (kafka-python, aiokafka) use.


def test_python_snappy_interop() -> None:
    data = PAYLOADS["repetitive"]
    assert snappy_decode(compress(SNAPPY, data)) == data
    assert decompress(SNAPPY, snappy_encode(data)) == data
    assert decompress(SNAPPY, snappy_encode(data, xerial_compatible=False)) == data
    assert decompress(SNAPPY, snappy.compress(data)) == data


def test_python_lz4_interop() -> None:
    data = PAYLOADS["repetitive"] + PAYLOADS["random"]
    assert lz4_frame.decompress(compress(LZ4, data)) == data
    for linked in (False, True):
        assert decompress(LZ4, lz4_frame.compress(data, block_linked=linked)) == data
    assert decompress(LZ4, lz4_frame.compress(data, store_size=True, content_checksum=True)) == data


def test_kafka_python_old_lz4_framing() -> None:
    data = PAYLOADS["repetitive"]
    assert decompress(LZ4, lz4_encode_old_kafka(data), magic=0) == data
    assert lz4_decode_old_kafka(compress(LZ4, data, magic=0)) == data


def test_zstandard_interop() -> None:
    data = PAYLOADS["repetitive"]
    assert zstandard.ZstdDecompressor().decompress(compress(ZSTD, data)) == data
    cobj = zstandard.ZstdCompressor().compressobj()
    streamed = cobj.compress(data) + cobj.flush()
    assert decompress(ZSTD, streamed) == data
