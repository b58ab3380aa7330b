"""The share coordinator of an in-process broker: the five share-state APIs and FindCoordinator
through the wire, answered as Kafka 4.3 answered the same requests on its broker listener
(share.coordinator.snapshot.update.records.per.snapshot=3); ``__share_group_state`` as
Kafka creates it; its state after a restart; Kafka 4.3's kafka-dump-log.sh on its segments;
pruning, cold snapshots, deleted topics and authorization."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.kafka43_tools import Kafka43Tools
from compat_tests.kafka_process import kafka43_available
from compat_tests.support import require
from controller.zk_paths import kafka_uuid
from kbroker.broker import Broker
from kbroker.client import BrokerConnection
from kbroker.config import BrokerConfig
from kbroker.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from kbroker.share.persister import SharePersisterClient
from kbroker.share.persister_api import PersisterError, SharePartitionState, StateBatch
from kbroker.share.state_records import SHARE_GROUP_STATE_TOPIC, ShareStateKey
from tests.group.conftest import free_port
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages import delete_share_group_state_request as delete_request
from wire.messages import initialize_share_group_state_request as initialize_request
from wire.messages import read_share_group_state_request as read_request
from wire.messages import read_share_group_state_summary_request as summary_request
from wire.messages import write_share_group_state_request as write_request
from wire.messages.find_coordinator_request import FindCoordinatorRequest

TOPIC = "t1"
SHARE_PROPERTIES = {
    "share.coordinator.state.topic.num.partitions": "3",
    "share.coordinator.snapshot.update.records.per.snapshot": "3",
}


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Any]:
    """Start a broker on ``tmp_path/data`` (a second call restarts on the same directory)."""
    started: list[Broker] = []

    async def start_one(**overrides: str) -> Broker:
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
            "log.dirs": str(tmp_path / "data"),
            "offsets.topic.num.partitions": "1",
            **SHARE_PROPERTIES,
            **overrides,
        }
        broker = Broker(BrokerConfig.from_properties(props))
        await broker.start()
        await broker.share_coordinator.wait_loaded()
        started.append(broker)
        return broker

    yield start_one
    for broker in started:
        await broker.stop()


class Wire:
    """The share-state requests of Kafka's persister, sent to one broker."""

    def __init__(self, connection: BrokerConnection, topic_id: uuid.UUID) -> None:
        self.connection = connection
        self.topic_id = topic_id

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        (partition,) = (await self.connection.call(api_key, version, body)).results[0].partitions
        return partition

    async def initialize(self, group: str, state_epoch: int, start: int, partition: int = 0) -> Any:
        return await self.call(
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            0,
            initialize_request.InitializeShareGroupStateRequest(
                group_id=group,
                topics=[
                    initialize_request.InitializeStateData(
                        topic_id=self.topic_id,
                        partitions=[
                            initialize_request.PartitionData(
                                partition=partition, state_epoch=state_epoch, start_offset=start
                            )
                        ],
                    )
                ],
            ),
        )

    async def read(self, group: str, leader_epoch: int) -> Any:
        return await self.call(
            ApiKey.READ_SHARE_GROUP_STATE,
            0,
            read_request.ReadShareGroupStateRequest(
                group_id=group,
                topics=[
                    read_request.ReadStateData(
                        topic_id=self.topic_id,
                        partitions=[
                            read_request.PartitionData(partition=0, leader_epoch=leader_epoch)
                        ],
                    )
                ],
            ),
        )

    async def write(
        self,
        group: str,
        state_epoch: int,
        leader_epoch: int,
        start: int,
        batches: list[tuple[int, int, int, int]],
        delivery_complete_count: int = -1,
        version: int = 1,
    ) -> Any:
        return await self.call(
            ApiKey.WRITE_SHARE_GROUP_STATE,
            version,
            write_request.WriteShareGroupStateRequest(
                group_id=group,
                topics=[
                    write_request.WriteStateData(
                        topic_id=self.topic_id,
                        partitions=[
                            write_request.PartitionData(
                                partition=0,
                                state_epoch=state_epoch,
                                leader_epoch=leader_epoch,
                                start_offset=start,
                                delivery_complete_count=delivery_complete_count,
                                state_batches=[
                                    write_request.StateBatch(
                                        first_offset=f,
                                        last_offset=la,
                                        delivery_state=s,
                                        delivery_count=c,
                                    )
                                    for f, la, s, c in batches
                                ],
                            )
                        ],
                    )
                ],
            ),
        )

    async def delete(self, group: str) -> Any:
        return await self.call(
            ApiKey.DELETE_SHARE_GROUP_STATE,
            0,
            delete_request.DeleteShareGroupStateRequest(
                group_id=group,
                topics=[
                    delete_request.DeleteStateData(
                        topic_id=self.topic_id,
                        partitions=[delete_request.PartitionData(partition=0)],
                    )
                ],
            ),
        )

    async def summary(self, group: str, version: int = 1) -> Any:
        return await self.call(
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
            version,
            summary_request.ReadShareGroupStateSummaryRequest(
                group_id=group,
                topics=[
                    summary_request.ReadStateSummaryData(
                        topic_id=self.topic_id,
                        partitions=[summary_request.PartitionData(partition=0, leader_epoch=-1)],
                    )
                ],
            ),
        )


