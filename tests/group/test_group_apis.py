"""The group and offset APIs end to end against an in-process broker, at every version, and
committed state across a restart."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.client import BrokerConnection
from kbroker.group.consumer_protocol import encode_subscription
from kbroker.group.offsets_store import OFFSETS_TOPIC
from tests.group.conftest import StartBroker, connect
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.delete_groups_request import DeleteGroupsRequest
from wire.messages.describe_groups_request import DescribeGroupsRequest
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.heartbeat_request import HeartbeatRequest
from wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from wire.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from wire.messages.list_groups_request import ListGroupsRequest
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from wire.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from wire.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from wire.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from wire.primitives import ZERO_UUID

TOPIC = "events"


@pytest.fixture
async def broker(start_broker: StartBroker) -> Broker:
    b = await start_broker()
    await b.metadata.create_topic(TOPIC, 2, 1)
    return b


@pytest.fixture
async def conn(broker: Broker) -> AsyncIterator[BrokerConnection]:
    c = await connect(broker)
    yield c
    await c.close()


def versions(api: type) -> list[int]:
    return list(range(api.MIN_VERSION, api.MAX_VERSION + 1))


async def test_offsets_topic_created_internal_compacted(broker: Broker) -> None:
    topic = broker.metadata.topic(OFFSETS_TOPIC)
    assert topic is not None
    assert topic.internal and len(topic.partitions) == 3
    assert topic.configs["cleanup.policy"] == "compact"
    # offsets.topic.replication.factor defaults to 3; a single node uses what it has.
    assert len(topic.partitions[0].replicas) == 1


@pytest.mark.parametrize("version", versions(FindCoordinatorRequest))
async def test_find_coordinator(broker: Broker, conn: BrokerConnection, version: int) -> None:
    keys = ["g1", "g2"]
    if version >= 4:
        request = FindCoordinatorRequest(coordinator_keys=keys)
    else:
        request = FindCoordinatorRequest(key=keys[0])
    response = await conn.call(ApiKey.FIND_COORDINATOR, version, request)
    if version >= 4:
        assert [(c.key, c.error_code, c.node_id, c.port) for c in response.coordinators] == [
            (k, ErrorCode.NONE, 0, broker.port) for k in keys
        ]
    else:
        assert (response.error_code, response.node_id, response.host, response.port) == (
            ErrorCode.NONE,
            0,
            "127.0.0.1",
            broker.port,
        )


async def _join(conn: BrokerConnection, version: int, member_id: str = "", **kw: Any) -> Any:
    request = JoinGroupRequest(
        group_id=kw.pop("group", "g"),
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000 if version >= 1 else -1,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=encode_subscription([TOPIC]))],
        **kw,
    )
    return await conn.call(ApiKey.JOIN_GROUP, version, request)


@pytest.mark.parametrize("version", versions(JoinGroupRequest))
async def test_membership_round_trip_every_join_version(
    conn: BrokerConnection, version: int
) -> None:
    joined = await _join(conn, version)
    if version >= 4:
        assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = await _join(conn, version, joined.member_id)
    assert joined.error_code == ErrorCode.NONE
    member, generation = joined.member_id, joined.generation_id
    assert member.startswith("group-tests-")
    assert joined.leader == member and generation == 1
    assert joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [member]

    sync_version = min(version, SyncGroupRequest.MAX_VERSION)
    sync = await conn.call(
        ApiKey.SYNC_GROUP,
        sync_version,
        SyncGroupRequest(
            group_id="g",
            generation_id=generation,
            member_id=member,
            protocol_type="consumer" if sync_version >= 5 else None,
            protocol_name="range" if sync_version >= 5 else None,
            assignments=[SyncGroupRequestAssignment(member_id=member, assignment=b"mine")],
        ),
    )
    assert (sync.error_code, sync.assignment) == (ErrorCode.NONE, b"mine")

    for hb_version in versions(HeartbeatRequest):
        beat = await conn.call(
            ApiKey.HEARTBEAT,
            hb_version,
            HeartbeatRequest(group_id="g", generation_id=generation, member_id=member),
        )
        assert beat.error_code == ErrorCode.NONE
    stale = await conn.call(
        ApiKey.HEARTBEAT,
        0,
        HeartbeatRequest(group_id="g", generation_id=generation - 1, member_id=member),
    )
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION


@pytest.mark.parametrize("version", versions(LeaveGroupRequest))
async def test_leave_every_version(conn: BrokerConnection, version: int) -> None:
    joined = await _join(conn, 3)
    if version >= 3:
        request = LeaveGroupRequest(
            group_id="g",
            members=[MemberIdentity(member_id=joined.member_id), MemberIdentity(member_id="x")],
        )
    else:
        request = LeaveGroupRequest(group_id="g", member_id=joined.member_id)
    response = await conn.call(ApiKey.LEAVE_GROUP, version, request)
    assert response.error_code == ErrorCode.NONE
    if version >= 3:
        assert [(m.member_id, m.error_code) for m in response.members] == [
            (joined.member_id, ErrorCode.NONE),
            ("x", ErrorCode.UNKNOWN_MEMBER_ID),
        ]
    again = await conn.call(
        ApiKey.LEAVE_GROUP, 0, LeaveGroupRequest(group_id="g", member_id=joined.member_id)
    )
    assert again.error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_static_member_join(conn: BrokerConnection) -> None:
    joined = await _join(conn, 5, group_instance_id="instance-1")
    assert joined.error_code == ErrorCode.NONE
    assert joined.member_id.startswith("instance-1-")
    assert joined.members[0].group_instance_id == "instance-1"


TopicIds = dict[str, uuid.UUID]


def _commit_request(
    version: int, group: str, offsets: dict[tuple[str, int], int], ids: TopicIds | None = None
) -> Any:
    """``ids``: the topic ids standing for the names from v10 (KIP-848's topic ids)."""
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=offset,
                committed_metadata=f"meta-{offset}",
                committed_leader_epoch=3 if version >= 6 else -1,
            )
        )
    return OffsetCommitRequest(
        group_id=group,
        topics=[
            OffsetCommitRequestTopic(name=t, partitions=p)
            if version < 10
            else OffsetCommitRequestTopic(topic_id=(ids or {})[t], partitions=p)
            for t, p in topics.items()
        ],
    )


