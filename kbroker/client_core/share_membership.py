"""A share consumer's membership of its share group (KIP-932), sans-IO: what each
ShareGroupHeartbeat says and what its answer changes. The shell sends the requests, keeps the
time and finds the coordinator.

The member names itself (a client-generated member id, KIP-1082) and joins at epoch 0 with
its subscription; the coordinator answers the member's epoch, the heartbeat interval and,
when it changed, the whole assignment (topic ids and partitions). Later heartbeats carry
the subscription only when it changed. A member the coordinator no longer knows
(UNKNOWN_MEMBER_ID) or fenced (FENCED_MEMBER_EPOCH) loses its assignment and joins again at
epoch 0 with the same id; coordinator errors are retried after a back-off (the shell finds
the coordinator again on NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE); any other error
is fatal and raised. Leaving sends epoch -1.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from wire.errors import ErrorCode, KafkaError
from wire.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from wire.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
# Until the coordinator names an interval, and the pause after a retriable error (the
# Java client's retry.backoff.ms).
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
RETRY_BACKOFF_MS = 100

# (topic id, partition)
SharePartitionId = tuple[uuid.UUID, int]

_REJOIN = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH})
_RETRY = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


class ShareMembership:
    """One member's view of its share group."""

    def __init__(self, group_id: str, member_id: str | None = None) -> None:
        self.group_id = group_id
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = JOIN_EPOCH
        self.subscription: tuple[str, ...] = ()
        self.assignment: frozenset[SharePartitionId] = frozenset()
        self.interval_ms = DEFAULT_HEARTBEAT_INTERVAL_MS
        # When the next heartbeat is due (ms, the shell's clock); None: not subscribed.
        self.due_ms: int | None = None
        self._send_subscription = True
        # Bumped at each assignment change, so waiters can tell it moved.
        self.assignment_version = 0

    def subscribe(self, topics: Iterable[str], now_ms: int) -> None:
        """A new subscription, sent with the next heartbeat, which is due now."""
        topics = tuple(sorted(set(topics)))
        if topics != self.subscription:
            self.subscription = topics
            self._send_subscription = True
        self.due_ms = now_ms

    def heartbeat_request(self) -> ShareGroupHeartbeatRequest:
        joining = self.epoch == JOIN_EPOCH
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            subscribed_topic_names=list(self.subscription)
            if joining or self._send_subscription
            else None,
        )

    def leave_request(self) -> ShareGroupHeartbeatRequest:
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH
        )

    def on_response(self, response: ShareGroupHeartbeatResponse, now_ms: int) -> ErrorCode:
        """Take a heartbeat's answer: the error the shell must act on (a coordinator error,
        to be retried), NONE otherwise; KafkaError when the error is fatal."""
        error = ErrorCode(response.error_code)
        if error == ErrorCode.NONE:
            self._send_subscription = False
            self.epoch = response.member_epoch
            if response.heartbeat_interval_ms > 0:
                self.interval_ms = response.heartbeat_interval_ms
            if response.assignment is not None:
                self._assign(
                    {
                        (t.topic_id, p)
                        for t in response.assignment.topic_partitions
                        for p in t.partitions
                    }
                )
            self.due_ms = now_ms + self.interval_ms
            return error
        if error in _REJOIN:
            self.epoch = JOIN_EPOCH
            self._send_subscription = True
            self._assign(set())
            self.due_ms = now_ms
            return error
        if error in _RETRY:
            self.due_ms = now_ms + RETRY_BACKOFF_MS
            return error
        raise KafkaError(error, response.error_message or f"ShareGroupHeartbeat: {error.name}")

    def on_failure(self, now_ms: int) -> None:
        """The heartbeat got no answer (connection lost, timeout): try again shortly."""
        self.due_ms = now_ms + RETRY_BACKOFF_MS

    def left(self) -> None:
        self.epoch = JOIN_EPOCH
        self._assign(set())
        self.due_ms = None

    def _assign(self, partitions: set[SharePartitionId]) -> None:
        if partitions != self.assignment:
            self.assignment = frozenset(partitions)
            self.assignment_version += 1