async def connect(broker: Broker, *, find: bool = True) -> Wire:
    """A connection to ``broker`` and the topic's id; ``find``: look a coordinator up first,
    as Kafka's persister does (which creates ``__share_group_state``), and wait for its load."""
    topic = broker.metadata.topic(TOPIC) or await broker.metadata.create_topic(TOPIC, 1, 1)
    connection = await BrokerConnection.open(("127.0.0.1", broker.port), "share-tests", 30)
    if find:
        await broker.share_coordinator.find_coordinator(ShareStateKey("g", topic.topic_id, 0))
        await broker.share_coordinator.wait_loaded()
    return Wire(connection, topic.topic_id)


def state(answer: Any) -> tuple[Any, ...]:
    return (
        ErrorCode(answer.error_code).name,
        answer.state_epoch,
        answer.start_offset,
        [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in answer.state_batches
        ],
    )


def summary(answer: Any) -> tuple[Any, ...]:
    return (
        ErrorCode(answer.error_code).name,
        answer.state_epoch,
        answer.leader_epoch,
        answer.start_offset,
        answer.delivery_complete_count,
    )


def error(answer: Any) -> tuple[str, str | None]:
    return ErrorCode(answer.error_code).name, answer.error_message


FENCED_LEADER = (
    "FENCED_LEADER_EPOCH",
    "The leader epoch in the request is older than the epoch on the broker.",
)
FENCED_STATE = (
    "FENCED_STATE_EPOCH",
    "The share coordinator rejected the request because the share-group state epoch did not match.",
)
OK = ("NONE", None)


async def kafka_scenario(wire: Wire, group: str = "g4") -> None:
    """Requests sent to Kafka 4.3, with its answers."""
    assert error(await wire.initialize(group, 1, -1)) == OK
    assert summary(await wire.summary(group)) == ("NONE", 1, 0, -1, -1)
    assert state(await wire.read(group, 2)) == ("NONE", 1, -1, [])
    assert error(await wire.read(group, 1)) == FENCED_LEADER
    assert error(await wire.write(group, -1, -1, -1, [(0, 4, 2, 1)], 7)) == OK
    assert error(await wire.write(group, 1, 2, 3, [(0, 4, 2, 1), (5, 5, 4, 3)], 2)) == OK
    assert error(await wire.write(group, 1, 2, -1, [(6, 8, 0, 1)], version=0)) == OK
    assert state(await wire.read(group, 5)) == (
        "NONE",
        1,
        3,
        [(3, 4, 2, 1), (5, 5, 4, 3), (6, 8, 0, 1)],
    )
    assert summary(await wire.summary(group)) == ("NONE", 1, 5, 3, -1)
    assert error(await wire.write(group, 1, 5, 2, [], 2)) == OK
    assert state(await wire.read(group, 5))[:3] == ("NONE", 1, 2)
    assert error(await wire.initialize(group, 2, 4)) == OK
    assert error(await wire.write(group, 2, 5, -1, [(1, 10, 2, 1)], 2)) == OK
    assert state(await wire.read(group, 5)) == ("NONE", 2, 4, [(4, 10, 2, 1)])
    assert summary(await wire.summary(group)) == ("NONE", 2, 0, 4, 2)