def _named(name: str, topic_id: uuid.UUID, ids: TopicIds | None) -> str:
    """The name of a topic in an answer that may name it by id (v10)."""
    return name or next(n for n, i in (ids or {}).items() if i == topic_id)


async def _fetch(
    conn: BrokerConnection, version: int, group: str, ids: TopicIds | None = None
) -> dict[tuple[str, int], Any]:
    wanted = [0, 1]
    if version >= 8:
        named = (
            OffsetFetchRequestTopics(name=TOPIC, partition_indexes=wanted)
            if version < 10
            else OffsetFetchRequestTopics(topic_id=(ids or {})[TOPIC], partition_indexes=wanted)
        )
        request = OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(group_id=group, topics=[named]),
                OffsetFetchRequestGroup(group_id="unknown-group", topics=None),
            ]
        )
        response = await conn.call(ApiKey.OFFSET_FETCH, version, request)
        assert [g.group_id for g in response.groups] == [group, "unknown-group"]
        assert response.groups[1].topics == []
        topics = response.groups[0].topics
    else:
        request = OffsetFetchRequest(
            group_id=group,
            topics=[OffsetFetchRequestTopic(name=TOPIC, partition_indexes=wanted)],
        )
        response = await conn.call(ApiKey.OFFSET_FETCH, version, request)
        topics = response.topics
    return {
        (_named(t.name, getattr(t, "topic_id", ZERO_UUID), ids), p.partition_index): (
            p.committed_offset,
            p.metadata,
            p.committed_leader_epoch,
            p.error_code,
        )
        for t in topics
        for p in t.partitions
    }


