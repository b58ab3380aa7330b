"""A consumer group of the next-generation protocol (KIP-848): its members, epochs and
assignments, and the reconciliation of a member's assignment towards the target. Pure data
and functions; the heartbeat logic that drives them is in consumer_heartbeat.py.

Epochs: the *group epoch* rises whenever the group changes in a way that may change the
assignment (a member joins, leaves, changes its subscription; a subscribed topic changes). The
*target assignment*, computed by the server-side assignor for a group epoch, carries that epoch
as the *assignment epoch*. Each member has a *member epoch*: the assignment epoch it has
reconciled to. A member moves to the target epoch only once it has revoked the partitions the
target took from it, and it receives a partition only once the previous owner has released it:
no partition is ever owned by two members at once.

Member states (Kafka's MemberState, stored in the current assignment record):

    STABLE                 reconciled to its member epoch
    UNREVOKED_PARTITIONS   must revoke ``pending_revocation`` first (its epoch is unchanged)
    UNRELEASED_PARTITIONS  at the target epoch, waiting for partitions others still own

Group states: Empty (no member), Assigning (group epoch ahead of the assignment epoch),
Reconciling (a member not yet stable at the assignment epoch), Stable.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

TopicId = uuid.UUID
# topic id -> partitions; never mutated once built.
Assignment = Mapping[TopicId, frozenset[int]]
EMPTY_ASSIGNMENT: Assignment = {}

# Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True, slots=True)
class ClassicMembership:
    """What a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat) inside
    a consumer group brings with it (KIP-848's online migration): its session timeout and the
    protocols (name, subscription metadata) of its last JoinGroup, in its order of preference."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol it is answered with: its first."""
        return self.protocols[0][0]


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """One member, as the group's records keep it."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # Set for a member that uses the classic protocol.
    classic: ClassicMembership | None = None
    # (topic id, partition) -> the member epoch at which the member got the partition, for the
    # partitions it owns (assigned or pending revocation). Kafka 4.3 keeps these to accept an
    # offset commit at an older member epoch for a partition the member already had then.
    assignment_epochs: Mapping[tuple[TopicId, int], int] = field(default_factory=dict)

    def reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def owns(self, topic_id: TopicId, partition: int) -> bool:
        """Whether the partition is assigned to the member or pending its revocation."""
        return partition in self.assigned.get(
            topic_id, frozenset()
        ) or partition in self.pending_revocation.get(topic_id, frozenset())

    def assignment_epoch(self, topic_id: TopicId, partition: int) -> int | None:
        """The epoch at which the member got a partition it owns; None if it does not own it.
        A partition without a recorded epoch counts as assigned at the member epoch, the
        default Kafka 4.3 takes for an assignment record written without the epochs."""
        if not self.owns(topic_id, partition):
            return None
        return self.assignment_epochs.get((topic_id, partition), max(0, self.member_epoch))

    def with_epoch(self, epoch: int, **changes: object) -> ConsumerMember:
        """This member at ``epoch``, the current one becoming the previous one."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """The topics a subscription regex matched when last evaluated (KIP-848)."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclass(slots=True)
class ConsumerGroupData:
    """The consumer-protocol part of a group. Copied before each change, so a change whose
    records cannot be written leaves the group as it was."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    creation_time_ms: int = -1
    # When the target assignment was last computed (0: never), for the assignment interval.
    assignment_timestamp_ms: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    # instance id -> member id (KIP-345 static membership)
    static_members: dict[str, str] = field(default_factory=dict)
    # member id -> its part of the target assignment
    targets: dict[str, Assignment] = field(default_factory=dict)
    # (topic id, partition) -> the member that owns it (assigned or pending revocation)
    owners: dict[tuple[TopicId, int], str] = field(default_factory=dict)
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    # Deadlines (not stored): a member's session, its revocation (rebalance timeout), and a
    # classic member's JoinGroup or SyncGroup that is due (rebalance timeout).
    session_deadlines: dict[str, int] = field(default_factory=dict)
    revocation_deadlines: dict[str, int] = field(default_factory=dict)
    classic_deadlines: dict[str, int] = field(default_factory=dict)

    def copy(self) -> ConsumerGroupData:
        return ConsumerGroupData(
            self.group_epoch,
            self.assignment_epoch,
            self.metadata_hash,
            self.creation_time_ms,
            self.assignment_timestamp_ms,
            dict(self.members),
            dict(self.static_members),
            dict(self.targets),
            dict(self.owners),
            dict(self.regexes),
            dict(self.session_deadlines),
            dict(self.revocation_deadlines),
            dict(self.classic_deadlines),
        )

    def put_member(self, member: ConsumerMember) -> None:
        """Add or replace a member, keeping partition ownership and instance ids in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        for topic_id, partitions in (*member.assigned.items(), *member.pending_revocation.items()):
            for p in partitions:
                self.owners[(topic_id, p)] = member.member_id
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        self.targets.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)
        self.revocation_deadlines.pop(member_id, None)
        self.classic_deadlines.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == (
            member_id
        ):
            del self.static_members[member.instance_id]
        return member

    def _release(self, member: ConsumerMember) -> None:
        for topic_id, partitions in (*member.assigned.items(), *member.pending_revocation.items()):
            for p in partitions:
                if self.owners.get((topic_id, p)) == member.member_id:
                    del self.owners[(topic_id, p)]

    def subscribed_topic_names(self) -> frozenset[str]:
        """The topics the members subscribe to, by name or through a resolved regex."""
        names: set[str] = set()
        for member in self.members.values():
            names |= member.subscribed_topic_names
            if member.subscribed_topic_regex:
                resolved = self.regexes.get(member.subscribed_topic_regex)
                if resolved is not None:
                    names |= resolved.topics
        return frozenset(names)

    def owner_of(self, topic_id: TopicId, partition: int) -> str | None:
        return self.owners.get((topic_id, partition))

    def waits_on_others(self, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still owned by another member."""
        target = self.targets.get(member.member_id, EMPTY_ASSIGNMENT)
        for topic_id, partitions in target.items():
            for p in partitions - member.assigned.get(topic_id, frozenset()):
                owner = self.owners.get((topic_id, p))
                if owner is not None and owner != member.member_id:
                    return True
        return False

    def only_classic_members_besides(self, member_id: str) -> bool:
        """Whether ``member_id`` is the only member that uses the consumer protocol."""
        member = self.members.get(member_id)
        return (
            member is not None
            and member.classic is None
            and all(m.classic is not None for m in self.members.values() if m is not member)
        )

    def state_name(self) -> str:
        """Kafka's ConsumerGroupState name."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    subscribed: frozenset[TopicId],
    owned: Assignment | None,
    owner_of: Callable[[TopicId, int], str | None],
) -> ConsumerMember:
    """The member's next state towards ``target`` at ``target_epoch`` (Kafka's
    CurrentAssignmentBuilder). ``subscribed``: the topics it subscribes to now (others are
    revoked whatever the target says); ``owned``: what the member reported owning in this
    heartbeat (None: not reported); ``owner_of``: the current owner of a partition."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
    elif member.state is MemberState.UNREVOKED_PARTITIONS and _still_owns(
        owned, member.pending_revocation
    ):
        return member
    keep: dict[TopicId, frozenset[int]] = {}
    revoke: dict[TopicId, frozenset[int]] = {}
    to_assign: dict[TopicId, frozenset[int]] = {}
    unreleased = False
    for topic_id in {*target, *member.assigned}:
        wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        current = member.assigned.get(topic_id, frozenset())
        kept = current & wanted
        if kept:
            keep[topic_id] = kept
        if current - kept:
            revoke[topic_id] = current - kept
        pending = member.pending_revocation.get(topic_id, frozenset())
        free = set()
        for p in wanted - kept:
            owner = owner_of(topic_id, p)
            if owner is None or (owner == member.member_id and p in pending):
                free.add(p)
            else:
                unreleased = True
        if free:
            to_assign[topic_id] = frozenset(free)
    if revoke and _still_owns(owned, revoke):
        # The member keeps its epoch until it has revoked what the target took from it; the
        # partitions it keeps or revokes keep the epochs they were assigned at.
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=keep,
            pending_revocation=revoke,
            assignment_epochs=owned_epochs(member, keep, revoke),
        )
    assigned = dict(keep)
    epochs = owned_epochs(member, keep)
    for topic_id, partitions in to_assign.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
        # A partition new to the member is stamped with the epoch it moves to.
        epochs.update(((topic_id, p), target_epoch) for p in partitions)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    if member.member_epoch != target_epoch:
        member = member.with_epoch(target_epoch)
    return replace(
        member, state=state, assigned=assigned, pending_revocation={}, assignment_epochs=epochs
    )


def owned_epochs(
    member: ConsumerMember, *assignments: Assignment
) -> dict[tuple[TopicId, int], int]:
    """The assignment epochs of the partitions in ``assignments``, all owned by ``member``."""
    epochs: dict[tuple[TopicId, int], int] = {}
    for assignment in assignments:
        for topic_id, partitions in assignment.items():
            for p in partitions:
                epoch = member.assignment_epoch(topic_id, p)
                assert epoch is not None
                epochs[(topic_id, p)] = epoch
    return epochs


def _still_owns(owned: Assignment | None, revoking: Assignment) -> bool:
    """Whether the member may still own some of ``revoking``: yes when it did not say."""
    if owned is None:
        return True
    return any(owned.get(topic_id, frozenset()) & parts for topic_id, parts in revoking.items())


def is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(parts <= assigned.get(topic_id, frozenset()) for topic_id, parts in owned.items())
