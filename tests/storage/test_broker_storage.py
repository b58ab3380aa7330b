"""Retention and compaction inside a running broker: the periodic duties, and what clients
see afterwards (ListOffsets earliest, OFFSET_OUT_OF_RANGE below the log start)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.log.cleaner import LogCleaner
from tests.server.conftest import RawClient, broker_config, free_port
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.records.record import Record, build_batch


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = broker_config(
        tmp_path / "data",
        free_port(),
        log_retention_check_interval_ms="50",
        log_cleaner_backoff_ms="50",
    )
    instance = Broker(config)
    await instance.start()
    try:
        yield instance
    finally:
        await instance.stop()


async def wait_for(condition, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def host(broker: Broker, name: str, configs: dict[str, str]):  # type: ignore[no-untyped-def]
    await broker.metadata.create_topic(name, 1, 1, configs=configs)
    await wait_for(lambda: broker.partition(name, 0) is not None)
    return broker.partition(name, 0)


def keyed(key: bytes, value: bytes | None) -> bytearray:
    return bytearray(build_batch([Record(0, 1_700_000_000_000, key, value)]))


async def test_retention_moves_the_start_clients_see_it(broker: Broker) -> None:
    partition = await host(broker, "ret", {"segment.bytes": "1000", "retention.bytes": "3000"})
    for i in range(100):
        partition.append(keyed(b"k%d" % i, b"x" * 60), log_append_time_ms=None)
    await wait_for(lambda: partition.log.log_start_offset > 0)
    start = partition.log.log_start_offset
    client = await RawClient.connect(broker.port)
    try:
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsTopic(
                    name="ret", partitions=[ListOffsetsPartition(partition_index=0, timestamp=-2)]
                )
            ],
        )
        listed = await client.call(ApiKey.LIST_OFFSETS, 5, request)
        answer = listed.topics[0].partitions[0]
        assert (answer.error_code, answer.offset) == (ErrorCode.NONE, start)
        info = broker.metadata.topic("ret")
        fetch = FetchRequest(
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            topics=[
                FetchTopic(
                    topic="ret",
                    topic_id=info.topic_id,
                    partitions=[
                        FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                    ],
                )
            ],
        )
        fetched = await client.call(ApiKey.FETCH, 12, fetch)
        part = fetched.responses[0].partitions[0]
        assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert part.log_start_offset == start
    finally:
        await client.close()


async def test_compacted_topic_is_cleaned_in_a_thread(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    build = LogCleaner.build

    def spy(self: LogCleaner, plan):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return build(self, plan)

    monkeypatch.setattr(LogCleaner, "build", spy)
    partition = await host(
        broker,
        "compacted",
        {"segment.bytes": "1000", "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"},
    )
    for r in range(10):
        for k in range(10):
            partition.append(keyed(b"k%d" % k, b"v%d" % r + b"x" * 40), log_append_time_ms=None)
    size = partition.log.size_bytes
    await wait_for(lambda: partition.log.size_bytes < size / 2)
    assert threads and all(name.startswith("log-cleaner") for name in threads)


async def test_consumer_offsets_is_compacted(broker: Broker) -> None:
    offsets_logs = [
        plog for (topic, _), plog in broker.logs.logs().items() if topic == "__consumer_offsets"
    ]
    assert offsets_logs
    assert all("compact" in plog.config.cleanup_policy for plog in offsets_logs)
    assert broker.storage is not None and broker.storage.cleaner.logs is broker.logs


def test_broker_properties_reach_retention_and_the_cleaner(tmp_path: Path) -> None:
    from kbroker.config import BrokerConfig, effective_topic_config
    from kbroker.log import LogConfig
    from kbroker.log.lifecycle import LifecycleSettings

    broker = BrokerConfig.from_properties(
        {
            "log.dirs": str(tmp_path),
            "log.retention.hours": "2",
            "log.retention.check.interval.ms": "1234",
            "log.segment.delete.delay.ms": "10",
            "log.cleaner.threads": "3",
            "log.cleaner.io.max.bytes.per.second": "1000000",
        }
    )
    config = LogConfig.from_topic_config(effective_topic_config({}, broker))
    assert (config.retention_ms, config.file_delete_delay_ms) == (2 * 3600 * 1000, 10)
    settings = LifecycleSettings.from_broker(broker.get)
    assert settings.retention_check_interval_ms == 1234
    assert (settings.cleaner.threads, settings.cleaner.io_max_bytes_per_second) == (3, 1e6)