# What kafka-dump-log.sh --share-group-state-decoder printed for the scenario's records on
# Kafka 4.3 (topic id and timestamps left out).
KAFKA_RECORDS = [
    '{"type":"0"} {"snapshotEpoch":0,"stateEpoch":1,"leaderEpoch":0,"startOffset":-1,'
    '"stateBatches":[]}',
    '{"type":"1"} {"snapshotEpoch":0,"leaderEpoch":2,"startOffset":-1,"stateBatches":[]}',
    '{"type":"1"} {"snapshotEpoch":0,"leaderEpoch":2,"startOffset":-1,"deliveryCompleteCount":7,'
    '"stateBatches":[{"firstOffset":0,"lastOffset":4,"deliveryState":2,"deliveryCount":1}]}',
    '{"type":"1"} {"snapshotEpoch":0,"leaderEpoch":2,"startOffset":3,"deliveryCompleteCount":2,'
    '"stateBatches":[{"firstOffset":3,"lastOffset":4,"deliveryState":2,"deliveryCount":1},'
    '{"firstOffset":5,"lastOffset":5,"deliveryState":4,"deliveryCount":3}]}',
    '{"type":"0"} {"snapshotEpoch":1,"stateEpoch":1,"leaderEpoch":2,"startOffset":3,'
    '"stateBatches":[{"firstOffset":3,"lastOffset":4,"deliveryState":2,"deliveryCount":1},'
    '{"firstOffset":5,"lastOffset":5,"deliveryState":4,"deliveryCount":3},'
    '{"firstOffset":6,"lastOffset":8,"deliveryState":0,"deliveryCount":1}]}',
    '{"type":"1"} {"snapshotEpoch":1,"leaderEpoch":5,"startOffset":3,"stateBatches":[]}',
    '{"type":"1"} {"snapshotEpoch":1,"leaderEpoch":5,"startOffset":2,"deliveryCompleteCount":2,'
    '"stateBatches":[]}',
    '{"type":"0"} {"snapshotEpoch":2,"stateEpoch":2,"leaderEpoch":0,"startOffset":4,'
    '"deliveryCompleteCount":0,"stateBatches":[]}',
    '{"type":"1"} {"snapshotEpoch":2,"leaderEpoch":0,"startOffset":-1,"deliveryCompleteCount":2,'
    '"stateBatches":[{"firstOffset":1,"lastOffset":10,"deliveryState":2,"deliveryCount":1}]}',
]


