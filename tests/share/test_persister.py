"""The persister of partition leaders and group coordinators: two in-process brokers on a real
ZooKeeper, each coordinating some ``__share_group_state`` partitions, so that a call reaches
its share coordinator directly or over the inter-broker listener; errors come back as the
coordinator answered them, and a coordinator that is gone is retried within the bound."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.client import BrokerConnection
from kbroker.config import BrokerConfig
from kbroker.share.persister import SharePersisterClient
from kbroker.share.persister_api import PersisterError, SharePartitionState, StateBatch
from kbroker.share.state_records import SHARE_GROUP_STATE_TOPIC, ShareStateKey
from tests.group.conftest import free_port, zookeeper  # noqa: F401
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages import delete_share_group_state_request as delete_request

pytestmark = pytest.mark.slow

TOPIC = "events"
PARTITIONS = 8
GROUP = "share-group"


@pytest.fixture
async def brokers(tmp_path: Path, zookeeper: str) -> AsyncIterator[list[Broker]]:  # noqa: F811
    started: list[Broker] = []
    try:
        for broker_id in (1, 2):
            config = BrokerConfig.from_properties(
                {
                    "broker.id": str(broker_id),
                    "zookeeper.connect": zookeeper,
                    "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                    "log.dirs": str(tmp_path / f"broker-{broker_id}"),
                    "offsets.topic.num.partitions": "1",
                    "offsets.topic.replication.factor": "1",
                    "share.coordinator.state.topic.num.partitions": "4",
                    "share.coordinator.state.topic.replication.factor": "1",
                    "zookeeper.session.timeout.ms": "6000",
                }
            )
            broker = Broker(config)
            await broker.start()
            started.append(broker)
        await wait_for_brokers(started)
        await started[0].metadata.create_topic(TOPIC, PARTITIONS, 1)
        yield started
    finally:
        for broker in reversed(started):
            await broker.stop()


async def wait_for_brokers(brokers: list[Broker]) -> None:
    deadline = time.monotonic() + 60
    while any(len(b.metadata.brokers()) < len(brokers) for b in brokers):
        assert time.monotonic() < deadline, "the brokers did not see each other"
        await asyncio.sleep(0.1)


async def coordinators(broker: Broker, topic_id: uuid.UUID) -> dict[int, int]:
    """Partition -> the broker id coordinating (GROUP, topic, partition), the topic created."""
    out = {}
    deadline = time.monotonic() + 60
    for index in range(PARTITIONS):
        while True:
            _, info = await broker.share_coordinator.find_coordinator(
                ShareStateKey(GROUP, topic_id, index)
            )
            if info is not None:
                out[index] = info.broker_id
                break
            assert time.monotonic() < deadline, "no share coordinator"
            await asyncio.sleep(0.1)
    return out


async def test_calls_reach_local_and_remote_coordinators(brokers: list[Broker]) -> None:
    first, second = brokers
    topic = first.metadata.topic(TOPIC)
    assert topic is not None
    topic_id = topic.topic_id
    where = await coordinators(first, topic_id)
    assert set(where.values()) == {1, 2}, "both brokers coordinate some of the partitions"
    persister = first.share_persister
    everything = [(topic_id, p) for p in range(PARTITIONS)]
    # A broker asked for a key it does not coordinate says so.
    remote = next(p for p, broker_id in where.items() if broker_id == 2)
    request = delete_request.DeleteShareGroupStateRequest(
        group_id=GROUP,
        topics=[
            delete_request.DeleteStateData(
                topic_id=topic_id, partitions=[delete_request.PartitionData(partition=remote)]
            )
        ],
    )
    connection = await BrokerConnection.open(("127.0.0.1", first.port), "share-tests", 30)
    try:
        response, _ = await connection.request(ApiKey.DELETE_SHARE_GROUP_STATE, request)
    finally:
        await connection.close()
    assert response.results[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    # One request per coordinator; each partition answered, the remote ones too.
    initialized = await persister.initialize(
        GROUP, [(topic_id, p, 1, 10 * p) for p in range(PARTITIONS)]
    )
    assert initialized == dict.fromkeys(everything, ErrorCode.NONE)
    for p in range(PARTITIONS):
        state = SharePartitionState(
            state_epoch=1,
            start_offset=10 * p,
            batches=(
                StateBatch(10 * p, 10 * p + 4, 2, 1),
                StateBatch(10 * p + 5, 10 * p + 9, 0, 2),
            ),
            leader_epoch=3,
            delivery_complete_count=5,
        )
        await persister.write(GROUP, topic_id, p, state)
    # The other broker's persister reads the same state: through the coordinators.
    for p in range(PARTITIONS):
        read = await second.share_persister.read(GROUP, topic_id, p, 3)
        assert read == SharePartitionState(
            1,
            10 * p,
            (StateBatch(10 * p, 10 * p + 4, 2, 1), StateBatch(10 * p + 5, 10 * p + 9, 0, 2)),
        )
    summaries = await second.share_persister.read_summary(GROUP, everything)
    assert summaries == {
        (topic_id, p): SharePartitionState(1, 10 * p, (), 3, 5) for p in range(PARTITIONS)
    }
    # The coordinators' own errors come back as they are, remote or local.
    for p in range(PARTITIONS):
        with pytest.raises(PersisterError) as fenced:
            await persister.write(
                GROUP, topic_id, p, SharePartitionState(0, 10 * p, (), leader_epoch=3)
            )
        assert fenced.value.code == ErrorCode.FENCED_STATE_EPOCH
        with pytest.raises(PersisterError) as stale:
            await persister.read(GROUP, topic_id, p, 2)
        assert stale.value.code == ErrorCode.FENCED_LEADER_EPOCH
    unknown = uuid.uuid4()
    assert await persister.initialize(GROUP, [(unknown, 0, 1, 0)]) == {
        (unknown, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    }
    assert await persister.delete(GROUP, everything) == dict.fromkeys(everything, ErrorCode.NONE)
    for p in range(PARTITIONS):
        with pytest.raises(PersisterError) as gone:
            await second.share_persister.read(GROUP, topic_id, p, 3)
        assert gone.value.code == ErrorCode.INVALID_REQUEST


async def test_a_coordinator_that_is_gone_is_retried_within_the_bound(
    brokers: list[Broker],
) -> None:
    first, second = brokers
    topic = first.metadata.topic(TOPIC)
    assert topic is not None
    where = await coordinators(first, topic.topic_id)
    remote = [p for p, broker_id in where.items() if broker_id == 2]
    local = [p for p, broker_id in where.items() if broker_id == 1]
    await second.stop()
    persister = SharePersisterClient(first, attempts=3, backoff_ms=100, max_backoff_ms=200)
    try:
        started = time.monotonic()
        answers = await persister.initialize(
            GROUP, [(topic.topic_id, p, 0, 0) for p in range(PARTITIONS)]
        )
        took = time.monotonic() - started
    finally:
        await persister.close()
    assert {p: answers[(topic.topic_id, p)] for p in local} == dict.fromkeys(local, ErrorCode.NONE)
    assert {answers[(topic.topic_id, p)] for p in remote} <= {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
    # Three attempts, with 100 and 200 ms (+-20 %) between them.
    assert 0.2 < took < 30
    assert first.metadata.topic(SHARE_GROUP_STATE_TOPIC) is not None
