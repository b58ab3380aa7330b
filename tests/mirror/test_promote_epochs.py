"""Promote raises a mirror partition's leader epoch above its source's (kbroker/mirror/
manager.py): the local leader led at epoch 0 (the embedded metadata's) while the copied
batches carry the source's epoch 5; after promote, local batches carry an epoch above 5, and
the epoch history keeps the source's."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_data_path import produce, records
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from wire.records.batch import read_header
from wire.records.record import build_batch

DEADLINE_SECONDS = 60.0
SOURCE_EPOCH = 5
# The batch header's partitionLeaderEpoch: after baseOffset and batchLength, outside the CRC.
EPOCH_FIELD = slice(12, 16)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    broker = Broker(broker_config(tmp_path / "data", free_port()))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


def source_batch(start: int, count: int) -> bytes:
    batch = bytearray(build_batch(records(start, count), base_offset=start))
    batch[EPOCH_FIELD] = struct.pack(">i", SOURCE_EPOCH)
    return bytes(batch)


async def test_promote_raises_the_leader_epoch_above_the_source_s(broker: Broker) -> None:
    # Nothing listens at the source: the fetchers only back off; the test copies itself.
    configs = {"kbroker.mirror.source.bootstrap": "127.0.0.1:1"}
    await broker.metadata.create_topic("m", 1, 1, configs=configs)
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (partition := broker.partitions.get(("m", 0))) is None or not partition.is_leader:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    assert partition.leader_epoch == 0
    partition.append_mirrored(source_batch(0, 3))
    assert partition.log.epochs.entries() == [(SOURCE_EPOCH, 0)]

    client = await RawClient.connect(broker.port)
    try:
        request = IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=2,
                    resource_name="m",
                    configs=[
                        AlterableConfig(
                            name="kbroker.mirror.state", config_operation=0, value="promoted"
                        )
                    ],
                )
            ]
        )
        altered = await client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
        assert altered.responses[0].error_code == ErrorCode.NONE
        # Until the epoch is raised Produce is answered NOT_LEADER_OR_FOLLOWER (retriable).
        while True:
            response = await produce(client, "m", build_batch(records(0, 2)))
            code = response.responses[0].partition_responses[0].error_code
            if code == ErrorCode.NONE:
                break
            assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    finally:
        await client.close()
    info = broker.metadata.topic("m")
    assert info is not None and info.partitions[0].leader_epoch == SOURCE_EPOCH + 1
    assert partition.log.epochs.entries() == [(SOURCE_EPOCH, 0), (SOURCE_EPOCH + 1, 3)]
    found = partition.log.read_with_end(3, 1 << 20, max_offset=5, min_one_batch=True)
    assert found is not None
    assert read_header(found[0].read()).partition_leader_epoch == SOURCE_EPOCH + 1