async def test_the_share_state_apis_answer_as_kafka(start: Any) -> None:
    broker = await start()
    wire = await connect(broker)
    await kafka_scenario(wire)
    # Keys without state, topics and partitions the cluster does not have, empty requests.
    assert state(await wire.read("nope", 0)) == ("INVALID_REQUEST", 0, 0, [])
    assert (await wire.read("nope", 0)).error_message == (
        "Read operation on uninitialized share partition not allowed."
    )
    assert error(await wire.write("nope", 0, 0, 0, [])) == (
        "INVALID_REQUEST",
        "Write operation on uninitialized share partition not allowed.",
    )
    assert summary(await wire.summary("nope")) == ("NONE", 0, 0, -1, -1)
    assert error(await wire.initialize("g4", 2, 0, partition=7)) == (
        "UNKNOWN_TOPIC_OR_PARTITION",
        "This server does not host this topic-partition.",
    )
    assert error(await wire.initialize("g4", 1, 0)) == FENCED_STATE
    assert error(await wire.initialize("g4", 2, 0, partition=-1)) == (
        "INVALID_REQUEST",
        "The partition id cannot be a negative number.",
    )
    assert error(await wire.delete("g4")) == OK
    assert error(await wire.delete("g4")) == OK
    assert state(await wire.read("g4", 5))[0] == "INVALID_REQUEST"
    for group, topics in (("", [write_request.WriteStateData(topic_id=wire.topic_id)]), ("g", [])):
        empty = await wire.connection.call(
            ApiKey.WRITE_SHARE_GROUP_STATE,
            1,
            write_request.WriteShareGroupStateRequest(group_id=group, topics=topics),
        )
        assert empty.results == []


async def test_find_coordinator_and_api_versions(start: Any) -> None:
    broker = await start()
    wire = await connect(broker, find=False)
    versions = wire.connection.versions
    assert {key: versions.get(key) for key in range(83, 88)} == {
        83: (0, 0),
        84: (0, 0),
        85: (0, 1),
        86: (0, 0),
        87: (0, 1),
    }
    assert broker.metadata.topic(SHARE_GROUP_STATE_TOPIC) is None
    b64 = kafka_uuid(wire.topic_id)
    keys = [f"s1:{b64}:0", "abc", f"g:{b64}:x", f":{b64}:0", "g:notauuid:0", f"a:b:{b64}:0"]
    answer = await wire.connection.call(
        ApiKey.FIND_COORDINATOR, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=keys)
    )
    assert [(c.node_id, ErrorCode(c.error_code).name) for c in answer.coordinators] == [
        (0, "NONE"),
        (-1, "INVALID_REQUEST"),
        (-1, "INVALID_REQUEST"),
        (-1, "INVALID_REQUEST"),
        (-1, "INVALID_REQUEST"),
        (0, "NONE"),
    ]
    assert answer.coordinators[0].port == broker.port
    # Share keys came with FindCoordinator v6.
    older = await wire.connection.call(
        ApiKey.FIND_COORDINATOR, 5, FindCoordinatorRequest(key_type=2, coordinator_keys=keys[:1])
    )
    assert older.coordinators[0].error_code == ErrorCode.INVALID_REQUEST
    # The first look-up created the topic as Kafka does (one embedded broker: factor 1).
    topic = broker.metadata.topic(SHARE_GROUP_STATE_TOPIC)
    assert topic is not None
    assert (len(topic.partitions), topic.internal) == (3, True)
    assert {len(p.replicas) for p in topic.partitions} == {1}
    assert {
        k: v
        for k, v in topic.configs.items()
        if k in ("cleanup.policy", "retention.ms", "min.insync.replicas", "segment.bytes")
    } == {
        "cleanup.policy": "delete",
        "retention.ms": "-1",
        "min.insync.replicas": "1",
        "segment.bytes": "104857600",
    }


async def test_the_state_survives_a_restart(start: Any) -> None:
    broker = await start()
    wire = await connect(broker)
    await kafka_scenario(wire)
    await wire.connection.close()
    await broker.stop()
    broker = await start()
    wire = await connect(broker)
    assert state(await wire.read("g4", 5)) == ("NONE", 2, 4, [(4, 10, 2, 1)])
    assert summary(await wire.summary("g4")) == ("NONE", 2, 0, 4, 2)
    # The fences were loaded too.
    assert error(await wire.read("g4", 4)) == FENCED_LEADER
    assert error(await wire.write("g4", 1, 5, -1, [])) == FENCED_STATE


