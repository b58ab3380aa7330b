"""ConsumerGroupHeartbeat (KIP-848) in the group state machine: members join, heartbeat and
leave, the group epoch rises with each change, the server-side assignor computes the target
assignment, and each member reconciles towards it (consumer_group.py).

``ConsumerGroupProtocol`` is a part of ``GroupStateMachine`` (kbroker/group/state_machine.py),
like ``GroupOffsets``: pure, driven by requests and the clock, returning effects. A change is
computed on a copy of the group and written as Kafka's records (consumer_records.py) with a
``StoreRecords`` effect; the copy replaces the group, and the answer goes out, only once the
records are stored ("persist first, then send"). Meanwhile the group's other heartbeats wait
in order, so each one sees the state the previous one left.

What Kafka's GroupMetadataManager does, as far as a single coordinator goes:

- joining (member epoch 0) needs a rebalance timeout and a subscription (topic names or a
  regex); leaving is epoch -1, a static member leaving epoch -2 (its assignment is kept for
  its session, for the same instance id to take over without a rebalance);
- an epoch the coordinator does not know is FENCED_MEMBER_EPOCH, except the previous one with
  owned partitions within the current assignment (the answer to the last heartbeat was lost);
- a static member's instance id held by a live member is UNRELEASED_INSTANCE_ID, another
  member id for it FENCED_INSTANCE_ID; a full group GROUP_MAX_SIZE_REACHED; an unknown
  assignor UNSUPPORTED_ASSIGNOR; a regex RE2 refuses INVALID_REGULAR_EXPRESSION;
- a member is fenced (removed, the group epoch bumped) when its session times out, or when it
  keeps partitions it must revoke past its rebalance timeout;
- the answer carries the assignment when the request was a full one (a join, or every field
  set) or the member's assignment changed.
"""

from __future__ import annotations

import hashlib
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from kbroker.group.assignors import ASSIGNORS, MemberSpec, TopicSpec
from kbroker.group.consumer_group import (
    EMPTY_ASSIGNMENT,
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroupData,
    ConsumerMember,
    MemberState,
    ResolvedRegex,
    TopicId,
    is_subset,
    owned_epochs,
    reconcile,
)
from kbroker.group.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from kbroker.group.consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    LoadedConsumerGroup,
    MemberMetadataValue,
    RegexKey,
    RegexValue,
    TargetEpochValue,
    TargetMemberValue,
)
from kbroker.group.events import (
    CONSUMER_GROUP,
    ConsumerHeartbeat,
    Effect,
    GroupConfig,
    GroupState,
    HeartbeatResult,
    JoinResult,
    LeaveResult,
    Record,
    Reply,
    StoreRecords,
    SyncResult,
)
from kbroker.group.model import Group
from kbroker.group.offsets_store import GroupKey
from kbroker.regex import InvalidRegex, Regex
from wire.errors import ErrorCode

if TYPE_CHECKING:
    import uuid


class TopicsView(Protocol):
    """What the coordinator knows of the cluster's topics (the shell builds it from the
    metadata). ``version`` changes whenever a topic is created, deleted or changed."""

    @property
    def version(self) -> int: ...

    def topic(self, name: str) -> TopicSpec | None: ...

    def name_of(self, topic_id: TopicId) -> str | None: ...

    def names(self) -> Iterable[str]:
        """Every topic a regex may match (internal topics excluded)."""
        ...


class NoTopics:
    """A TopicsView of a cluster without topics."""

    version = 0

    def topic(self, name: str) -> TopicSpec | None:
        return None

    def name_of(self, topic_id: TopicId) -> str | None:
        return None

    def names(self) -> Iterable[str]:
        return ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """A group's session timeout, heartbeat interval and assignment interval: the broker's
    group.consumer.* (or group.share.*) settings, or the group's own
    (consumer.session.timeout.ms, consumer.heartbeat.interval.ms,
    consumer.assignment.interval.ms, set on the GROUP config resource). Share groups assign
    at once (0): see kbroker/group/group_configs.py."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    assignment_interval_ms: int = 0


def target_assignment_due(last_ms: int, interval_ms: int, now_ms: int) -> bool:
    """Whether a group whose epoch is ahead of its target assignment may compute a new one
    now (KIP-1263): at most once per assignment interval, so a burst of joins, leaves or
    subscription changes costs one assignor run and the members see one move rather than
    many. A group that never computed one, or an interval of 0, computes at once. Nothing is
    scheduled for a deferred one: the first heartbeat after the interval computes it, as in
    Kafka 4.3."""
    return last_ms == 0 or interval_ms == 0 or now_ms >= last_ms + interval_ms


@dataclass(slots=True)
class _PendingChange:
    """Records being stored for a group; ``on_stored`` installs the change and answers."""

    group_id: str
    on_stored: Callable[[], list[Effect]]
    on_failed: Callable[[ErrorCode], list[Effect]]
    # The consumer group state it installs, if any.
    data: ConsumerGroupData | None


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    """What ConsumerGroupDescribe answers for one group: each member with its target."""

    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = ""
    members: tuple[tuple[ConsumerMember, Assignment], ...] = ()


class HeartbeatError(Exception):
    """A heartbeat refused, with the error to answer."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


