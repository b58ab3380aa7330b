"""Offset commits at an older member epoch in a consumer group (KIP-848), on kbroker and on
Kafka 4.3, with raw ConsumerGroupHeartbeat and OffsetCommit v9 requests.

A member whose epoch moved on (its heartbeat answer is on its way) may still commit, at its
previous epoch, the partitions it had then and still has; a partition it did not have at that
epoch fails the whole commit with STALE_MEMBER_EPOCH. Kafka 3.9 has no KIP-848 protocol by
default, so the test runs against kbroker and Kafka 4.3.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest

from kbroker.client import BrokerConnection
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

pytestmark = pytest.mark.broker_kinds("kbroker", "kafka43", "external")

# Kafka 4.3 computes a new target assignment shortly after the heartbeat that changed the
# group: heartbeats repeat until the expected assignment comes, on a slow machine too.
ASSIGNMENT_TIMEOUT_S = 60.0


class Member:
    def __init__(self, conn: BrokerConnection, group: str, topic: str) -> None:
        self.conn = conn
        self.group = group
        self.topic = topic
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.topic_id: uuid.UUID | None = None
        self.partitions: list[int] = []

    async def heartbeat(self, owned: list[TopicPartitions] | None = None) -> None:
        joining = self.epoch == 0
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.epoch,
            rebalance_timeout_ms=60_000 if joining else -1,
            subscribed_topic_names=[self.topic] if joining else None,
            topic_partitions=[] if joining else owned,
        )
        response = await self.conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request)
        assert response.error_code == ErrorCode.NONE, response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            topics = response.assignment.topic_partitions
            self.partitions = sorted(p for t in topics for p in t.partitions)
            self.topic_id = topics[0].topic_id if topics else self.topic_id

    async def heartbeat_until(self, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + ASSIGNMENT_TIMEOUT_S
        while not done():
            assert time.monotonic() < deadline, f"no assignment for {self.member_id}"
            await asyncio.sleep(0.1)
            await self.heartbeat()

    async def commit(self, epoch: int, partitions: list[int]) -> dict[int, int]:
        request = OffsetCommitRequest(
            group_id=self.group,
            generation_id_or_member_epoch=epoch,
            member_id=self.member_id,
            topics=[
                OffsetCommitRequestTopic(
                    name=self.topic,
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=p, committed_offset=0)
                        for p in partitions
                    ],
                )
            ],
        )
        response = await self.conn.call(ApiKey.OFFSET_COMMIT, 9, request)
        return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


async def test_commits_at_an_older_member_epoch(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic(4)
    host, port = bootstrap.rsplit(":", 1)
    conn = await BrokerConnection.open((host, int(port)), "compat-commit-epochs", 30)
    try:
        group = f"commit-epochs-{uuid.uuid4().hex[:8]}"
        a, b = Member(conn, group, topic), Member(conn, group, topic)
        await a.heartbeat()
        await a.heartbeat_until(lambda: a.partitions == [0, 1, 2, 3])
        await b.heartbeat()
        # a is told to give up two partitions; it keeps its epoch until it has.
        await a.heartbeat_until(lambda: len(a.partitions) == 2)
        kept, old = a.partitions, a.epoch
        await a.heartbeat([TopicPartitions(topic_id=a.topic_id, partitions=kept)])
        assert a.epoch > old
        await b.heartbeat_until(lambda: len(b.partitions) == 2)
        moved = b.partitions
        stale = ErrorCode.STALE_MEMBER_EPOCH
        assert await a.commit(old, kept) == dict.fromkeys(kept, ErrorCode.NONE)
        assert await a.commit(old, moved) == dict.fromkeys(moved, stale)
        assert await a.commit(old, kept + moved) == dict.fromkeys(kept + moved, stale)
        assert await a.commit(a.epoch, kept) == dict.fromkeys(kept, ErrorCode.NONE)
        assert await b.commit(b.epoch - 1, moved) == dict.fromkeys(moved, stale)
        assert await a.commit(a.epoch + 1, kept) == dict.fromkeys(kept, stale)
    finally:
        await conn.close()
