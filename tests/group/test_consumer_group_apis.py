"""The consumer group protocol's APIs (KIP-848) end to end against an in-process broker:
ConsumerGroupHeartbeat and ConsumerGroupDescribe, and what the older group and offset APIs
answer about a consumer group, as Kafka 4.3 answered the same requests."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.client import BrokerConnection
from tests.group.conftest import StartBroker, connect
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from wire.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from wire.messages.delete_groups_request import DeleteGroupsRequest
from wire.messages.describe_groups_request import DescribeGroupsRequest
from wire.messages.list_groups_request import ListGroupsRequest
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from wire.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestGroup

TOPIC = "events"
GROUP = "cg"


@pytest.fixture
async def broker(start_broker: StartBroker) -> Broker:
    b = await start_broker()
    await b.metadata.create_topic(TOPIC, 4, 1)
    return b


async def heartbeat(conn: BrokerConnection, member_id: str, epoch: int, **kw: Any) -> Any:
    joining = epoch == 0
    version = kw.pop("version", 1)
    request = ConsumerGroupHeartbeatRequest(
        group_id=kw.pop("group", GROUP),
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=60_000 if joining else -1,
        subscribed_topic_names=[TOPIC] if joining else None,
        topic_partitions=[] if joining else kw.pop("owned", None),
        **kw,
    )
    return await conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, request)


async def test_join_heartbeat_describe_and_leave(broker: Broker) -> None:
    conn = await connect(broker)
    info = broker.metadata.topic(TOPIC)
    assert info is not None
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    joined = await heartbeat(conn, a, 0)
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, a, 1)
    assert joined.heartbeat_interval_ms == 5_000
    assert [(t.topic_id, t.partitions) for t in joined.assignment.topic_partitions] == [
        (info.topic_id, [0, 1, 2, 3])
    ]
    second = await heartbeat(conn, b, 0)
    assert (second.member_epoch, second.assignment.topic_partitions) == (2, [])
    # a gives up half of its partitions, then both are stable at epoch 2.
    asked = await heartbeat(conn, a, 1)
    kept = asked.assignment.topic_partitions[0].partitions
    assert len(kept) == 2 and asked.member_epoch == 1
    owned = [TopicPartitions(topic_id=info.topic_id, partitions=kept)]
    done = await heartbeat(conn, a, 1, owned=owned)
    assert done.member_epoch == 2
    got = await heartbeat(conn, b, 2)
    assert sorted(got.assignment.topic_partitions[0].partitions) == sorted({0, 1, 2, 3} - set(kept))
    described = await conn.call(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        1,
        ConsumerGroupDescribeRequest(group_ids=[GROUP, "nope"], include_authorized_operations=True),
    )
    group, unknown = described.groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch) == (
        0,
        "Stable",
        2,
        2,
    )
    assert group.assignor_name == "uniform"
    assert {m.member_id: m.member_epoch for m in group.members} == {a: 2, b: 2}
    members = {m.member_id: m for m in group.members}
    topics = members[a].assignment.topic_partitions
    assert [(t.topic_name, sorted(t.partitions)) for t in topics] == [(TOPIC, sorted(kept))]
    assert members[a].member_type == 1
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group nope not found.",
    )
    left = await heartbeat(conn, b, -1)
    assert (left.error_code, left.member_id, left.member_epoch) == (0, b, -1)
    await conn.close()


async def test_older_apis_on_a_consumer_group(broker: Broker) -> None:
    conn = await connect(broker)
    a = str(uuid.uuid4())
    epoch = (await heartbeat(conn, a, 0)).member_epoch

    async def commit(version: int, member_epoch: int, member_id: str = a) -> int:
        request = OffsetCommitRequest(
            group_id=GROUP,
            generation_id_or_member_epoch=member_epoch,
            member_id=member_id,
            topics=[
                OffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=0, committed_offset=5)
                    ],
                )
            ],
        )
        response = await conn.call(ApiKey.OFFSET_COMMIT, version, request)
        return response.topics[0].partitions[0].error_code

    assert await commit(9, epoch) == ErrorCode.NONE
    assert await commit(9, epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert await commit(8, epoch) == ErrorCode.UNSUPPORTED_VERSION
    assert await commit(9, -1, "") == ErrorCode.UNKNOWN_MEMBER_ID

    async def fetch(member_id: str | None, member_epoch: int) -> tuple[int, list[int]]:
        request = OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id=GROUP, member_id=member_id, member_epoch=member_epoch, topics=None
                )
            ]
        )
        group = (await conn.call(ApiKey.OFFSET_FETCH, 9, request)).groups[0]
        return group.error_code, [p.committed_offset for t in group.topics for p in t.partitions]

    assert await fetch(a, epoch) == (0, [5])
    assert await fetch(a, epoch + 3) == (ErrorCode.STALE_MEMBER_EPOCH, [])
    assert await fetch("x", 1) == (ErrorCode.UNKNOWN_MEMBER_ID, [])
    assert await fetch(None, -1) == (0, [5])

    listed = await conn.call(ApiKey.LIST_GROUPS, 5, ListGroupsRequest())
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
        (GROUP, "consumer", "Stable", "consumer")
    ]
    only_classic = await conn.call(
        ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["classic"])
    )
    assert only_classic.groups == []
    for version, error in ((5, ErrorCode.NONE), (6, ErrorCode.GROUP_ID_NOT_FOUND)):
        described = await conn.call(
            ApiKey.DESCRIBE_GROUPS, version, DescribeGroupsRequest(groups=[GROUP])
        )
        group = described.groups[0]
        assert (group.error_code, group.group_state) == (error, "Dead")
        if error:
            assert group.error_message == f"Group {GROUP} is not a classic group."
    deleted = await conn.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[GROUP]))
    assert deleted.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    await heartbeat(conn, a, -1)
    deleted = await conn.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[GROUP]))
    assert deleted.results[0].error_code == ErrorCode.NONE
    assert await fetch(None, -1) == (0, [])
    await conn.close()


async def test_the_protocol_can_be_switched_off(start_broker: StartBroker) -> None:
    # group.coordinator.rebalance.protocols without "consumer": the APIs are not offered, so
    # clients fall back (librdkafka would otherwise wait forever).
    broker = await start_broker(**{"group.coordinator.rebalance.protocols": "classic"})
    conn = await connect(broker)
    assert ApiKey.CONSUMER_GROUP_HEARTBEAT not in conn.versions
    await conn.close()


async def test_a_group_config_overrides_the_broker_settings(broker: Broker) -> None:
    conn = await connect(broker)
    await broker.metadata.set_group_configs(
        GROUP, {"consumer.heartbeat.interval.ms": "7000", "consumer.session.timeout.ms": "50000"}
    )
    member = str(uuid.uuid4())
    joined = await heartbeat(conn, member, 0)
    assert joined.heartbeat_interval_ms == 7000
    group = broker.group_coordinator.core._groups[GROUP]
    deadline = group.consumer.session_deadlines[member]
    assert deadline - int(broker.clock() * 1000) > 45_000
    other = await heartbeat(conn, str(uuid.uuid4()), 0, group="other")
    assert other.heartbeat_interval_ms == 5000


async def test_commits_at_an_older_member_epoch(broker: Broker) -> None:
    """Kafka 4.3 answered the same sequence with the same errors: at its previous epoch a
    member may commit the partitions it kept, not those that moved, and one of those fails
    the whole commit."""
    conn = await connect(broker)
    info = broker.metadata.topic(TOPIC)
    assert info is not None
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    old = (await heartbeat(conn, a, 0)).member_epoch
    await heartbeat(conn, b, 0)
    kept = (await heartbeat(conn, a, old)).assignment.topic_partitions[0].partitions
    owned = [TopicPartitions(topic_id=info.topic_id, partitions=kept)]
    current = (await heartbeat(conn, a, old, owned=owned)).member_epoch
    got = await heartbeat(conn, b, current)
    moved = got.assignment.topic_partitions[0].partitions
    assert sorted(kept + moved) == [0, 1, 2, 3] and current == old + 1

    async def commit(member_id: str, epoch: int, partitions: list[int]) -> dict[int, int]:
        request = OffsetCommitRequest(
            group_id=GROUP,
            generation_id_or_member_epoch=epoch,
            member_id=member_id,
            topics=[
                OffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=p, committed_offset=5)
                        for p in partitions
                    ],
                )
            ],
        )
        response = await conn.call(ApiKey.OFFSET_COMMIT, 9, request)
        return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}

    stale = ErrorCode.STALE_MEMBER_EPOCH
    assert await commit(a, old, kept) == dict.fromkeys(kept, 0)
    assert await commit(a, old, moved) == dict.fromkeys(moved, stale)
    assert await commit(a, old, kept + moved) == dict.fromkeys(kept + moved, stale)
    assert await commit(a, current, kept) == dict.fromkeys(kept, 0)
    assert await commit(b, current - 1, moved) == dict.fromkeys(moved, stale)
    assert await commit(a, current + 1, kept) == dict.fromkeys(kept, stale)
    await conn.close()