# A request waiting behind a group's write: how to handle it, and how to refuse it.
Handle = Callable[[], list[Effect]]
Drop = Callable[[ErrorCode], list[Effect]]


def _failed(
    result: HeartbeatResult | JoinResult | LeaveResult, error: ErrorCode
) -> HeartbeatResult | JoinResult | LeaveResult:
    """The answer to a request whose records could not be stored."""
    if isinstance(result, HeartbeatResult):
        return HeartbeatResult(error, member_id=result.member_id)
    if isinstance(result, JoinResult):
        return JoinResult(error, result.member_id)
    return LeaveResult(error)


def _full_request(req: ConsumerHeartbeat) -> bool:
    """A request with every optional field set: the member (re)states everything, and gets its
    whole assignment back (Kafka's rule)."""
    return req.member_epoch == JOIN_EPOCH or (
        req.rebalance_timeout_ms != -1
        and req.subscribed_topic_names is not None
        and req.owned is not None
    )


def metadata_value(member: ConsumerMember) -> MemberMetadataValue:
    return MemberMetadataValue(
        member.instance_id,
        member.rack_id,
        member.client_id,
        member.client_host,
        tuple(sorted(member.subscribed_topic_names)),
        member.subscribed_topic_regex,
        member.rebalance_timeout_ms,
        member.server_assignor,
        member.classic,
    )


def sorted_assignment(assignment: Assignment) -> dict[TopicId, tuple[int, ...]]:
    return {t: tuple(sorted(p)) for t, p in assignment.items() if p}


def assignment_value(member: ConsumerMember) -> CurrentAssignmentValue:
    assigned = sorted_assignment(member.assigned)
    pending = sorted_assignment(member.pending_revocation)
    epochs = owned_epochs(member, member.assigned, member.pending_revocation)
    return CurrentAssignmentValue(
        member.member_epoch,
        member.previous_member_epoch,
        int(member.state),
        assigned,
        pending,
        {t: tuple(epochs[(t, p)] for p in indexes) for t, indexes in assigned.items()},
        {t: tuple(epochs[(t, p)] for p in indexes) for t, indexes in pending.items()},
    )


