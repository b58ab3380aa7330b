"""The group state machine's mutable state: members, groups, pending group-metadata writes,
and the load state of each offsets partition. Only the state machine (and its offsets
operations) change these."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from kbroker.group.consumer_group import ConsumerGroupData
from kbroker.group.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from kbroker.group.consumer_protocol import subscribed_topics
from kbroker.group.events import Effect, GroupState, Protocols, TopicPartition
from kbroker.group.offsets_store import OffsetValue
from kbroker.group.share_group import ShareGroupData
from wire.errors import DecodeError, ErrorCode


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    deadline_ms: int
    assignment: bytes = b""
    join_token: int | None = None
    sync_token: int | None = None
    is_new: bool = False

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def expiry_ms(self) -> int | None:
        """When the session ends; None while a pending JoinGroup/SyncGroup keeps it alive."""
        if self.join_token is not None:
            return self.deadline_ms if self.is_new else None
        if self.sync_token is not None:
            return None
        return self.deadline_ms


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState
    state_timestamp_ms: int
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, with the time they lapse.
    pending_members: dict[str, int] = field(default_factory=dict)
    pending_sync: set[str] = field(default_factory=set)
    join_deadline_ms: int | None = None
    # Set while the KIP-134 initial delay runs: the rebalance timeout budget left.
    initial_delay_remaining_ms: int | None = None
    new_member_added: bool = False
    sync_deadline_ms: int | None = None
    offsets: dict[TopicPartition, OffsetValue] = field(default_factory=dict)
    # TxnOffsetCommit offsets by producer id, waiting for their transaction's marker.
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetValue]] = field(default_factory=dict)
    scheduled_ms: int | None = None
    # Set for a group of the consumer group protocol (KIP-848), whose members are there.
    consumer: ConsumerGroupData | None = None
    # Set for a share group (KIP-932).
    share: ShareGroupData | None = None

    def transition(self, state: GroupState, now: int) -> None:
        self.state = state
        self.state_timestamp_ms = now

    def awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_token is not None)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def next_deadline(self) -> int | None:
        candidates = [d for d in self.pending_members.values()]
        if self.consumer is not None:
            candidates.extend(self.consumer.session_deadlines.values())
            candidates.extend(self.consumer.revocation_deadlines.values())
            candidates.extend(self.consumer.classic_deadlines.values())
        if self.share is not None:
            candidates.extend(self.share.session_deadlines.values())
        candidates.extend(
            d for d in (m.expiry_ms() for m in self.members.values()) if d is not None
        )
        if self.state is GroupState.PREPARING_REBALANCE and self.join_deadline_ms is not None:
            candidates.append(self.join_deadline_ms)
        if self.sync_deadline_ms is not None:
            candidates.append(self.sync_deadline_ms)
        return min(candidates, default=None)

    def static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members of a consumer group subscribe to; None if unknown."""
        if self.consumer is not None:
            return set(self.consumer.subscribed_topic_names())
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics.update(subscribed_topics(m.metadata_for(self.protocol_name)))
            except DecodeError:
                return None
        return topics


@dataclass(slots=True)
class PendingStore:
    group_id: str
    generation: int
    on_success: Callable[[], list[Effect]]
    on_failure: Callable[[ErrorCode], list[Effect]]


class PartitionLoad(enum.Enum):
    LOADING = 1
    LOADED = 2