def _decoded_records(dump: str) -> list[str]:
    out = []
    for line in dump.splitlines():
        match = re.search(
            r'key: (\{"type":"\d"),.* payload: \{"version":"0","data":(\{.*\})\}$', line
        )
        if match:
            payload = re.sub(r',"(create|write)Timestamp":\d+', "", match.group(2))
            out.append(f"{match.group(1)}}} {payload}")
    return out


@pytest.mark.slow
async def test_kafka_dump_tool_decodes_kbroker_segments(start: Any, tmp_path: Path) -> None:
    require(kafka43_available(), "Apache Kafka 4.3 is missing from ../shared/kafka-4.3")
    broker = await start()
    wire = await connect(broker)
    await kafka_scenario(wire)
    key = ShareStateKey("g4", wire.topic_id, 0)
    segment = (
        tmp_path
        / "data"
        / f"{SHARE_GROUP_STATE_TOPIC}-{broker.share_coordinator.partition_of(key)}"
        / "00000000000000000000.log"
    )
    tools = Kafka43Tools("", tmp_path)
    run = await asyncio.to_thread(
        tools.run_raw, "kafka-dump-log", "--share-group-state-decoder", "--files", str(segment)
    )
    assert run.returncode == 0, run.report()
    assert _decoded_records(run.stdout) == KAFKA_RECORDS, run.report()


async def test_a_topic_deleted_takes_its_share_state_along(start: Any) -> None:
    broker = await start()
    wire = await connect(broker)
    assert error(await wire.initialize("g", 0, 0)) == OK
    key = ShareStateKey("g", wire.topic_id, 0)
    shard = broker.share_coordinator._shards[broker.share_coordinator.partition_of(key)]
    await broker.metadata.delete_topic(TOPIC)
    deadline = time.monotonic() + 30
    while shard.state(key) is not None:
        assert time.monotonic() < deadline, "no tombstone for the deleted topic's state"
        await asyncio.sleep(0.05)


async def test_records_no_key_needs_are_deleted(start: Any) -> None:
    broker = await start(
        **{
            "share.coordinator.snapshot.update.records.per.snapshot": "2",
            "share.coordinator.state.topic.prune.interval.ms": "100",
            "share.coordinator.cold.partition.snapshot.interval.ms": "100",
        }
    )
    wire = await connect(broker)
    groups = ["g1", "g2"]
    for group in groups:
        assert error(await wire.initialize(group, 0, 0)) == OK
    for offset in range(6):  # g1: three updates then a snapshot, twice over
        assert error(await wire.write("g1", 0, 0, offset, [(offset, offset, 2, 1)])) == OK
    coordinator = broker.share_coordinator
    indexes = {coordinator.partition_of(ShareStateKey(g, wire.topic_id, 0)) for g in groups}
    partitions = [broker.partition(SHARE_GROUP_STATE_TOPIC, i) for i in indexes]
    deadline = time.monotonic() + 30
    # g2 is never written again: cold snapshots move it along, and with it what is kept.
    while any(p is None or p.log.log_start_offset == 0 for p in partitions):
        assert time.monotonic() < deadline, "nothing was pruned"
        await asyncio.sleep(0.05)
    for group in groups:
        assert state(await wire.read(group, 0))[0] == "NONE"
    assert state(await wire.read("g1", 0)) == ("NONE", 0, 5, [(5, 5, 2, 1)])


