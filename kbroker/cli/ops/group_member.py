"""Membership of a consumer group for the console consumer (the classic group protocol).

A member joins with JoinGroup (protocol type "consumer", one protocol: "range", whose
metadata is the subscription), the leader computes every member's assignment and hands it
over in SyncGroup, and the others receive theirs there. Heartbeats keep the membership; one
answered REBALANCE_IN_PROGRESS means the member must commit and join again. Since Kafka 2.2
(KIP-394) the first JoinGroup is answered MEMBER_ID_REQUIRED with an id to join with.

The range strategy, per topic: partitions in order and members sorted by id; each member
takes a contiguous run of ``n // m`` partitions, the first ``n % m`` members one more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from kbroker.cli.ops.admin import OpsError
from kbroker.client import BrokerConnection, KafkaClient
from kbroker.group.consumer_protocol import (
    PROTOCOL_TYPE,
    assigned_partitions,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.heartbeat_request import HeartbeatRequest
from wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from wire.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from wire.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment

STRATEGY = "range"
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 20_000
# A third of the session timeout, as Kafka's consumer does by default.
HEARTBEAT_INTERVAL = SESSION_TIMEOUT_MS / 3000
JOIN_ATTEMPTS_SECONDS = 60.0
# Errors after which the member joins again (with a fresh id for UNKNOWN_MEMBER_ID).
_REJOIN = {
    ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.MEMBER_ID_REQUIRED,
}
_COORDINATOR_MOVED = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
}


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Member id -> topic -> partitions, by the range strategy."""
    result: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic, count in sorted(partitions.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            if size:
                result[member][topic] = list(range(start, start + size))
            start += size
    return result


class GroupMember:
    """One member of ``group`` subscribed to ``topics``."""

    def __init__(self, client: KafkaClient, group: str, topics: Sequence[str]) -> None:
        self._client = client
        self.group = group
        self.topics = list(topics)
        self.member_id = ""
        self.generation = -1

    async def _coordinator(self) -> BrokerConnection:
        return await self._client.coordinator(self.group)

    async def join(self) -> dict[str, list[int]]:
        """Join (or rejoin) the group; returns this member's assignment."""
        deadline = time.monotonic() + JOIN_ATTEMPTS_SECONDS
        while True:
            error = await self._join_once()
            if isinstance(error, dict):
                return error
            if time.monotonic() > deadline:
                raise OpsError(f"cannot join group {self.group!r}: {error.name}", error)
            await asyncio.sleep(0.2)

    async def _join_once(self) -> dict[str, list[int]] | ErrorCode:
        connection = await self._coordinator()
        request = JoinGroupRequest(
            group_id=self.group,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            member_id=self.member_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[
                JoinGroupRequestProtocol(name=STRATEGY, metadata=encode_subscription(self.topics))
            ],
        )
        joined, _ = await connection.request(ApiKey.JOIN_GROUP, request)
        error = ErrorCode(joined.error_code)
        if error == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = joined.member_id
            return error
        if error == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return error
        if error in _REJOIN or error in _COORDINATOR_MOVED:
            return error
        if error != ErrorCode.NONE:
            raise OpsError(f"join group {self.group!r}: {error.name}", error)
        self.member_id = joined.member_id
        self.generation = joined.generation_id
        assignments: list[SyncGroupRequestAssignment] = []
        if joined.leader == joined.member_id:
            subscriptions = {m.member_id: subscribed_topics(m.metadata) for m in joined.members}
            wanted = sorted({t for topics in subscriptions.values() for t in topics})
            counts = {t: len(p) for t, p in (await self._client.partitions(wanted)).items()}
            assignments = [
                SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
                for m, a in range_assign(subscriptions, counts).items()
            ]
        request_sync = SyncGroupRequest(
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=STRATEGY,
            assignments=assignments,
        )
        synced, _ = await connection.request(ApiKey.SYNC_GROUP, request_sync)
        error = ErrorCode(synced.error_code)
        if error in _REJOIN or error in _COORDINATOR_MOVED:
            return error
        if error != ErrorCode.NONE:
            raise OpsError(f"sync group {self.group!r}: {error.name}", error)
        return assigned_partitions(synced.assignment)

    async def heartbeat(self) -> bool:
        """False when the member has to join again."""
        connection = await self._coordinator()
        request = HeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id
        )
        response, _ = await connection.request(ApiKey.HEARTBEAT, request)
        error = ErrorCode(response.error_code)
        if error == ErrorCode.NONE or error in _COORDINATOR_MOVED:
            return True
        if error in _REJOIN:
            return False
        raise OpsError(f"heartbeat in group {self.group!r}: {error.name}", error)

    async def commit(self, topic: str, positions: Mapping[int, int]) -> None:
        """Commit ``positions`` (partition -> next offset) as this generation's member."""
        if not positions:
            return
        request = OffsetCommitRequest(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation,
            member_id=self.member_id,
            topics=[
                OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
                        for p, o in sorted(positions.items())
                    ],
                )
            ],
        )
        connection = await self._coordinator()
        response, _ = await connection.request(ApiKey.OFFSET_COMMIT, request)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    error = ErrorCode(p.error_code)
                    raise OpsError(
                        f"commit for group {self.group!r} failed on {t.name}-"
                        f"{p.partition_index}: {error.name}",
                        error,
                    )

    async def leave(self) -> None:
        connection = await self._coordinator()
        version = connection.version(ApiKey.LEAVE_GROUP)
        if version >= 3:
            request = LeaveGroupRequest(
                group_id=self.group, members=[MemberIdentity(member_id=self.member_id)]
            )
        else:
            request = LeaveGroupRequest(group_id=self.group, member_id=self.member_id)
        await connection.call(ApiKey.LEAVE_GROUP, version, request)
