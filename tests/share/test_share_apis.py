"""Share groups through the wire against an in-process broker (KIP-932): ShareGroupHeartbeat
until the partitions are assigned, ShareFetch and ShareAcknowledge with share sessions, as
Kafka 4.3 answered the same requests (../shared/kafka-4.3)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from confluent_kafka import Producer

from kbroker.broker import Broker
from kbroker.client import BrokerConnection
from kbroker.metrics import BrokerMetrics
from tests.group.conftest import connect
from wire.api_keys import ApiKey
from wire.errors import ErrorCode as E
from wire.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from wire.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from wire.messages.describe_groups_request import DescribeGroupsRequest
from wire.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from wire.messages.list_groups_request import ListGroupsRequest
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from wire.messages.share_acknowledge_request import (
    AcknowledgementBatch,
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from wire.messages.share_fetch_request import AcknowledgementBatch as FetchAck
from wire.messages.share_fetch_request import FetchPartition, FetchTopic, ShareFetchRequest
from wire.messages.share_group_describe_request import ShareGroupDescribeRequest
from wire.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from wire.records.batch import iter_batches

TOPIC = "shared"
GROUP = "sg"


class Member:
    def __init__(self, conn: BrokerConnection, topic_id: uuid.UUID) -> None:
        self.conn, self.topic_id = conn, topic_id
        self.member_id, self.epoch, self.session = str(uuid.uuid4()), 0, 0

    async def join(self) -> list[int]:
        for _ in range(100):
            response = await self.conn.call(
                ApiKey.SHARE_GROUP_HEARTBEAT,
                1,
                ShareGroupHeartbeatRequest(
                    group_id=GROUP,
                    member_id=self.member_id,
                    member_epoch=self.epoch,
                    subscribed_topic_names=[TOPIC] if self.epoch == 0 else None,
                ),
            )
            assert response.error_code == 0, response.error_message
            self.epoch = response.member_epoch
            if response.assignment is not None and response.assignment.topic_partitions:
                return list(response.assignment.topic_partitions[0].partitions)
            await asyncio.sleep(0.05)
        raise AssertionError("never assigned")

    async def fetch(self, acks: list[FetchAck] | None = None, **kw: Any) -> Any:
        request = ShareFetchRequest(
            group_id=GROUP,
            member_id=self.member_id,
            share_session_epoch=self.session,
            max_wait_ms=kw.pop("wait", 100),
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=kw.pop("max_records", 500),
            batch_size=500,
            share_acquire_mode=kw.pop("mode", 0),
            topics=[
                FetchTopic(
                    topic_id=self.topic_id,
                    partitions=[
                        FetchPartition(partition_index=0, acknowledgement_batches=acks or [])
                    ],
                )
            ]
            if self.session == 0 or acks
            else [],
        )
        assert not kw
        response = await self.conn.call(ApiKey.SHARE_FETCH, 2, request)
        self.session += 1
        return response

    async def ack(self, first: int, last: int, types: list[int], renew: bool = False) -> Any:
        request = ShareAcknowledgeRequest(
            group_id=GROUP,
            member_id=self.member_id,
            share_session_epoch=self.session,
            is_renew_ack=renew,
            topics=[
                AcknowledgeTopic(
                    topic_id=self.topic_id,
                    partitions=[
                        AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=[
                                AcknowledgementBatch(
                                    first_offset=first, last_offset=last, acknowledge_types=types
                                )
                            ],
                        )
                    ],
                )
            ],
        )
        response = await self.conn.call(ApiKey.SHARE_ACKNOWLEDGE, 2, request)
        self.session += 1
        return response


def acquired(response: Any) -> list[tuple[int, int, int]]:
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in response.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def ack_errors(response: Any) -> list[tuple[int, str | None]]:
    return [(p.error_code, p.error_message) for t in response.responses for p in t.partitions]


async def setup(broker: Broker, records: int) -> uuid.UUID:
    await broker.metadata.create_topic(TOPIC, 1, 1)
    await broker.metadata.set_group_configs(GROUP, {"share.auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 50})
    for i in range(records):
        producer.produce(TOPIC, f"v{i}".encode())
    assert await asyncio.to_thread(producer.flush, 30) == 0
    info = broker.metadata.topic(TOPIC)
    assert info is not None
    return info.topic_id


async def test_kafka_43_sequence_of_fetches_and_acknowledgements(share_broker: Broker) -> None:
    topic_id = await setup(share_broker, 10)
    conn = await connect(share_broker)
    a = Member(conn, topic_id)
    assert await a.join() == [0]
    first = await a.fetch(max_records=5)
    assert first.acquisition_lock_timeout_ms == 30_000
    assert acquired(first) == [(0, 9, 1)]
    records = bytes(first.responses[0].partitions[0].records)
    assert sum(h.records_count for _, h in iter_batches(records)) == 10
    # Nothing new: an incremental fetch answers no partition.
    assert (await a.fetch()).responses == []
    again = await a.fetch(
        [FetchAck(first_offset=0, last_offset=4, acknowledge_types=[1, 1, 2, 3, 0])]
    )
    assert acquired(again) == [(2, 2, 2)]
    past = await a.ack(100, 100, [1])
    assert ack_errors(past) == [
        (
            E.INVALID_REQUEST,
            "Batch record not found. The first offset in request is past acquired records.",
        )
    ]
    bad = await Member(conn, topic_id).fetch()
    assert bad.error_code == 0
    wrong_epoch = await a.conn.call(
        ApiKey.SHARE_FETCH,
        2,
        ShareFetchRequest(group_id=GROUP, member_id=a.member_id, share_session_epoch=9),
    )
    assert (wrong_epoch.error_code, wrong_epoch.acquisition_lock_timeout_ms) == (
        E.INVALID_SHARE_SESSION_EPOCH,
        0,
    )
    closed = await a.conn.call(
        ApiKey.SHARE_ACKNOWLEDGE,
        2,
        ShareAcknowledgeRequest(group_id=GROUP, member_id=a.member_id, share_session_epoch=-1),
    )
    assert closed.error_code == 0
    a.session = 0
    reopened = await a.fetch(max_records=20)
    assert acquired(reopened) == [(2, 2, 3), (5, 9, 2)]


async def test_only_the_owner_acknowledges_and_renew_needs_the_flag(share_broker: Broker) -> None:
    topic_id = await setup(share_broker, 6)
    conn = await connect(share_broker)
    a, b = Member(conn, topic_id), Member(conn, topic_id)
    await a.join()
    await b.join()
    assert acquired(await a.fetch()) == [(0, 5, 1)]
    assert acquired(await b.fetch()) == []
    assert ack_errors(await b.ack(0, 0, [1])) == [
        (E.INVALID_RECORD_STATE, "Member is not the owner of offset")
    ]
    assert ack_errors(await a.ack(2, 2, [4], renew=True)) == [(0, None)]
    assert ack_errors(await a.ack(3, 3, [4])) == [(E.INVALID_REQUEST, None)]
    assert ack_errors(await a.ack(2, 5, [1])) == [(0, None)]
    assert ack_errors(await a.ack(2, 2, [1])) == [
        (E.INVALID_RECORD_STATE, "The offset cannot be acknowledged. The offset is not acquired.")
    ]
    # What is acknowledged is stored before the answer.
    state = await share_broker.share_persister.read(GROUP, topic_id, 0, 0)
    assert state.start_offset == 0
    assert [(s.first_offset, s.last_offset, s.delivery_state) for s in state.batches] == [
        (0, 1, 0),
        (2, 5, 2),
    ]


async def test_describe_and_record_limit_mode(share_broker: Broker) -> None:
    topic_id = await setup(share_broker, 10)
    conn = await connect(share_broker)
    a = Member(conn, topic_id)
    await a.join()
    assert acquired(await a.fetch(max_records=3, mode=1)) == [(0, 2, 1)]
    described = await conn.call(
        ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest(group_ids=[GROUP, "nope"])
    )
    group, missing = described.groups
    assert (group.error_code, group.group_state, group.assignor_name) == (0, "Stable", "simple")
    assert [m.member_id for m in group.members] == [a.member_id]
    assert group.members[0].assignment.topic_partitions[0].topic_name == TOPIC
    assert missing.error_code == E.GROUP_ID_NOT_FOUND


async def describe_offsets(conn: BrokerConnection, group: str, topics: Any = None) -> Any:
    request = DescribeShareGroupOffsetsRequest(
        groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)]
    )
    response = await conn.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, request)
    group_answer = response.groups[0]
    return group_answer.error_code, [
        (t.topic_name, [(p.partition_index, p.start_offset, p.lag) for p in t.partitions])
        for t in group_answer.topics
    ]


async def alter_offsets(conn: BrokerConnection, group: str, start: int) -> Any:
    request = AlterShareGroupOffsetsRequest(
        group_id=group,
        topics=[
            AlterShareGroupOffsetsRequestTopic(
                topic_name=TOPIC,
                partitions=[
                    AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=start)
                ],
            )
        ],
    )
    response = await conn.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, request)
    return response.error_code, [
        (t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in response.responses
    ]


async def test_share_group_offsets_as_kafka_43_answers(share_broker: Broker) -> None:
    topic_id = await setup(share_broker, 10)
    conn = await connect(share_broker)
    a = Member(conn, topic_id)
    await a.join()
    await a.fetch()
    await a.ack(0, 4, [1, 1, 2, 3, 0])
    # 2 and 5-9 not done (3 and 4 are archived): a lag of 6. The start offset is the one
    # written with the acknowledgement, from before it moved: 0, as Kafka 4.3 answers.
    assert await describe_offsets(conn, GROUP) == (0, [(TOPIC, [(0, 0, 6)])])
    # The next write carries the start offset the first one moved to, 2: record 2 is left.
    await a.ack(5, 9, [1])
    assert await describe_offsets(conn, GROUP) == (0, [(TOPIC, [(0, 2, 1)])])
    assert await describe_offsets(conn, "nosuch") == (0, [])
    named = [DescribeShareGroupOffsetsRequestTopic(topic_name="nope", partitions=[0])]
    assert await describe_offsets(conn, GROUP, named) == (0, [("nope", [(0, -1, -1)])])
    assert (await alter_offsets(conn, GROUP, 4))[0] == E.NON_EMPTY_GROUP
    left = await conn.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        ShareGroupHeartbeatRequest(group_id=GROUP, member_id=a.member_id, member_epoch=-1),
    )
    assert left.error_code == 0
    assert await alter_offsets(conn, GROUP, 4) == (0, [(TOPIC, [(0, 0)])])
    assert (await describe_offsets(conn, GROUP))[1][0][1][0][1] == 4
    # Altering a group that does not exist creates an empty share group.
    assert await alter_offsets(conn, "fresh", 1) == (0, [(TOPIC, [(0, 0)])])
    listed = await conn.call(ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["share"]))
    assert sorted(g.group_id for g in listed.groups) == ["fresh", GROUP]
    deleted = await conn.call(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        0,
        DeleteShareGroupOffsetsRequest(
            group_id=GROUP,
            topics=[
                DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC),
                DeleteShareGroupOffsetsRequestTopic(topic_name="nope"),
            ],
        ),
    )
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        (TOPIC, 0),
        ("nope", E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert await describe_offsets(conn, GROUP) == (0, [])
    # No committed offsets in a share group, and DescribeGroups is for classic groups.
    commit = await conn.call(
        ApiKey.OFFSET_COMMIT,
        9,
        OffsetCommitRequest(
            group_id=GROUP,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                OffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=0, committed_offset=1)
                    ],
                )
            ],
        ),
    )
    assert commit.topics[0].partitions[0].error_code == E.GROUP_ID_NOT_FOUND
    described = await conn.call(ApiKey.DESCRIBE_GROUPS, 6, DescribeGroupsRequest(groups=[GROUP]))
    assert (described.groups[0].error_code, described.groups[0].error_message) == (
        E.GROUP_ID_NOT_FOUND,
        f"Group {GROUP} is not a classic group.",
    )


async def test_share_metrics(share_broker: Broker) -> None:
    topic_id = await setup(share_broker, 10)
    conn = await connect(share_broker)
    a = Member(conn, topic_id)
    await a.join()
    await a.fetch()
    await a.ack(0, 4, [1, 1, 2, 3, 0])
    await a.fetch()
    text = BrokerMetrics(share_broker).render()
    labels = f'group="{GROUP}",topic="{TOPIC}",partition="0"'
    assert f"kbroker_share_group_lag{{{labels}}} 6" in text
    assert f'kbroker_share_records_in_flight{{{labels},state="acquired"}} 6' in text
    assert f"kbroker_share_records_delivered_total{{{labels}}} 11" in text
    assert f"kbroker_share_records_redelivered_total{{{labels}}} 1" in text


def produce_aborted_then_committed(port: int) -> None:
    """One transactional producer: 3 records aborted (offsets 0-2, the ABORT marker at 3),
    then 2 committed (4-5, the COMMIT marker at 6)."""
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "transactional.id": "t1"})
    producer.init_transactions(30)
    for values, commit in (([b"a0", b"a1", b"a2"], False), ([b"c0", b"c1"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(TOPIC, value)
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


async def test_read_committed_keeps_a_commit_after_an_abort_of_the_same_producer(
    share_broker: Broker,
) -> None:
    await share_broker.metadata.create_topic(TOPIC, 1, 1)
    await share_broker.metadata.set_group_configs(
        GROUP, {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"}
    )
    await asyncio.to_thread(produce_aborted_then_committed, share_broker.port)
    info = share_broker.metadata.topic(TOPIC)
    assert info is not None
    a = Member(await connect(share_broker), info.topic_id)
    await a.join()
    # The aborted records and both markers are archived; only the committed records are
    # handed out (the ABORT marker closes the aborted transaction for the filter).
    assert acquired(await a.fetch(wait=2000)) == [(4, 5, 1)]


async def test_members_fetching_together_from_a_partition_not_loaded_yet(
    share_broker: Broker,
) -> None:
    topic_id = await setup(share_broker, 10)
    a = Member(await connect(share_broker), topic_id)
    b = Member(await connect(share_broker), topic_id)
    await a.join()
    await b.join()
    # Both fetches find the share partition unloaded: one load serves both, so they
    # acquire different records (each used to acquire 0-4 from a state of its own).
    first, second = await asyncio.gather(
        a.fetch(max_records=5, mode=1), b.fetch(max_records=5, mode=1)
    )
    assert sorted(acquired(first) + acquired(second)) == [(0, 4, 1), (5, 9, 1)]


async def test_a_closed_connection_releases_its_members_records(share_broker: Broker) -> None:
    """Kafka 4.3 ends a share session when the connection that opened it closes and releases
    what its member acquired: another member gets those records at once (delivery count 2),
    not when their 30 s locks expire."""
    topic_id = await setup(share_broker, 10)
    holder_conn = await connect(share_broker)
    holder = Member(holder_conn, topic_id)
    other = Member(await connect(share_broker), topic_id)
    await holder.join()
    await other.join()
    assert acquired(await holder.fetch()) == [(0, 9, 1)]
    assert acquired(await other.fetch(wait=0)) == []
    await holder_conn.close()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    got: list[tuple[int, int, int]] = []
    while not got and loop.time() < deadline:
        got = acquired(await other.fetch(wait=1000))
    assert got == [(0, 9, 2)]
    assert share_broker.share_partitions.sessions.members_of(GROUP) == [other.member_id]


async def test_a_partition_never_acknowledged_keeps_start_offset_minus_one(
    share_broker: Broker,
) -> None:
    """Kafka 4.3 does not write the start offset share.auto.offset.reset chose until it
    writes something else: a partition fetched but never acknowledged describes as -1 (`-`
    in kafka-share-groups.sh)."""
    topic_id = await setup(share_broker, 0)
    conn = await connect(share_broker)
    member = Member(conn, topic_id)
    await member.join()
    assert acquired(await member.fetch(wait=0)) == []
    # The session closes (ShareFetch with epoch -1), which releases what the member held:
    # nothing, so nothing is written.
    member.session = -1
    assert (await member.fetch(wait=0)).error_code == 0
    assert await describe_offsets(conn, GROUP) == (0, [(TOPIC, [(0, -1, -1)])])