def loaded_assignment_epochs(
    current: CurrentAssignmentValue,
) -> dict[tuple[TopicId, int], int]:
    """A member's assignment epochs from its record; a topic recorded without them takes the
    member epoch (floored at 0), as Kafka 4.3 loads such a record."""
    default = max(0, current.member_epoch)
    epochs: dict[tuple[TopicId, int], int] = {}
    for partitions, recorded in (
        (current.assigned, current.assigned_epochs),
        (current.pending_revocation, current.pending_revocation_epochs),
    ):
        for topic_id, indexes in partitions.items():
            topic_epochs = recorded.get(topic_id, (default,) * len(indexes))
            epochs.update(((topic_id, p), e) for p, e in zip(indexes, topic_epochs, strict=True))
    return epochs


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    return [
        (ConsumerMemberKey(CURRENT_ASSIGNMENT, group_id, member_id), None),
        (ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
        (ConsumerMemberKey(MEMBER_METADATA, group_id, member_id), None),
    ]


class ConsumerGroupProtocol:
    """The consumer group protocol half of the group state machine."""

    config: GroupConfig
    _clock: Callable[[], int]
    _groups: dict[str, Group]
    _new_uuid: Callable[[], str]
    rebalances: dict[str, int]

    if TYPE_CHECKING:

        def coordinator_error(self, group_id: str) -> ErrorCode | None: ...

        def _schedule(self, group: Group) -> None: ...

        # Online migration between the protocols (kbroker/group/migration.py).
        def _may_upgrade(self, group: Group) -> bool: ...

        def _upgrade(self, group: Group, records: list[Record]) -> ConsumerGroupData: ...

        def _may_downgrade(self, data: ConsumerGroupData, leaving_id: str) -> bool: ...

        def _downgrade(
            self,
            group: Group,
            data: ConsumerGroupData,
            leaving_id: str | None,
            records: list[Record],
            answer: Callable[[], list[Effect]],
            refuse: Callable[[ErrorCode], list[Effect]],
        ) -> StoreRecords: ...

    def _init_consumer_protocol(
        self, settings: Callable[[str], ConsumerGroupSettings] | None, topics: TopicsView
    ) -> None:
        default = ConsumerGroupSettings(
            self.config.consumer_session_timeout_ms,
            self.config.consumer_heartbeat_interval_ms,
            self.config.consumer_assignment_interval_ms,
        )
        self._consumer_settings = settings or (lambda _group_id: default)
        self._topics = topics
        # topic name -> the spec last seen and what it adds to a group's metadata hash: the
        # view hands out the same spec until the topic changes, and hashing 1,000 partitions'
        # racks on every heartbeat cost more than the rest of the heartbeat (KIP-1101 has the
        # coordinator cache topic hashes likewise).
        self._topic_hash_inputs: dict[str, tuple[TopicSpec, bytes]] = {}
        self._changes: dict[int, _PendingChange] = {}
        self._next_change_id = 0
        # group id -> the group's latest change being stored, and the requests waiting behind
        # it (each handled in turn once it is stored, so that each sees the state the last one
        # left). ConsumerGroupHeartbeats do not wait: they build on the state being stored.
        self._writing: dict[str, int] = {}
        self._waiting: dict[str, deque[tuple[Handle, Drop]]] = {}
        # group id -> the error of a change that failed while later ones, built on it, were
        # still being stored: they fail with it.
        self._failed_chains: dict[str, ErrorCode] = {}

    def _wait_for_write(self, group_id: str, handle: Handle, drop: Drop) -> bool:
        """Queue a request behind the group's change being stored (``drop`` answers it if
        the group goes elsewhere meanwhile); False if no change is being stored."""
        if group_id not in self._writing:
            return False
        self._waiting.setdefault(group_id, deque()).append((handle, drop))
        return True

    # --- ConsumerGroupHeartbeat -----------------------------------------------------------

    def consumer_heartbeat(self, token: int, req: ConsumerHeartbeat) -> list[Effect]:
        if not self._may_pipeline(req.group_id) and self._wait_for_write(
            req.group_id,
            lambda: self.consumer_heartbeat(token, req),
            lambda error: [Reply(token, HeartbeatResult(error))],
        ):
            return []
        try:
            return self._heartbeat(token, req)
        except HeartbeatError as exc:
            return [Reply(token, HeartbeatResult(exc.error, exc.message))]

    def _may_pipeline(self, group_id: str) -> bool:
        """Whether a heartbeat may be handled now, on top of the group's consumer state still
        being stored, rather than wait for that write. As Kafka's coordinator runtime, which
        applies each request to the state its earlier writes left, writes its records and
        answers once they are committed (reverting to the committed state if a write fails):
        waiting for each write before handling the next request serves one heartbeat per
        write, too few for a group of 50 members heartbeating each second on a busy broker.
        Not behind other kinds of requests already waiting (they keep their order), nor on a
        change that does not install a consumer group state."""
        return self._pending_data(group_id) is not None and not self._waiting.get(group_id)

    def _validate(self, req: ConsumerHeartbeat) -> None:
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.INVALID_REQUEST, message)

        if not req.group_id:
            raise HeartbeatError(ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        if req.member_epoch > JOIN_EPOCH or req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
        elif req.member_epoch == JOIN_EPOCH:
            if req.client_member_id and not req.member_id:
                raise invalid("MemberId can't be empty.")
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or any(req.owned.values()):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                    "(re-)joining."
                )
        else:
            raise invalid(f"MemberEpoch is invalid: {req.member_epoch}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            raise invalid("InstanceId can't be null when leaving as a static member.")
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            raise HeartbeatError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.consumer_assignors)}.",
            )
        if req.subscribed_topic_regex:
            try:
                Regex(req.subscribed_topic_regex)
            except InvalidRegex as exc:
                raise HeartbeatError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                    f"expression: {exc.reason}.",
                ) from None

    def _consumer_group(
        self, group_id: str, create: bool, records: list[Record]
    ) -> tuple[Group, ConsumerGroupData]:
        """The group and a copy of its consumer-protocol state to change. A member joining
        turns an empty classic group (offsets only) into a consumer group, and a classic group
        with members into one when the migration policy allows (Kafka's rules)."""
        group = self._groups.get(group_id)
        if group is None:
            if not create:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found."
                )
            group = Group(group_id, GroupState.EMPTY, self._clock())
            self._groups[group_id] = group
            return group, ConsumerGroupData()
        latest = self._latest_data(group)
        if latest is not None:
            return group, latest.copy()
        if not group.members and group.state is GroupState.EMPTY:
            if not create:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found."
                )
            if group.generation > 0:
                records.append((GroupKey(group_id), None))
            return group, ConsumerGroupData()
        if not create or not self._may_upgrade(group):
            raise HeartbeatError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
            )
        return group, self._upgrade(group, records)

    def _heartbeat(self, token: int, req: ConsumerHeartbeat) -> list[Effect]:
        self._validate(req)
        error = self.coordinator_error(req.group_id)
        if error is not None:
            raise HeartbeatError(error)
        now = self._clock()
        records: list[Record] = []
        group, data = self._consumer_group(req.group_id, req.member_epoch == JOIN_EPOCH, records)
        if data.creation_time_ms == -1:
            data.creation_time_ms = now
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(token, group, data, req, records)
        member_id = req.member_id or self._new_uuid()
        member = self._member_for(data, req, member_id, records)
        settings = self._consumer_settings(req.group_id)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=(
                req.server_assignor if req.server_assignor is not None else member.server_assignor
            ),
            subscribed_topic_names=(
                frozenset(req.subscribed_topic_names)
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (req.subscribed_topic_regex or None)
                if req.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=req.client_id,
            client_host=req.client_host,
            # A member that heartbeats this way uses the consumer protocol (now).
            classic=None,
        )
        latest = self._latest_data(group)
        stored = latest.members if latest is not None else {}
        reconciled = self._update_member(
            req.group_id,
            data,
            member,
            updated,
            req.owned,
            updated.member_id not in stored,
            records,
            topic_describable=req.topic_describable,
        )
        data.session_deadlines[reconciled.member_id] = now + settings.session_timeout_ms
        # A request from the member's previous epoch is accepted because the answer that moved
        # it on was lost; that answer may have carried its new partitions, and a client that
        # timed it out need not send a full request next (librdkafka 2.16 times a heartbeat out
        # after one heartbeat interval and then only acknowledges), so they go out again.
        send = (
            _full_request(req)
            or req.member_epoch < member.member_epoch
            or reconciled.assigned != member.assigned
        )
        result = HeartbeatResult(
            ErrorCode.NONE,
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            assignment=reconciled.assigned if send else None,
        )
        return self._commit(token, group, data, records, result)

    def _update_member(
        self,
        group_id: str,
        data: ConsumerGroupData,
        member: ConsumerMember,
        updated: ConsumerMember,
        owned: Assignment | None,
        new_here: bool,
        records: list[Record],
        topic_describable: Callable[[str], bool] | None = None,
    ) -> ConsumerMember:
        """Kafka's three steps for a member that heartbeats (or, with the classic protocol,
        joins): store what changed of it, bumping the group epoch when the subscriptions or
        their topics changed; compute a new target assignment when the group epoch is ahead;
        reconcile the member towards its target. ``owned``: what it says it owns (None: not
        said); ``new_here``: it has no records yet; ``topic_describable``: the topics regexes
        resolved now may match (None: all). Returns the member as reconciled."""
        now = self._clock()
        bump = data.group_epoch == 0
        if new_here or metadata_value(updated) != metadata_value(member):
            records.append(
                (
                    ConsumerMemberKey(MEMBER_METADATA, group_id, updated.member_id),
                    metadata_value(updated),
                )
            )
            bump |= (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        brought = _regex_brought(data, member, updated)
        data.put_member(updated)
        bump |= self._resolve_regexes(group_id, data, now, records, topic_describable, brought)
        metadata_hash = self._metadata_hash(data)
        if metadata_hash != data.metadata_hash:
            data.metadata_hash = metadata_hash
            bump = True
        if bump:
            self._bump_epoch(group_id, data, records)
        if data.group_epoch > data.assignment_epoch and target_assignment_due(
            data.assignment_timestamp_ms,
            self._consumer_settings(group_id).assignment_interval_ms,
            now,
        ):
            self._assign(group_id, data, records, now)
        before = data.members[updated.member_id]
        reconciled = reconcile(
            before,
            data.assignment_epoch,
            data.targets.get(before.member_id, EMPTY_ASSIGNMENT),
            subscribed_ids(before, data, self._topics),
            owned,
            data.owner_of,
        )
        if reconciled != before or new_here:
            data.put_member(reconciled)
            records.append(
                (
                    ConsumerMemberKey(CURRENT_ASSIGNMENT, group_id, reconciled.member_id),
                    assignment_value(reconciled),
                )
            )
        self._track_revocation(data, reconciled, member, now)
        return reconciled

    def _metadata_hash(self, data: ConsumerGroupData) -> int:
        """A hash of what the subscribed topics are (ids, partition counts, racks): when it
        changes, so may the assignment (KIP-1101's metadata hash)."""
        names = set()
        for member in data.members.values():
            names |= _subscribed_names(member, data)
        digest = hashlib.blake2b(digest_size=8)
        for name in sorted(names):
            spec = self._topics.topic(name)
            if spec is None:
                self._topic_hash_inputs.pop(name, None)
                continue
            cached = self._topic_hash_inputs.get(name)
            if cached is None or cached[0] is not spec:
                cached = (spec, _topic_hash_input(name, spec))
                self._topic_hash_inputs[name] = cached
            digest.update(cached[1])
        return int.from_bytes(digest.digest(), "big", signed=True) or 1

    def _bump_epoch(self, group_id: str, data: ConsumerGroupData, records: list[Record]) -> None:
        """A new group epoch: a rebalance. Counted as it is decided, as Kafka records its
        consumer-group-rebalance sensor next to the epoch record it writes."""
        data.group_epoch += 1
        self.rebalances[CONSUMER_GROUP] += 1
        records.append(
            (
                ConsumerGroupKey(GROUP_METADATA, group_id),
                GroupEpochValue(data.group_epoch, data.metadata_hash, data.creation_time_ms),
            )
        )

    def _member_for(
        self, data: ConsumerGroupData, req: ConsumerHeartbeat, member_id: str, records: list[Record]
    ) -> ConsumerMember:
        """The member this heartbeat is from: a new one on a join, the static member it
        replaces, or the existing one once its epoch is checked."""
        joining = req.member_epoch == JOIN_EPOCH
        if req.instance_id is not None:
            static_id = data.static_members.get(req.instance_id)
            static = data.members.get(static_id) if static_id is not None else None
            if joining and static is not None and static.member_id != member_id:
                # A classic member's instance may come back with the consumer protocol at any
                # time (a rolling upgrade); a consumer one only once it has left.
                if static.member_epoch != STATIC_LEAVE_EPOCH and static.classic is None:
                    raise HeartbeatError(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {req.instance_id} cannot "
                        f"join the group because the instance id is owned by "
                        f"{static.member_id} member.",
                    )
                # The instance restarted within its session: it takes over the assignment
                # of the member it replaces, without a rebalance.
                return self._replace_static(req.group_id, data, static, member_id, records)
            if not joining:
                if static is None:
                    raise HeartbeatError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Instance id {req.instance_id} is unknown.",
                    )
                if static.member_id != member_id:
                    raise HeartbeatError(
                        ErrorCode.FENCED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {req.instance_id} was "
                        f"fenced by member {static.member_id}.",
                    )
        existing = data.members.get(member_id)
        if existing is None:
            if not joining:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {req.group_id}.",
                )
            if len(data.members) >= self.config.consumer_max_size:
                raise HeartbeatError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of "
                    f"{self.config.consumer_max_size} members.",
                )
            return ConsumerMember(member_id)
        if joining:
            # A known member rejoining (epoch 0) is answered with its current state, as Kafka
            # 4.3 does: it gets its whole assignment back.
            return existing
        if req.member_epoch > existing.member_epoch or (
            req.member_epoch < existing.member_epoch
            and (
                req.member_epoch != existing.previous_member_epoch
                or not is_subset(req.owned, existing.assigned)
            )
        ):
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a member epoch ({req.member_epoch}) other "
                f"than the one known by the group coordinator ({existing.member_epoch}). "
                "The member must abandon all its partitions and rejoin.",
            )
        return existing

    @staticmethod
    def _replace_static(
        group_id: str,
        data: ConsumerGroupData,
        static: ConsumerMember,
        member_id: str,
        records: list[Record],
    ) -> ConsumerMember:
        """A new member id for a static member's instance: it takes over the assignment."""
        target = data.targets.get(static.member_id)
        data.remove_member(static.member_id)
        records.extend(member_tombstones(group_id, static.member_id))
        replaced = replace(static, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        data.put_member(replaced)
        if target is not None:
            data.targets[member_id] = target
            records.append(
                (
                    ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                    TargetMemberValue(sorted_assignment(target)),
                )
            )
        return replaced

    def _leave(
        self,
        token: int,
        group: Group,
        data: ConsumerGroupData,
        req: ConsumerHeartbeat,
        records: list[Record],
    ) -> list[Effect]:
        member = data.members.get(req.member_id)
        if req.instance_id is not None:
            static_id = data.static_members.get(req.instance_id)
            if static_id is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            if static_id != req.member_id:
                raise HeartbeatError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was "
                    f"fenced by member {static_id}.",
                )
        if member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
            )
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # A static member leaving keeps its assignment for its session: the same instance
            # may come back without a rebalance.
            left = replace(member, member_epoch=STATIC_LEAVE_EPOCH)
            data.put_member(left)
            records.append(
                (
                    ConsumerMemberKey(CURRENT_ASSIGNMENT, req.group_id, member.member_id),
                    assignment_value(left),
                )
            )
            data.revocation_deadlines.pop(member.member_id, None)
        result = HeartbeatResult(
            ErrorCode.NONE,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            heartbeat_interval_ms=0,
        )
        if req.member_epoch == LEAVE_EPOCH:
            if self._may_downgrade(data, member.member_id):

                def answer() -> list[Effect]:
                    return [Reply(token, result)]

                def refuse(error: ErrorCode) -> list[Effect]:
                    return [Reply(token, HeartbeatResult(error, member_id=result.member_id))]

                return [self._downgrade(group, data, member.member_id, records, answer, refuse)]
            self._fence(req.group_id, data, member.member_id, records)
        return self._commit(token, group, data, records, result)

    def _fence(
        self, group_id: str, data: ConsumerGroupData, member_id: str, records: list[Record]
    ) -> None:
        """Remove a member: its partitions go back to the assignor at the next heartbeat; a
        regex only it subscribed to is deleted with it (Kafka writes the regex's tombstone
        with the member's), so the next member to bring it waits for a new resolution."""
        data.remove_member(member_id)
        records.extend(member_tombstones(group_id, member_id))
        _drop_unused_regexes(group_id, data, records)
        self._bump_epoch(group_id, data, records)

    def _track_revocation(
        self, data: ConsumerGroupData, now_member: ConsumerMember, was: ConsumerMember, now: int
    ) -> None:
        """A member must revoke within its rebalance timeout of being asked to."""
        member_id = now_member.member_id
        if now_member.state is MemberState.UNREVOKED_PARTITIONS:
            if was.state is not MemberState.UNREVOKED_PARTITIONS or (
                member_id not in data.revocation_deadlines
            ):
                data.revocation_deadlines[member_id] = now + max(now_member.rebalance_timeout_ms, 0)
        else:
            data.revocation_deadlines.pop(member_id, None)

    # --- target assignment ----------------------------------------------------------------

    def _assign(
        self, group_id: str, data: ConsumerGroupData, records: list[Record], now: int
    ) -> None:
        """A new target assignment for the group epoch, with the preferred assignor."""
        assignor = ASSIGNORS[_preferred_assignor(data, self.config.consumer_assignors)]
        specs: dict[TopicId, TopicSpec] = {}
        members: dict[str, MemberSpec] = {}
        for m in data.members.values():
            subscribed = subscribed_ids(m, data, self._topics, specs)
            members[m.member_id] = MemberSpec(
                m.member_id,
                m.instance_id,
                m.rack_id,
                subscribed,
                data.targets.get(m.member_id, EMPTY_ASSIGNMENT),
            )
        result = assignor.assign(members, specs)
        for member_id in members:
            target = {t: frozenset(p) for t, p in result.get(member_id, {}).items() if p}
            if target != data.targets.get(member_id):
                data.targets[member_id] = target
                records.append(
                    (
                        ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                        TargetMemberValue(sorted_assignment(target)),
                    )
                )
        data.assignment_epoch = data.group_epoch
        data.assignment_timestamp_ms = now
        records.append(
            (
                ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group_id),
                TargetEpochValue(data.assignment_epoch, now),
            )
        )

    def _resolve_regexes(
        self,
        group_id: str,
        data: ConsumerGroupData,
        now: int,
        records: list[Record],
        topic_describable: Callable[[str], bool] | None,
        brought: str | None = None,
    ) -> bool:
        """Evaluate the members' regexes that are new or older than the topics; drop those
        no member uses. True when what they match changed. A regex matches only topics
        `topic_describable` allows: Kafka 4.3 resolves a group's regexes with the principal
        of the heartbeat that needed it, so that no member learns of a topic it may not
        describe through its assignment.

        ``brought``: a regex the heartbeating member is the first to subscribe to. Kafka
        resolves such a regex in a task of its own, after the heartbeat that brought it (a
        new regex only requires a refresh, GroupMetadataManager.maybeUpdateRegularExpressions),
        so that heartbeat assigns the member its topic names alone and the regex's topics come
        with a later heartbeat, after a group epoch bump. Here the group's next heartbeat
        resolves it: librdkafka's 0045 expects the two assignments one after the other."""
        used = {m.subscribed_topic_regex for m in data.members.values()}
        changed = _drop_unused_regexes(group_id, data, records)
        names: list[str] | None = None
        for regex in sorted(r for r in used if r):
            known = data.regexes.get(regex)
            if known is not None and known.version == self._topics.version:
                continue
            if known is None and regex == brought:
                continue
            if names is None:
                names = sorted(
                    n
                    for n in self._topics.names()
                    if topic_describable is None or topic_describable(n)
                )
            pattern = Regex(regex)
            matched = frozenset(n for n in names if pattern.matches(n))
            version = self._topics.version
            data.regexes[regex] = ResolvedRegex(matched, version, now)
            records.append(
                (RegexKey(group_id, regex), RegexValue(tuple(sorted(matched)), version, now))
            )
            changed |= known is None or known.topics != matched
        return changed

    # --- persistence ----------------------------------------------------------------------

    def _commit(
        self,
        token: int,
        group: Group,
        data: ConsumerGroupData,
        records: list[Record],
        result: HeartbeatResult | JoinResult | LeaveResult,
    ) -> list[Effect]:
        """Install ``data`` and answer ``result`` once ``records`` are stored."""
        if not records:
            return [*self._install(group, data), Reply(token, result)]

        def stored() -> list[Effect]:
            return [*self._install(group, data), Reply(token, result)]

        def failed(error: ErrorCode) -> list[Effect]:
            return [Reply(token, _failed(result, error))]

        return [self._store_change(group.group_id, records, stored, failed, data)]

    def _store_change(
        self,
        group_id: str,
        records: list[Record],
        on_stored: Callable[[], list[Effect]],
        on_failed: Callable[[ErrorCode], list[Effect]],
        data: ConsumerGroupData | None = None,
    ) -> StoreRecords:
        self._next_change_id += 1
        change_id = self._next_change_id
        self._changes[change_id] = _PendingChange(group_id, on_stored, on_failed, data)
        self._writing[group_id] = change_id
        return StoreRecords(change_id, group_id, tuple(records))

    def _latest_data(self, group: Group) -> ConsumerGroupData | None:
        """The group's consumer state as its last change being stored leaves it, else as
        stored."""
        pending = self._pending_data(group.group_id)
        return pending if pending is not None else group.consumer

    def _pending_data(self, group_id: str) -> ConsumerGroupData | None:
        """The consumer group state the group's change being stored will install."""
        change_id = self._writing.get(group_id)
        return self._changes[change_id].data if change_id is not None else None

    def records_stored(self, store_id: int, error: ErrorCode) -> list[Effect]:
        """The outcome of a ``StoreRecords`` effect. The group takes the new state only once
        stored; then the requests that waited go on, in order."""
        change = self._changes.pop(store_id, None)
        if change is None:
            return []
        group_id = change.group_id
        last_of_chain = self._writing.get(group_id) == store_id
        if last_of_chain:
            del self._writing[group_id]
        effects: list[Effect]
        group = self._groups.get(group_id)
        if group_id in self._failed_chains:
            error = self._failed_chains[group_id]
        elif error == ErrorCode.NONE and group is None:
            error = ErrorCode.NOT_COORDINATOR
        if error == ErrorCode.NONE and group is not None:
            effects = change.on_stored()
            self._schedule(group)
        else:
            # Heartbeats handled on top of this change built on what it installs: they fail
            # as well (the stores of a group report in order).
            if not last_of_chain:
                self._failed_chains[group_id] = error
            effects = change.on_failed(error)
        if last_of_chain:
            self._failed_chains.pop(group_id, None)
        waiting = self._waiting.pop(group_id, deque())
        while waiting and group_id not in self._writing:
            handle, _ = waiting.popleft()
            effects.extend(handle())
        if waiting:
            self._waiting[group_id] = waiting
        return effects

    def _install(self, group: Group, data: ConsumerGroupData) -> list[Effect]:
        """``data`` becomes the group's state. A classic group's members waiting for their
        JoinGroup or SyncGroup are told to join again (now as members of a consumer group)."""
        effects: list[Effect] = []
        if group.consumer is None:
            # The group was classic (or new): what it had of the classic protocol is gone.
            for member in group.members.values():
                if member.join_token is not None:
                    effects.append(
                        Reply(
                            member.join_token,
                            JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id),
                        )
                    )
                if member.sync_token is not None:
                    effects.append(
                        Reply(member.sync_token, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                    )
            group.members.clear()
            group.static_members.clear()
            group.pending_members.clear()
            group.pending_sync.clear()
            group.leader_id = None
            group.protocol_name = None
            group.join_deadline_ms = None
            group.sync_deadline_ms = None
        group.consumer = data
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        state = GroupState(data.state_name())
        if state is not group.state:
            group.transition(state, self._clock())
        self._schedule(group)
        return effects

    def _drop_waiting(self, group_id: str) -> list[Effect]:
        """The group is no longer ours: requests waiting for it go to the new coordinator."""
        effects: list[Effect] = []
        for _, drop in self._waiting.pop(group_id, deque()):
            effects.extend(drop(ErrorCode.NOT_COORDINATOR))
        return effects

    # --- the clock ------------------------------------------------------------------------

    def _expire_consumer(self, group: Group, now: int, effects: list[Effect]) -> None:
        """Fence the members whose session ended, that kept partitions to revoke past their
        rebalance timeout, or (classic members) did not join or sync in time."""
        data = group.consumer
        if data is None or group.group_id in self._writing:
            return
        expired = sorted(
            {m for m, d in data.session_deadlines.items() if d <= now}
            | {m for m, d in data.revocation_deadlines.items() if d <= now}
            | {m for m, d in data.classic_deadlines.items() if d <= now}
        )
        if not expired:
            return
        changed = data.copy()
        records: list[Record] = []
        for member_id in expired:
            if member_id not in changed.members:
                changed.session_deadlines.pop(member_id, None)
                changed.revocation_deadlines.pop(member_id, None)
                changed.classic_deadlines.pop(member_id, None)
            elif self._may_downgrade(changed, member_id):
                effects.append(
                    self._downgrade(group, changed, member_id, records, list, lambda _error: [])
                )
                return
            else:
                self._fence(group.group_id, changed, member_id, records)
        if not records:
            effects.extend(self._install(group, changed))
            return

        def stored() -> list[Effect]:
            return self._install(group, changed)

        effects.append(
            self._store_change(group.group_id, records, stored, lambda _error: [], changed)
        )

    # --- loading --------------------------------------------------------------------------

    def _load_consumer_group(self, group: Group, loaded: LoadedConsumerGroup) -> None:
        """A consumer group replayed from its records: members keep their epochs and
        assignments, and get a full session (and rebalance) timeout from now."""
        now = self._clock()
        data = ConsumerGroupData()
        if loaded.epoch is not None:
            data.group_epoch = loaded.epoch.epoch
            data.metadata_hash = loaded.epoch.metadata_hash
            data.creation_time_ms = loaded.epoch.creation_time_ms
        if loaded.target_epoch is not None:
            data.assignment_epoch = loaded.target_epoch.assignment_epoch
            data.assignment_timestamp_ms = loaded.target_epoch.assignment_timestamp
        settings = self._consumer_settings(group.group_id)
        for member_id, meta in loaded.members.items():
            current = loaded.current.get(member_id)
            member = ConsumerMember(
                member_id,
                meta.instance_id,
                meta.rack_id,
                meta.client_id,
                meta.client_host,
                frozenset(meta.subscribed_topic_names),
                meta.subscribed_topic_regex,
                meta.rebalance_timeout_ms,
                meta.server_assignor,
                classic=meta.classic,
            )
            if current is not None:
                member = replace(
                    member,
                    member_epoch=current.member_epoch,
                    previous_member_epoch=current.previous_member_epoch,
                    state=MemberState(current.state),
                    assigned={t: frozenset(p) for t, p in current.assigned.items()},
                    pending_revocation={
                        t: frozenset(p) for t, p in current.pending_revocation.items()
                    },
                    assignment_epochs=loaded_assignment_epochs(current),
                )
            data.put_member(member)
            session_timeout_ms = (
                meta.classic.session_timeout_ms
                if meta.classic is not None
                else settings.session_timeout_ms
            )
            data.session_deadlines[member_id] = now + session_timeout_ms
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                data.revocation_deadlines[member_id] = now + max(member.rebalance_timeout_ms, 0)
        for member_id, target in loaded.targets.items():
            if member_id in data.members:
                data.targets[member_id] = {t: frozenset(p) for t, p in target.partitions.items()}
        for regex, value in loaded.regexes.items():
            data.regexes[regex] = ResolvedRegex(
                frozenset(value.topics), value.version, value.timestamp
            )
        group.consumer = data
        group.protocol_type = "consumer"
        group.state = GroupState(data.state_name())

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """ConsumerGroupDescribe: the group's epochs, assignor and members, or the error."""
        error = self.coordinator_error(group_id)
        if error is not None:
            return ConsumerGroupDescription(group_id, error)
        group = self._groups.get(group_id)
        if group is None:
            return ConsumerGroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            )
        data = group.consumer
        if data is None:
            return ConsumerGroupDescription(
                group_id,
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Group {group_id} is not a consumer group.",
            )
        return ConsumerGroupDescription(
            group_id,
            ErrorCode.NONE,
            state=data.state_name(),
            group_epoch=data.group_epoch,
            assignment_epoch=data.assignment_epoch,
            assignor=_preferred_assignor(data, self.config.consumer_assignors),
            members=tuple(
                (m, data.targets.get(m.member_id, EMPTY_ASSIGNMENT)) for m in data.members.values()
            ),
        )

    def consumer_group_records(self, group: Group) -> list[Record]:
        """Tombstones for every record of a consumer group (DeleteGroups)."""
        data = group.consumer
        if data is None:
            return []
        records: list[Record] = []
        for member_id in data.members:
            records.extend(member_tombstones(group.group_id, member_id))
        records.extend((RegexKey(group.group_id, regex), None) for regex in data.regexes)
        records.append((ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group.group_id), None))
        records.append((ConsumerGroupKey(GROUP_METADATA, group.group_id), None))
        return records