async def test_only_brokers_with_cluster_action_may_ask(start: Any) -> None:
    broker = await start(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    wire = await connect(broker, find=True)
    denied = ("CLUSTER_AUTHORIZATION_FAILED", None)
    assert error(await wire.initialize("g", 0, 0)) == denied
    assert error(await wire.read("g", 0)) == denied
    assert error(await wire.write("g", 0, 0, 0, [])) == denied
    assert error(await wire.delete("g")) == denied
    assert error(await wire.summary("g")) == denied
    find = FindCoordinatorRequest(key_type=2, coordinator_keys=[f"g:{kafka_uuid(wire.topic_id)}:0"])
    answer = await wire.connection.call(ApiKey.FIND_COORDINATOR, 6, find)
    assert answer.coordinators[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    await broker.metadata.alter_acls(
        [
            AclBinding(
                ResourceType.CLUSTER,
                CLUSTER_NAME,
                PatternType.LITERAL,
                "User:ANONYMOUS",
                "*",
                AclOperation.CLUSTER_ACTION,
                PermissionType.ALLOW,
            )
        ],
        [],
    )
    assert error(await wire.initialize("g", 0, 0)) == OK
    answer = await wire.connection.call(ApiKey.FIND_COORDINATOR, 6, find)
    assert answer.coordinators[0].error_code == ErrorCode.NONE


async def test_the_persister_calls_this_brokers_coordinator(start: Any) -> None:
    broker = await start()
    topic = await broker.metadata.create_topic(TOPIC, 2, 1)
    # One attempt is enough: the first call creates __share_group_state, loaded at once.
    persister = SharePersisterClient(broker, attempts=1)
    try:
        everything = [(topic.topic_id, 0), (topic.topic_id, 1)]
        initialized = await persister.initialize("g", [(topic.topic_id, p, 1, 5) for p in (0, 1)])
        assert initialized == dict.fromkeys(everything, ErrorCode.NONE)
        written = SharePartitionState(1, 5, (StateBatch(5, 9, 2, 1),), leader_epoch=1)
        await persister.write("g", topic.topic_id, 1, written)
        assert await persister.read("g", topic.topic_id, 1, 1) == SharePartitionState(
            1, 5, (StateBatch(5, 9, 2, 1),)
        )
        with pytest.raises(PersisterError) as fenced:
            await persister.write("g", topic.topic_id, 1, SharePartitionState(0, 5, ()))
        assert fenced.value.code == ErrorCode.FENCED_STATE_EPOCH
        assert await persister.read_summary("g", everything) == {
            (topic.topic_id, 0): SharePartitionState(1, 5, (), 0, 0),
            (topic.topic_id, 1): SharePartitionState(1, 5, (), 1, -1),  # the read stored 1
        }
        assert await persister.delete("g", everything) == dict.fromkeys(everything, ErrorCode.NONE)
        with pytest.raises(PersisterError) as gone:
            await persister.read("g", topic.topic_id, 0, 1)
        assert gone.value.code == ErrorCode.INVALID_REQUEST
    finally:
        await persister.close()


async def test_a_write_the_isr_does_not_take_is_not_applied(start: Any) -> None:
    broker = await start(**{"share.coordinator.write.timeout.ms": "300"})
    wire = await connect(broker)
    assert error(await wire.initialize("g", 0, 0)) == OK
    key = ShareStateKey("g", wire.topic_id, 0)
    partition = broker.partition(
        SHARE_GROUP_STATE_TOPIC, broker.share_coordinator.partition_of(key)
    )
    assert partition is not None
    # An imaginary second ISR member (replica 99) that never fetches.
    me = partition.broker_id
    partition.make_leader(partition.leader_epoch, (me, 99), (me, 99), time.time() * 1000)
    # Kafka's coordinator runtime reports a write the ISR did not take in time so.
    assert error(await wire.write("g", 0, 0, 3, [(3, 9, 2, 1)])) == (
        "COORDINATOR_NOT_AVAILABLE",
        None,
    )
    assert state(await wire.read("g", -1)) == ("NONE", 0, 0, [])
    # The ISR back to this broker alone: the write goes through (the leader sends it again).
    partition.make_leader(partition.leader_epoch, (me,), (me,), time.time() * 1000)
    assert error(await wire.write("g", 0, 0, 3, [(3, 9, 2, 1)])) == OK
    assert state(await wire.read("g", -1)) == ("NONE", 0, 3, [(3, 9, 2, 1)])
