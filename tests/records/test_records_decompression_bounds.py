"""Decompression is bounded: bombs are refused before they expand (issue 13, item 2)."""

import resource
import time

import pytest
from records_helpers import bomb_batch, raises_code

from wire.errors import ErrorCode
from wire.records.compression import (
    GZIP,
    LZ4,
    MAX_EXPANSION_FACTOR,
    SNAPPY,
    ZSTD,
    DecompressionLimitError,
    compress,
    decompress,
    decompression_cap,
)
from wire.records.legacy import build_message_set, decode_message_set, to_v2_batches
from wire.records.record import Record, decode_batch, decode_records

BOMB_BYTES = 256 * 1024 * 1024
CAP = 1024 * 1024


@pytest.fixture(scope="module")
def bombs() -> dict[int, bytes]:
    return {codec: compress(codec, bytes(BOMB_BYTES)) for codec in (GZIP, SNAPPY, LZ4, ZSTD)}


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_bomb_is_refused_without_expanding(bombs: dict[int, bytes], codec: int) -> None:
    before = _max_rss_mb()
    started = time.monotonic()
    with raises_code(ErrorCode.INVALID_RECORD) as info:
        decompress(codec, bombs[codec], max_bytes=CAP)
    assert isinstance(info.value, DecompressionLimitError)
    # 256 MB would take seconds and the memory; stopping at the cap takes neither.
    assert time.monotonic() - started < 2
    assert _max_rss_mb() - before < 32


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_data_at_the_cap_decompresses(codec: int) -> None:
    data = bytes(range(256)) * (CAP // 256)
    assert decompress(codec, compress(codec, data), max_bytes=CAP) == data
    with raises_code(ErrorCode.INVALID_RECORD):
        decompress(codec, compress(codec, data + b"!"), max_bytes=CAP)


def test_cap_follows_max_message_bytes_and_record_count() -> None:
    assert decompression_cap(1000, 3) == 3000
    assert decompression_cap(1000, 10_000) == MAX_EXPANSION_FACTOR * 1000
    assert decompression_cap(1000) == MAX_EXPANSION_FACTOR * 1000
    assert decompression_cap(1000, -5) == 0


@pytest.mark.parametrize("codec", [GZIP, ZSTD])
def test_bomb_batch_is_refused_by_decode_batch_and_decode_records(codec: int) -> None:
    batch = bomb_batch(codec, 64 * 1024 * 1024, records_count=2)
    # Two records may take at most 2 x max.message.bytes.
    with raises_code(ErrorCode.INVALID_RECORD):
        decode_batch(batch, max_message_bytes=CAP)
    with raises_code(ErrorCode.INVALID_RECORD):
        decode_records(batch, max_message_bytes=CAP)


def test_legacy_wrappers_share_one_cap_when_up_converted() -> None:
    record = Record(0, 0, None, bytes(600_000), [])
    one_wrapper = build_message_set([record], 1, GZIP)
    # Each wrapper alone fits a 1 MB max.message.bytes x 2 cap; four together do not.
    four = one_wrapper * 4
    limit = 2 * CAP // MAX_EXPANSION_FACTOR
    assert len(decode_message_set(one_wrapper, max_message_bytes=limit)) == 1
    with raises_code(ErrorCode.INVALID_RECORD):
        to_v2_batches(four, max_message_bytes=limit)