def _preferred_assignor(data: ConsumerGroupData, configured: tuple[str, ...]) -> str:
    """The assignor most members asked for, else the first configured (Kafka's rule)."""
    asked = Counter(m.server_assignor for m in data.members.values() if m.server_assignor)
    if asked:
        return max(sorted(asked), key=lambda name: asked[name])
    return configured[0]


def _subscribed_names(member: ConsumerMember, data: ConsumerGroupData) -> frozenset[str]:
    names = member.subscribed_topic_names
    if member.subscribed_topic_regex:
        resolved = data.regexes.get(member.subscribed_topic_regex)
        if resolved is not None:
            names = names | resolved.topics
    return names


def _drop_unused_regexes(group_id: str, data: ConsumerGroupData, records: list[Record]) -> bool:
    """Delete the resolved regexes no member subscribes to any more; True if any was."""
    used = {m.subscribed_topic_regex for m in data.members.values()}
    unused = [regex for regex in data.regexes if regex not in used]
    for regex in unused:
        del data.regexes[regex]
        records.append((RegexKey(group_id, regex), None))
    return bool(unused)


def _regex_brought(
    data: ConsumerGroupData, member: ConsumerMember, updated: ConsumerMember
) -> str | None:
    """The regex `updated` subscribes to when it changed it and no other member of the group
    subscribes to it yet (Kafka: numSubscribedMembers(newSubscribedTopicRegex) == 0)."""
    regex = updated.subscribed_topic_regex
    if not regex or regex == member.subscribed_topic_regex:
        return None
    shared = any(
        m.member_id != updated.member_id and m.subscribed_topic_regex == regex
        for m in data.members.values()
    )
    return None if shared else regex