@pytest.mark.parametrize("version", versions(OffsetCommitRequest))
async def test_simple_commit_and_fetch_every_version(
    broker: Broker, conn: BrokerConnection, version: int
) -> None:
    info = broker.metadata.topic(TOPIC)
    assert info is not None
    ids = {TOPIC: info.topic_id, "no-such-topic": uuid.uuid4()}
    group = f"simple-{version}"
    response = await conn.call(
        ApiKey.OFFSET_COMMIT,
        version,
        _commit_request(version, group, {(TOPIC, 0): 42, ("no-such-topic", 0): 1}, ids),
    )
    errors = {
        (_named(t.name, t.topic_id, ids), p.partition_index): p.error_code
        for t in response.topics
        for p in t.partitions
    }
    unknown = ErrorCode.UNKNOWN_TOPIC_ID if version >= 10 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert errors == {(TOPIC, 0): ErrorCode.NONE, ("no-such-topic", 0): unknown}
    fetch_version = min(version, OffsetFetchRequest.MAX_VERSION)
    fetched = await _fetch(conn, fetch_version, group, ids)
    epoch = 3 if version >= 6 and fetch_version >= 5 else -1
    assert fetched == {
        (TOPIC, 0): (42, "meta-42", epoch, ErrorCode.NONE),
        (TOPIC, 1): (-1, "", -1, ErrorCode.NONE),
    }


async def test_fetch_all_topics_with_null(conn: BrokerConnection) -> None:
    await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "all", {(TOPIC, 1): 7}))
    response = await conn.call(
        ApiKey.OFFSET_FETCH, 2, OffsetFetchRequest(group_id="all", topics=None)
    )
    assert [
        (t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
        for t in response.topics
    ] == [(TOPIC, [(1, 7)])]


async def test_fetch_by_topic_id(broker: Broker, conn: BrokerConnection) -> None:
    # v10: topics by id; an unknown id is UNKNOWN_TOPIC_ID, and all of a group's offsets leave
    # out a topic that no longer exists (it has no id to name it by).
    await broker.metadata.create_topic("doomed", 1, 1)
    ids = {
        name: info.topic_id for name in (TOPIC, "doomed") if (info := broker.metadata.topic(name))
    }
    await conn.call(
        ApiKey.OFFSET_COMMIT,
        10,
        _commit_request(10, "by-id", {(TOPIC, 1): 7, ("doomed", 0): 3}, ids),
    )
    await broker.metadata.delete_topic("doomed")
    unknown = uuid.uuid4()
    response = await conn.call(
        ApiKey.OFFSET_FETCH,
        10,
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id="by-id",
                    topics=[
                        OffsetFetchRequestTopics(topic_id=ids[TOPIC], partition_indexes=[1]),
                        OffsetFetchRequestTopics(topic_id=unknown, partition_indexes=[0]),
                    ],
                ),
                OffsetFetchRequestGroup(group_id="by-id", topics=None),
            ]
        ),
    )
    named, everything = response.groups
    assert [
        (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
        for t in named.topics
    ] == [
        (ids[TOPIC], [(1, 7, ErrorCode.NONE)]),
        (unknown, [(0, -1, ErrorCode.UNKNOWN_TOPIC_ID)]),
    ]
    assert [
        (t.topic_id, [p.committed_offset for p in t.partitions]) for t in everything.topics
    ] == [(ids[TOPIC], [7])]


async def test_commit_with_generation_is_checked(conn: BrokerConnection) -> None:
    request = _commit_request(8, "members", {(TOPIC, 0): 1})
    request.generation_id_or_member_epoch = 5
    request.member_id = "someone"
    response = await conn.call(ApiKey.OFFSET_COMMIT, 8, request)
    assert response.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION
    response = await conn.call(ApiKey.OFFSET_COMMIT, 9, request)
    assert response.topics[0].partitions[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


async def test_commit_metadata_limit(start_broker: StartBroker) -> None:
    broker = await start_broker(**{"offset.metadata.max.bytes": "3"})
    await broker.metadata.create_topic(TOPIC, 1, 1)
    conn = await connect(broker)
    response = await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "g", {(TOPIC, 0): 1}))
    assert response.topics[0].partitions[0].error_code == ErrorCode.OFFSET_METADATA_TOO_LARGE
    await conn.close()


