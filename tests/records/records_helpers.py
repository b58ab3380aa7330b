"""Helpers shared by the record format tests."""

import contextlib
import struct
from collections.abc import Iterator

import pytest

from wire.errors import ErrorCode, KafkaError
from wire.records.batch import CRC_OFFSET, compute_crc


def refresh_crc(batch: bytearray, pos: int = 0) -> bytearray:
    """Recompute the CRC of the batch at `pos` after a test edited its covered bytes."""
    (length,) = struct.unpack_from(">i", batch, pos + 8)
    struct.pack_into(">I", batch, pos + CRC_OFFSET, compute_crc(batch, pos, length + 12))
    return batch


def patch(batch: bytes, offset: int, fmt: str, value: int) -> bytearray:
    """A copy of `batch` with the field at `offset` rewritten and its CRC made valid."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, offset, value)
    return refresh_crc(out)


@contextlib.contextmanager
def raises_code(code: ErrorCode) -> Iterator[pytest.ExceptionInfo[KafkaError]]:
    """Like pytest.raises(KafkaError), also checking the error code."""
    with pytest.raises(KafkaError) as info:
        yield info
    assert info.value.code == code, info.value


def bomb_batch(codec: int, expanded_bytes: int, records_count: int = 1) -> bytes:
    """A v2 batch whose records section is `expanded_bytes` zero bytes compressed with
    `codec` (a compression bomb), with a valid CRC, claiming `records_count` records."""
    from wire.records.batch import BATCH_HEADER_SIZE
    from wire.records.compression import compress
    from wire.records.record import Record, build_batch

    template = build_batch([Record(0, 0, b"k", b"v", [])])
    out = bytearray(template[:BATCH_HEADER_SIZE]) + compress(codec, bytes(expanded_bytes))
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">i", out, 57, records_count)
    return bytes(refresh_crc(out))