def subscribed_ids(
    member: ConsumerMember,
    data: ConsumerGroupData,
    topics: TopicsView,
    specs: dict[TopicId, TopicSpec] | None = None,
) -> frozenset[TopicId]:
    """The ids of the existing topics the member subscribes to (filling ``specs``)."""
    ids = set()
    for name in _subscribed_names(member, data):
        spec = topics.topic(name)
        if spec is not None:
            ids.add(spec.topic_id)
            if specs is not None:
                specs[spec.topic_id] = spec
    return frozenset(ids)


def _topic_hash_input(name: str, spec: TopicSpec) -> bytes:
    """What a topic adds to the metadata hash: its id, partition count and racks."""
    parts = [f"{name}/{spec.topic_id}/{spec.num_partitions}"]
    for partition in sorted(spec.partition_racks):
        parts.append(f"/{partition}:{','.join(sorted(spec.partition_racks[partition]))}")
    return "".join(parts).encode()


def owned_assignment(
    topic_partitions: Iterable[tuple[uuid.UUID, Iterable[int]]] | None,
) -> Mapping[TopicId, frozenset[int]] | None:
    """The owned partitions of a request, as an assignment (None when not sent)."""
    if topic_partitions is None:
        return None
    owned: dict[TopicId, frozenset[int]] = {}
    for topic_id, partitions in topic_partitions:
        owned[topic_id] = owned.get(topic_id, frozenset()) | frozenset(partitions)
    return owned