@pytest.mark.parametrize("version", versions(DescribeGroupsRequest))
async def test_describe_groups(conn: BrokerConnection, version: int) -> None:
    joined = await _join(conn, 3)
    await conn.call(
        ApiKey.SYNC_GROUP,
        0,
        SyncGroupRequest(
            group_id="g",
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"a")],
        ),
    )
    response = await conn.call(
        ApiKey.DESCRIBE_GROUPS,
        version,
        DescribeGroupsRequest(groups=["g", "nope"], include_authorized_operations=version >= 3),
    )
    described, unknown = response.groups
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [
        (m.member_id, m.client_id, m.client_host, m.member_assignment) for m in described.members
    ] == [(joined.member_id, "group-tests", "/127.0.0.1", b"a")]
    # KIP-1043: v6 says GROUP_ID_NOT_FOUND (the state stays Dead, as Kafka 4.3 answers).
    not_found = ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else ErrorCode.NONE
    assert (unknown.error_code, unknown.group_state) == (not_found, "Dead")
    if version >= 3:
        assert described.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)


@pytest.mark.parametrize("version", versions(ListGroupsRequest))
async def test_list_groups(conn: BrokerConnection, version: int) -> None:
    await _join(conn, 3)
    await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "simple", {(TOPIC, 0): 1}))
    response = await conn.call(ApiKey.LIST_GROUPS, version, ListGroupsRequest())
    listed = sorted((g.group_id, g.protocol_type) for g in response.groups)
    assert listed == [("g", "consumer"), ("simple", "")]
    if version >= 4:
        states = {g.group_id: g.group_state for g in response.groups}
        assert states == {"g": "CompletingRebalance", "simple": "Empty"}
        filtered = await conn.call(
            ApiKey.LIST_GROUPS, version, ListGroupsRequest(states_filter=["empty"])
        )
        assert [g.group_id for g in filtered.groups] == ["simple"]
    if version >= 5:
        assert {g.group_type for g in response.groups} == {"classic"}
        none = await conn.call(
            ApiKey.LIST_GROUPS, version, ListGroupsRequest(types_filter=["consumer"])
        )
        assert none.groups == []


@pytest.mark.parametrize("version", versions(DeleteGroupsRequest))
async def test_delete_groups(conn: BrokerConnection, version: int) -> None:
    await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "old", {(TOPIC, 0): 1}))
    await _join(conn, 3)
    response = await conn.call(
        ApiKey.DELETE_GROUPS, version, DeleteGroupsRequest(groups_names=["old", "g", "nope"])
    )
    assert {r.group_id: r.error_code for r in response.results} == {
        "old": ErrorCode.NONE,
        "g": ErrorCode.NON_EMPTY_GROUP,
        "nope": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert await _fetch(conn, 3, "old") == {
        (TOPIC, 0): (-1, "", -1, ErrorCode.NONE),
        (TOPIC, 1): (-1, "", -1, ErrorCode.NONE),
    }


async def test_offset_delete(conn: BrokerConnection) -> None:
    await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "od", {(TOPIC, 0): 5}))
    request = OffsetDeleteRequest(
        group_id="od",
        topics=[
            OffsetDeleteRequestTopic(
                name=TOPIC, partitions=[OffsetDeleteRequestPartition(partition_index=0)]
            ),
            OffsetDeleteRequestTopic(
                name="missing", partitions=[OffsetDeleteRequestPartition(partition_index=0)]
            ),
        ],
    )
    response = await conn.call(ApiKey.OFFSET_DELETE, 0, request)
    assert response.error_code == ErrorCode.NONE
    assert {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    } == {(TOPIC, 0): ErrorCode.NONE, ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert (await _fetch(conn, 3, "od"))[(TOPIC, 0)][0] == -1
    response = await conn.call(ApiKey.OFFSET_DELETE, 0, OffsetDeleteRequest(group_id="nope"))
    assert response.error_code == ErrorCode.GROUP_ID_NOT_FOUND


async def test_committed_state_survives_restart(start_broker: StartBroker) -> None:
    broker = await start_broker()
    await broker.metadata.create_topic(TOPIC, 2, 1)
    conn = await connect(broker)
    await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "keep", {(TOPIC, 0): 10}))
    await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "keep", {(TOPIC, 0): 11}))
    await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "drop", {(TOPIC, 1): 3}))
    await conn.call(ApiKey.DELETE_GROUPS, 0, DeleteGroupsRequest(groups_names=["drop"]))
    joined = await _join(conn, 3, group="live")
    await conn.call(
        ApiKey.SYNC_GROUP,
        0,
        SyncGroupRequest(
            group_id="live",
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"p")],
        ),
    )
    await conn.close()
    await broker.stop()

    again = await start_broker()
    conn = await connect(again)
    assert (await _fetch(conn, 3, "keep"))[(TOPIC, 0)][:2] == (11, "meta-11")
    assert (await _fetch(conn, 3, "drop"))[(TOPIC, 1)][0] == -1
    # The member keeps its generation and assignment while its session lasts.
    beat = await conn.call(
        ApiKey.HEARTBEAT,
        0,
        HeartbeatRequest(
            group_id="live", generation_id=joined.generation_id, member_id=joined.member_id
        ),
    )
    assert beat.error_code == ErrorCode.NONE
    described = await conn.call(ApiKey.DESCRIBE_GROUPS, 0, DescribeGroupsRequest(groups=["live"]))
    assert described.groups[0].members[0].member_assignment == b"p"
    await conn.close()


