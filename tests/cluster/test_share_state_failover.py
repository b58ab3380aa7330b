"""Share-partition state survives its share coordinator's kill -9 and a kill -9 of every broker.

The share coordinator answers a WriteShareGroupState only once the whole ISR of its
__share_group_state partition has the record (acks=all), so the follower elected after the
kill loads every write, the leader epoch that fences older partition leaders included. The
requests are the ones partition leaders send (kbroker/share/persister.py), sent by the test
to whichever broker FindCoordinator (key type 2) names.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from helpers import call, create_topic, full_isr, partition_view, wait_for
from local_cluster import LocalCluster

from controller.zk_paths import kafka_uuid
from kbroker.group.offsets_store import partition_for
from kbroker.share.state_records import SHARE_GROUP_STATE_TOPIC
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages import initialize_share_group_state_request as initialize_request
from wire.messages import read_share_group_state_request as read_request
from wire.messages import write_share_group_state_request as write_request
from wire.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from wire.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic

pytestmark = pytest.mark.slow

TOPIC = "share-durable"
GROUP = "share-durable-group"
WRITES = 40
ACKNOWLEDGED, AVAILABLE = 2, 0
RETRIABLE = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


def _running(cluster: LocalCluster) -> list[int]:
    return [i for i, b in cluster.brokers.items() if b.running()]


def _topic_id(cluster: LocalCluster) -> uuid.UUID:
    request = MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])
    response = asyncio.run(call(cluster, ApiKey.METADATA, request, _running(cluster)[0]))
    return response.topics[0].topic_id


def _coordinator(cluster: LocalCluster, key: str, not_on: int | None = None) -> int | None:
    request = FindCoordinatorRequest(key_type=2, coordinator_keys=[key])
    try:
        response = asyncio.run(
            call(cluster, ApiKey.FIND_COORDINATOR, request, _running(cluster)[0])
        )
    except (OSError, TimeoutError, ConnectionError):
        return None
    found = response.coordinators[0]
    if found.error_code != ErrorCode.NONE or found.node_id in (-1, not_on):
        return None
    return found.node_id


def _ask(cluster: LocalCluster, broker_id: int, api_key: int, request: Any) -> Any:
    response = asyncio.run(call(cluster, api_key, request, broker_id))
    (partition,) = response.results[0].partitions
    return partition


def _read(topic_id: uuid.UUID, leader_epoch: int) -> read_request.ReadShareGroupStateRequest:
    return read_request.ReadShareGroupStateRequest(
        group_id=GROUP,
        topics=[
            read_request.ReadStateData(
                topic_id=topic_id,
                partitions=[read_request.PartitionData(partition=0, leader_epoch=leader_epoch)],
            )
        ],
    )


def _write(topic_id: uuid.UUID, i: int) -> write_request.WriteShareGroupStateRequest:
    """The i-th write of a leader at epoch 1: offsets 10i..10i+9 acknowledged, the next three
    delivered once and released, the start offset at 10i."""
    return write_request.WriteShareGroupStateRequest(
        group_id=GROUP,
        topics=[
            write_request.WriteStateData(
                topic_id=topic_id,
                partitions=[
                    write_request.PartitionData(
                        partition=0,
                        state_epoch=1,
                        leader_epoch=1,
                        start_offset=10 * i,
                        delivery_complete_count=10,
                        state_batches=[
                            write_request.StateBatch(
                                first_offset=10 * i,
                                last_offset=10 * i + 9,
                                delivery_state=ACKNOWLEDGED,
                                delivery_count=1,
                            ),
                            write_request.StateBatch(
                                first_offset=10 * i + 10,
                                last_offset=10 * i + 12,
                                delivery_state=AVAILABLE,
                                delivery_count=1,
                            ),
                        ],
                    )
                ],
            )
        ],
    )


def _state(answer: Any) -> tuple[int, int, list[tuple[int, int, int, int]]] | None:
    """(state epoch, start offset, batches), None while the coordinator is not ready."""
    if answer.error_code in RETRIABLE:
        return None
    assert answer.error_code == ErrorCode.NONE, answer
    batches = [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in answer.state_batches
    ]
    return answer.state_epoch, answer.start_offset, batches


EXPECTED = (
    1,
    10 * (WRITES - 1),
    [
        (10 * (WRITES - 1), 10 * (WRITES - 1) + 9, ACKNOWLEDGED, 1),
        (10 * WRITES, 10 * WRITES + 2, AVAILABLE, 1),
    ],
)


def _read_state(cluster: LocalCluster, key: str, topic_id: uuid.UUID, not_on: int | None) -> Any:
    """The state read at leader epoch 2 from the key's coordinator, once it answers."""

    def attempt() -> Any:
        coordinator = _coordinator(cluster, key, not_on)
        if coordinator is None:
            return None
        try:
            return _state(
                _ask(cluster, coordinator, ApiKey.READ_SHARE_GROUP_STATE, _read(topic_id, 2))
            )
        except (OSError, TimeoutError, ConnectionError):
            return None

    return wait_for(attempt, 90, "the share state from a coordinator")


