"""The values exchanged with the group state machine: its settings, the requests it is fed,
the results and effects it returns, and what it describes (DESIGN rule 3: small immutable
values, no IO)."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kbroker.group.offsets_store import GroupValue, Key, Value
from wire.errors import ErrorCode

Protocols = tuple[tuple[str, bytes], ...]
TopicPartition = tuple[str, int]

# Group types as ListGroups v5 names them: the classic protocol, the consumer group protocol
# (KIP-848) and share groups (KIP-932).
CLASSIC_GROUP = "classic"
CONSUMER_GROUP = "consumer"
SHARE_GROUP = "share"
GROUP_TYPES = (CLASSIC_GROUP, CONSUMER_GROUP, SHARE_GROUP)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    # A consumer group of KIP-848's protocol: a new target assignment is due, or members
    # are still reconciling to it.
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"


# The states a rebalance may start from (Kafka's valid previous states of PreparingRebalance).
CAN_REBALANCE = (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)


class MigrationPolicy(enum.Enum):
    """group.consumer.migration.policy (KIP-848's online migration)."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrades(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrades(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    # KIP-394: how long a member that got an id but has not completed a join is kept.
    new_member_join_timeout_ms: int = 300_000
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    # The consumer group protocol (KIP-848): group.consumer.* (a group may override the
    # session timeout, heartbeat interval and assignment interval, see
    # ``ConsumerGroupSettings``).
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_assignment_interval_ms: int = 1_000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: which conversions between the classic and the consumer
    # protocols a group may go through while members are in it.
    consumer_migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL
    # Share groups (KIP-932): group.share.* (session timeout and heartbeat interval may be
    # overridden per group, like the consumer group's).
    share_session_timeout_ms: int = 45_000
    share_heartbeat_interval_ms: int = 5_000
    share_max_size: int = 200


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    # JoinGroup v4+ without an instance id: an unknown member first gets MEMBER_ID_REQUIRED.
    require_known_member_id: bool = True


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinMember, ...] = ()
    # JoinGroup v9+: a static leader rejoining a Stable group need not assign again.
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    """A LeaveGroup's answer: the request's error and one per member leaving."""

    error: ErrorCode
    member_errors: tuple[ErrorCode, ...] = ()


@dataclass(frozen=True, slots=True)
class AdminResult:
    """The answer to an administrative change of a group (share-group offsets)."""

    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    token: int
    result: JoinResult | SyncResult | HeartbeatResult | LeaveResult | AdminResult


@dataclass(frozen=True, slots=True)
class StoreGroup:
    """Persist ``value`` under ``GroupKey(group_id)``, then call
    ``group_stored(store_id, error)``."""

    store_id: int
    group_id: str
    value: GroupValue


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat (KIP-848). ``None`` fields were not sent (unchanged since the
    last heartbeat); ``owned`` is what the member reports owning (topic id -> partitions)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Mapping[uuid.UUID, frozenset[int]] | None
    client_id: str
    client_host: str
    # v1+: the client chooses its member id (KIP-1082); v0: the coordinator does on join.
    client_member_id: bool = True
    # May the member's principal DESCRIBE this topic? None: no authorizer, every topic. The
    # topics a regex matches are filtered with it, as Kafka 4.3 resolves regexes with the
    # request's principal.
    topic_describable: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    """A ShareGroupHeartbeat (KIP-932); ``None`` fields were not sent."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # Sent only when the member must learn it (a full request, or a change).
    assignment: Mapping[uuid.UUID, frozenset[int]] | None = None


@dataclass(frozen=True, slots=True)
class StoreRecords:
    """Persist ``records`` of ``group_id`` (acks=all), then call
    ``records_stored(store_id, error)``."""

    store_id: int
    group_id: str
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class InitializeShareState:
    """Set up the share-partition state of ``partitions`` (topic id, partition) of a share
    group at the share coordinator, at ``state_epoch``, then call ``share_state_initialized``
    with each one's outcome."""

    group_id: str
    partitions: tuple[tuple[uuid.UUID, int], ...]
    state_epoch: int = 0


Record = tuple[Key, Value | None]
Effect = Reply | StoreGroup | StoreRecords | InitializeShareState


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: GroupState
    group_type: str = CLASSIC_GROUP
