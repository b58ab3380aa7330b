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