async def test_pending_join_is_answered_on_shutdown(start_broker: StartBroker) -> None:
    broker = await start_broker()
    conn = await connect(broker)
    first = await _join(conn, 3)
    # A second member's join parks until the first rejoins, which never happens.
    other = await connect(broker)
    pending = asyncio.ensure_future(_join(other, 3))
    await asyncio.sleep(0.1)
    assert not pending.done()
    await broker.group_coordinator.stop()
    assert (await pending).error_code == ErrorCode.NOT_COORDINATOR
    assert first.error_code == ErrorCode.NONE
    await conn.close()
    await other.close()


async def test_expired_offsets_stay_gone_after_restart(start_broker: StartBroker) -> None:
    now = [1_700_000_000.0]
    broker = await start_broker(clock=lambda: now[0], **{"offsets.retention.minutes": "1"})
    await broker.metadata.create_topic(TOPIC, 1, 1)
    conn = await connect(broker)
    await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "brief", {(TOPIC, 0): 4}))
    now[0] += 59
    broker.group_coordinator.expire_offsets()
    assert (await _fetch(conn, 3, "brief"))[(TOPIC, 0)][0] == 4
    now[0] += 1
    broker.group_coordinator.expire_offsets()
    assert (await _fetch(conn, 3, "brief"))[(TOPIC, 0)][0] == -1
    await conn.close()
    await broker.stop()
    again = await start_broker()
    conn = await connect(again)
    assert (await _fetch(conn, 3, "brief"))[(TOPIC, 0)][0] == -1
    assert again.group_coordinator.core.describe("brief") is None
    await conn.close()


@pytest.mark.parametrize(("version", "skip"), [(5, False), (9, True)])
async def test_static_leader_rejoin_skip_assignment_only_from_v9(
    conn: BrokerConnection, version: int, skip: bool
) -> None:
    joined = await _join(conn, version, group_instance_id="solo")
    await conn.call(
        ApiKey.SYNC_GROUP,
        3,
        SyncGroupRequest(
            group_id="g",
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id="solo",
            assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"a")],
        ),
    )
    again = await _join(conn, version, group_instance_id="solo")
    assert again.error_code == ErrorCode.NONE
    assert again.generation_id == joined.generation_id
    assert again.skip_assignment is skip
    assert again.leader == again.member_id != joined.member_id


async def test_failed_offsets_write_is_reported_as_a_coordinator_error(
    broker: Broker, conn: BrokerConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator = broker.group_coordinator
    index = coordinator.core.partition_for("g")
    partition = broker.partition(OFFSETS_TOPIC, index)
    assert partition is not None

    def fail(*args: object, **kwargs: object) -> None:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    monkeypatch.setattr(partition, "append", fail)
    response = await conn.call(ApiKey.OFFSET_COMMIT, 2, _commit_request(2, "g", {(TOPIC, 0): 1}))
    assert response.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    assert (await _fetch(conn, 3, "g"))[(TOPIC, 0)][0] == -1