def test_share_state_survives_the_coordinators_kill_and_a_cluster_kill(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, TOPIC)
    topic_id = _topic_id(cluster)
    key = f"{GROUP}:{kafka_uuid(topic_id)}:0"
    index = partition_for(key, 3)
    # The first look-up creates __share_group_state.
    wait_for(lambda: _coordinator(cluster, key), 60, "a share coordinator")
    view = wait_for(lambda: full_isr(cluster, SHARE_GROUP_STATE_TOPIC, index), 90, "a full ISR")
    coordinator = view.leader
    assert _coordinator(cluster, key) == coordinator

    initialize = initialize_request.InitializeShareGroupStateRequest(
        group_id=GROUP,
        topics=[
            initialize_request.InitializeStateData(
                topic_id=topic_id,
                partitions=[
                    initialize_request.PartitionData(partition=0, state_epoch=1, start_offset=0)
                ],
            )
        ],
    )
    answer = _ask(cluster, coordinator, ApiKey.INITIALIZE_SHARE_GROUP_STATE, initialize)
    assert answer.error_code == ErrorCode.NONE
    assert _state(_ask(cluster, coordinator, ApiKey.READ_SHARE_GROUP_STATE, _read(topic_id, 1)))

    async def write_then_kill() -> float:
        for i in range(WRITES):
            response = await call(
                cluster, ApiKey.WRITE_SHARE_GROUP_STATE, _write(topic_id, i), coordinator
            )
            assert response.results[0].partitions[0].error_code == ErrorCode.NONE
        cluster.brokers[coordinator].kill()  # kill -9 as soon as the last write is answered
        return time.monotonic()

    killed_at = asyncio.run(write_then_kill())
    try:
        wait_for(
            lambda: (
                (v := partition_view(cluster, SHARE_GROUP_STATE_TOPIC, index)) is not None
                and v.leader not in (-1, coordinator)
            ),
            60,
            "a new share coordinator",
        )
        assert _read_state(cluster, key, topic_id, coordinator) == EXPECTED
        print(f"state read back {time.monotonic() - killed_at:.1f} s after the kill")
        # The old leader's epoch is still fenced; the new one (2) was stored by the read.
        new = _coordinator(cluster, key)
        assert new not in (None, coordinator)
        stale = _ask(cluster, new, ApiKey.READ_SHARE_GROUP_STATE, _read(topic_id, 1))
        assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH
    finally:
        cluster.brokers[coordinator].start(timeout=60)
        wait_for(lambda: full_isr(cluster, SHARE_GROUP_STATE_TOPIC, index), 90, "the ISR to heal")

    # kill -9 every broker, start them again: nothing is lost.
    for broker in cluster.brokers.values():
        broker.kill()
    for broker in cluster.brokers.values():
        broker.start(timeout=60)
    cluster.wait_registered()
    assert _read_state(cluster, key, topic_id, None) == EXPECTED


LAG_TOPIC = "share-lag"
LAG_GROUP = "share-lag-group"
LAG_RECORDS = 5


def _group_coordinator(cluster: LocalCluster, group: str) -> int | None:
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
    response = asyncio.run(call(cluster, ApiKey.FIND_COORDINATOR, request, _running(cluster)[0]))
    found = response.coordinators[0]
    return found.node_id if found.error_code == ErrorCode.NONE else None


def _share_lags(cluster: LocalCluster, coordinator: int) -> list[tuple[int, int, int]] | None:
    request = DescribeShareGroupOffsetsRequest(
        groups=[DescribeShareGroupOffsetsRequestGroup(group_id=LAG_GROUP, topics=None)]
    )
    response = asyncio.run(call(cluster, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request, coordinator))
    (group,) = response.groups
    if group.error_code != ErrorCode.NONE or not group.topics:
        return None
    return sorted(
        (p.partition_index, p.start_offset, p.lag) for t in group.topics for p in t.partitions
    )


def test_share_group_lag_of_partitions_led_by_other_brokers(cluster: LocalCluster) -> None:
    """KIP-1226's lag is told for every partition of a share group, the ones whose leader is
    not the group's coordinator included (asked of their leaders with ListOffsets)."""
    create_topic(cluster, LAG_TOPIC, partitions=3)
    views = [wait_for(lambda p=p: full_isr(cluster, LAG_TOPIC, p), 60, "ISR") for p in range(3)]
    leaders = {view.leader for view in views}
    coordinator = wait_for(lambda: _group_coordinator(cluster, LAG_GROUP), 60, "coordinator")
    assert leaders - {coordinator}, "every partition is led by the group's coordinator"
    alter = AlterShareGroupOffsetsRequest(
        group_id=LAG_GROUP,
        topics=[
            AlterShareGroupOffsetsRequestTopic(
                topic_name=LAG_TOPIC,
                partitions=[
                    AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=0)
                    for p in range(3)
                ],
            )
        ],
    )
    altered = asyncio.run(call(cluster, ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter, coordinator))
    assert altered.error_code == ErrorCode.NONE
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for p in range(3):
        for i in range(LAG_RECORDS):
            producer.produce(LAG_TOPIC, value=f"v{i}".encode(), partition=p)
    assert producer.flush(60) == 0
    expected = [(p, 0, LAG_RECORDS) for p in range(3)]
    wait_for(
        lambda: _share_lags(cluster, coordinator) == expected or None,
        60,
        f"lags {expected} (last {_share_lags(cluster, coordinator)})",
    )
