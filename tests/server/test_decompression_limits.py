"""Compression bombs against a running broker: legacy up-conversion and down-conversion
refuse them with INVALID_RECORD, and the broker keeps serving (issue 13, item 2)."""

from __future__ import annotations

import resource
import struct
import zlib

from kbroker.broker import Broker
from tests.records.records_helpers import bomb_batch
from tests.server.conftest import RawClient
from tests.server.test_connection import assert_serving
from tests.server.test_data_path import create_topic, fetch, produce
from wire.errors import ErrorCode
from wire.records.compression import GZIP, compress

BOMB_BYTES = 1 << 30


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def test_legacy_gzip_bomb_is_refused_on_up_conversion(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "legacy-bomb")
    data = _gzip_wrapper(compress(GZIP, bytes(BOMB_BYTES)))
    before = _max_rss_mb()
    response = await produce(client, "legacy-bomb", data, version=2)
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.INVALID_RECORD
    assert _max_rss_mb() - before < 100
    await assert_serving(broker)


def _gzip_wrapper(compressed: bytes) -> bytes:
    """A magic 1 gzip wrapper message (offset 0) around `compressed`, CRC included."""
    body = struct.pack(">bbq", 1, GZIP, 0) + struct.pack(">i", -1)
    body += struct.pack(">i", len(compressed)) + compressed
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


async def test_stored_bomb_is_refused_on_down_conversion(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "stored-bomb")
    response = await produce(client, "stored-bomb", bomb_batch(GZIP, BOMB_BYTES // 4))
    # Produce v3+ stores batches as they came: the broker never decompresses them.
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    before = _max_rss_mb()
    old = await fetch(client, broker, "stored-bomb", 0, version=3)
    assert old.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD
    assert _max_rss_mb() - before < 100
    new = await fetch(client, broker, "stored-bomb", 0)
    assert new.responses[0].partitions[0].error_code == ErrorCode.NONE
    await assert_serving(broker)
