"""The classic group protocol as a pure state machine (DESIGN rule 3).

No sockets, no asyncio, no sleeping: the shell (``coordinator.py``) feeds events in (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, offset commits, the clock passing a deadline, a
``__consumer_offsets`` partition being loaded) and performs the effects that come back, in
order: ``Reply`` answers a request identified by the token the shell gave with it (JoinGroup
and SyncGroup answers may come long after the request, from another member's event or a
timer); ``StoreGroup`` asks the shell to persist a group metadata record and report the outcome
through ``group_stored`` -- the answers that depend on it are only released afterwards
("persist first, then send"). Time comes from an injected clock in milliseconds; the shell calls
``tick()`` when ``next_deadline()`` has passed.

Group states and their transitions follow Kafka's classic coordinator:

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup persisted--> Stable
    Stable / CompletingRebalance --join, leave, expiry, metadata change--> PreparingRebalance
    PreparingRebalance --no member left--> Empty (next generation)
    Empty --group deleted / offsets expired--> Dead

Rebalance timing: a group leaving Empty waits ``group.initial.rebalance.delay.ms``, extended by
the same delay each time a member joins meanwhile, up to the rebalance timeout (KIP-134);
otherwise the join phase ends when every known member has rejoined and no member id handed out
by the KIP-394 handshake is outstanding, or after the largest rebalance timeout, dropping the
members that did not rejoin. Members that do not send SyncGroup within the rebalance timeout
are dropped as well. A member whose session timeout passes without a heartbeat, commit, join
or sync is removed, except while its JoinGroup or SyncGroup is pending (new members awaiting
their first join get ``new_member_join_timeout_ms``, KIP-394).

Static members (KIP-345) are keyed by group.instance.id: a JoinGroup with a known instance id
and no member id replaces the old member (whose pending requests get FENCED_INSTANCE_ID), and
in a Stable group with unchanged metadata no rebalance happens at all.
"""

from __future__ import annotations

import heapq
import logging
import uuid
from collections.abc import Callable, Iterable

from kbroker.group.consumer_heartbeat import (
    ConsumerGroupProtocol,
    ConsumerGroupSettings,
    NoTopics,
    TopicsView,
)
from kbroker.group.events import (
    CAN_REBALANCE,
    CLASSIC_GROUP,
    GROUP_TYPES,
    Effect,
    GroupConfig,
    GroupState,
    JoinMember,
    JoinRequest,
    JoinResult,
    LeaveResult,
    Reply,
    StoreGroup,
    SyncRequest,
    SyncResult,
)
from kbroker.group.migration import ProtocolMigration
from kbroker.group.model import Group, Member, PartitionLoad, PendingStore
from kbroker.group.offset_operations import GroupOffsets
from kbroker.group.offsets_store import (
    NO_TIMESTAMP,
    GroupValue,
    LoadedState,
    MemberValue,
    partition_for,
)
from kbroker.group.share_heartbeat import ShareGroupProtocol
from wire.errors import ErrorCode

log = logging.getLogger(__name__)


# --- the state machine ----------------------------------------------------------------------


class GroupStateMachine(GroupOffsets, ConsumerGroupProtocol, ProtocolMigration, ShareGroupProtocol):
    """Every group of the ``__consumer_offsets`` partitions this broker coordinates, classic,
    consumer (KIP-848) and share (KIP-932), and their committed offsets."""

    def __init__(
        self,
        config: GroupConfig,
        clock: Callable[[], int],
        num_offsets_partitions: int,
        *,
        new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
        consumer_settings: Callable[[str], ConsumerGroupSettings] | None = None,
        share_settings: Callable[[str], ConsumerGroupSettings] | None = None,
        topics: TopicsView | None = None,
    ) -> None:
        """``consumer_settings``, ``share_settings``: a consumer or share group's session
        timeout and heartbeat interval (the broker's group.consumer.* or group.share.*
        settings when not given); ``topics``: the cluster's topics, which consumer and share
        groups subscribe to."""
        self.config = config
        self._clock = clock
        self.num_offsets_partitions = num_offsets_partitions
        self._new_uuid = new_uuid
        self._groups: dict[str, Group] = {}
        self._partitions: dict[int, PartitionLoad] = {}
        self._timers: list[tuple[int, str]] = []
        self._stores: dict[int, PendingStore] = {}
        self._next_store_id = 0
        # Rebalances per group type since start-up, for the metrics: a classic group's new
        # generations, a consumer or share group's group epoch bumps (Kafka's
        # group-completed-rebalance-count, consumer-group-rebalance-count and
        # share-group-rebalance-count of the group-coordinator-metrics group).
        self.rebalances: dict[str, int] = dict.fromkeys(GROUP_TYPES, 0)
        self._init_consumer_protocol(consumer_settings, topics or NoTopics())
        share_default = ConsumerGroupSettings(
            config.share_session_timeout_ms, config.share_heartbeat_interval_ms
        )
        self._init_share_protocol(share_settings or (lambda _group_id: share_default))

    # --- ownership of offsets-topic partitions --------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_offsets_partitions)

    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        """NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, or None if this machine serves it."""
        load = self._partitions.get(self.partition_for(group_id))
        if load is None:
            return ErrorCode.NOT_COORDINATOR
        if load is PartitionLoad.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def owned_partitions(self) -> set[int]:
        return set(self._partitions)

    def begin_load(self, partition: int) -> None:
        self._partitions[partition] = PartitionLoad.LOADING

    def complete_load(self, partition: int, loaded: LoadedState) -> None:
        """Install the groups and offsets replayed from ``partition``. Members of a loaded group
        get a full session timeout from now to show up."""
        if self._partitions.get(partition) is not PartitionLoad.LOADING:
            return
        now = self._clock()
        for group_id, value in loaded.groups.items():
            if self.partition_for(group_id) != partition:
                continue
            group = Group(group_id, GroupState.EMPTY, value.current_state_timestamp)
            group.generation = value.generation
            group.protocol_type = value.protocol_type or None
            group.protocol_name = value.protocol
            group.leader_id = value.leader
            for mv in value.members:
                member = Member(
                    member_id=mv.member_id,
                    group_instance_id=mv.group_instance_id,
                    client_id=mv.client_id,
                    client_host=mv.client_host,
                    session_timeout_ms=mv.session_timeout,
                    rebalance_timeout_ms=mv.rebalance_timeout,
                    protocol_type=value.protocol_type,
                    protocols=((value.protocol or "", mv.subscription),),
                    deadline_ms=now + mv.session_timeout,
                    assignment=mv.assignment,
                )
                group.members[mv.member_id] = member
                if mv.group_instance_id is not None:
                    group.static_members[mv.group_instance_id] = mv.member_id
            if group.members:
                group.state = GroupState.STABLE
            if group.state_timestamp_ms == NO_TIMESTAMP:
                group.state_timestamp_ms = now
            self._groups[group_id] = group
            self._schedule(group)
        for group_id, consumer in loaded.consumer_groups.items():
            if self.partition_for(group_id) != partition:
                continue
            group = Group(group_id, GroupState.EMPTY, now)
            self._load_consumer_group(group, consumer)
            self._groups[group_id] = group
            self._schedule(group)
        for group_id, share in loaded.share_groups.items():
            if self.partition_for(group_id) != partition:
                continue
            group = Group(group_id, GroupState.EMPTY, now)
            self._load_share_group(group, share)
            self._groups[group_id] = group
            self._schedule(group)
        for group_id, offsets in loaded.offsets.items():
            if self.partition_for(group_id) != partition:
                continue
            group = self._groups.get(group_id)
            if group is None:
                group = Group(group_id, GroupState.EMPTY, now)
                self._groups[group_id] = group
            group.offsets.update(offsets)
        for producer_id, by_group in loaded.pending_txn.items():
            for group_id, offsets in by_group.items():
                if self.partition_for(group_id) != partition:
                    continue
                group = self._groups.get(group_id)
                if group is None:
                    group = Group(group_id, GroupState.EMPTY, now)
                    self._groups[group_id] = group
                group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)
        self._partitions[partition] = PartitionLoad.LOADED

    def unload(self, partition: int) -> list[Effect]:
        """This broker no longer coordinates ``partition``: its groups go, and pending requests
        are told to find the new coordinator."""
        self._partitions.pop(partition, None)
        effects: list[Effect] = []
        for group_id in [g for g in self._groups if self.partition_for(g) == partition]:
            group = self._groups.pop(group_id)
            for m in group.members.values():
                self._fail_pending(m, ErrorCode.NOT_COORDINATOR, effects)
            effects.extend(self._drop_waiting(group_id))
        for store_id in [s for s, p in self._stores.items() if p.group_id not in self._groups]:
            del self._stores[store_id]
        return effects

    # --- timers ---------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        while self._timers:
            deadline, group_id = self._timers[0]
            group = self._groups.get(group_id)
            if group is not None and group.scheduled_ms == deadline:
                return deadline
            heapq.heappop(self._timers)
        return None

    def _schedule(self, group: Group) -> None:
        deadline = group.next_deadline()
        if deadline is None:
            group.scheduled_ms = None
            return
        if group.scheduled_ms is None or deadline != group.scheduled_ms:
            group.scheduled_ms = deadline
            heapq.heappush(self._timers, (deadline, group.group_id))

    def tick(self) -> list[Effect]:
        """Handle every deadline that has passed."""
        now = self._clock()
        effects: list[Effect] = []
        due: list[str] = []
        while self._timers and self._timers[0][0] <= now:
            deadline, group_id = heapq.heappop(self._timers)
            group = self._groups.get(group_id)
            if group is not None and group.scheduled_ms == deadline:
                due.append(group_id)
        for group_id in due:
            group = self._groups.get(group_id)
            if group is None:
                continue
            group.scheduled_ms = None
            self._expire(group, now, effects)
            self._schedule(group)
        return effects

    def _expire(self, group: Group, now: int, effects: list[Effect]) -> None:
        if group.consumer is not None:
            self._expire_consumer(group, now, effects)
            return
        if group.share is not None:
            self._expire_share(group, now, effects)
            return
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now:
                del group.pending_members[member_id]
                self._maybe_complete_join(group, effects)
        for member in list(group.members.values()):
            expiry = member.expiry_ms()
            if expiry is not None and expiry <= now and member.member_id in group.members:
                self._remove_member_and_update(group, member, effects)
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.join_deadline_ms is not None
            and group.join_deadline_ms <= now
        ):
            remaining = group.initial_delay_remaining_ms
            if remaining is not None and group.new_member_added and remaining > 0:
                # KIP-134: someone joined during the delay; wait once more, within budget.
                delay = min(self.config.initial_rebalance_delay_ms, remaining)
                group.new_member_added = False
                group.initial_delay_remaining_ms = remaining - delay
                group.join_deadline_ms = now + delay
            else:
                self._complete_join(group, effects)
        if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now:
            group.sync_deadline_ms = None
            missing = [group.members[m] for m in group.pending_sync if m in group.members]
            group.pending_sync.clear()
            if missing and group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
                for member in missing:
                    self._remove_member(group, member, effects)
                self._prepare_rebalance(group, effects)

    # --- JoinGroup ------------------------------------------------------------------------

    def join(self, token: int, req: JoinRequest) -> list[Effect]:
        effects: list[Effect] = []

        def fail(error: ErrorCode, member_id: str = req.member_id) -> list[Effect]:
            effects.append(Reply(token, JoinResult(error, member_id)))
            return effects

        if not req.group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        error = self.coordinator_error(req.group_id)
        if error is not None:
            return fail(error)
        if not (
            self.config.min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        if self._wait_for_write(
            req.group_id,
            lambda: self.join(token, req),
            lambda error: [Reply(token, JoinResult(error, req.member_id))],
        ):
            return effects
        group = self._groups.get(req.group_id)
        if group is not None and group.consumer is not None:
            if group.consumer.members:
                return self._classic_join(token, group, req)
            effects.append(self._empty_consumer_to_classic(group))
        if group is None:
            if req.member_id:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = Group(req.group_id, GroupState.EMPTY, self._clock())
            self._groups[req.group_id] = group
        known_id = req.member_id
        if not known_id and req.group_instance_id is not None:
            known_id = group.static_members.get(req.group_instance_id, "")
        if not self._accepts_member(group, known_id):
            return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not self._supports_protocols(group, req):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not req.member_id:
            self._join_unknown_member(group, token, req, effects)
        else:
            self._join_known_member(group, token, req, effects)
        self._schedule(group)
        return effects

    def _accepts_member(self, group: Group, member_id: str) -> bool:
        """group.max.size (KIP-389): a member already in the group is always let back in."""
        limit = self.config.max_size
        member = group.members.get(member_id)
        if group.state is GroupState.EMPTY:
            return True
        if group.state is GroupState.PREPARING_REBALANCE:
            return (member is not None and member.join_token is not None) or (
                group.awaiting_join() < limit
            )
        return member is not None or len(group.members) < limit

    def _supports_protocols(self, group: Group, req: JoinRequest) -> bool:
        if not req.protocol_type or not req.protocols:
            return False
        if group.state is GroupState.EMPTY:
            return True
        others = [m for m in group.members.values() if m.member_id != req.member_id]
        if group.protocol_type != req.protocol_type:
            return False
        if not others:
            return True
        return any(
            all(any(p == name for p, _ in m.protocols) for m in others) for name, _ in req.protocols
        )

    def _join_unknown_member(
        self, group: Group, token: int, req: JoinRequest, effects: list[Effect]
    ) -> None:
        instance_id = req.group_instance_id
        prefix = instance_id if instance_id is not None else req.client_id
        member_id = f"{prefix}-{self._new_uuid()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and old_id in group.members:
                self._replace_static_member(
                    group, group.members[old_id], member_id, token, req, effects
                )
                return
            self._add_member_and_rebalance(group, member_id, token, req, effects)
            return
        if req.require_known_member_id:
            # KIP-394: hand out the id first, so a client that times out and retries does
            # not leave a ghost member behind.
            group.pending_members[member_id] = self._clock() + req.session_timeout_ms
            effects.append(Reply(token, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)))
            return
        self._add_member_and_rebalance(group, member_id, token, req, effects)

    def _join_known_member(
        self, group: Group, token: int, req: JoinRequest, effects: list[Effect]
    ) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._add_member_and_rebalance(group, member_id, token, req, effects)
            return
        if group.static_member_fenced(req.group_instance_id, member_id):
            effects.append(Reply(token, JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)))
            return
        member = group.members.get(member_id)
        if member is None or group.state is GroupState.EMPTY:
            effects.append(Reply(token, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)))
            return
        now = self._clock()
        if group.state is GroupState.COMPLETING_REBALANCE and member.protocols == req.protocols:
            # It lost our JoinGroup answer: tell it again.
            member.deadline_ms = now + member.session_timeout_ms
            effects.append(Reply(token, self._join_result(group, member)))
            return
        if (
            group.state is GroupState.STABLE
            and group.leader_id != member_id
            and member.protocols == req.protocols
        ):
            # A follower with unchanged metadata: nothing to rebalance for.
            member.deadline_ms = now + member.session_timeout_ms
            effects.append(Reply(token, self._join_result(group, member)))
            return
        self._update_member_and_rebalance(group, member, token, req, effects)

    def _join_result(self, group: Group, member: Member, *, skip: bool = False) -> JoinResult:
        members: tuple[JoinMember, ...] = ()
        if member.member_id == group.leader_id:
            members = tuple(
                JoinMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members,
            skip,
        )

    def _add_member_and_rebalance(
        self, group: Group, member_id: str, token: int, req: JoinRequest, effects: list[Effect]
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            deadline_ms=self._clock() + self.config.new_member_join_timeout_ms,
            join_token=token,
            is_new=True,
        )
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        if req.group_instance_id is not None:
            group.static_members[req.group_instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        if group.initial_delay_remaining_ms is not None:
            group.new_member_added = True
        if group.state in CAN_REBALANCE:
            self._prepare_rebalance(group, effects)
        self._maybe_complete_join(group, effects)

    def _update_member_and_rebalance(
        self, group: Group, member: Member, token: int, req: JoinRequest, effects: list[Effect]
    ) -> None:
        if member.join_token is not None and member.join_token != token:
            # A second JoinGroup while the first is pending: only the newest gets the result.
            effects.append(
                Reply(
                    member.join_token, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)
                )
            )
        member.protocols = req.protocols
        member.protocol_type = req.protocol_type
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.join_token = token
        if group.state in CAN_REBALANCE:
            self._prepare_rebalance(group, effects)
        self._maybe_complete_join(group, effects)

    def _replace_static_member(
        self,
        group: Group,
        old: Member,
        new_id: str,
        token: int,
        req: JoinRequest,
        effects: list[Effect],
    ) -> None:
        self._fail_pending(old, ErrorCode.FENCED_INSTANCE_ID, effects)
        old_id = old.member_id
        unchanged = old.protocols == req.protocols
        del group.members[old_id]
        old.member_id = new_id
        group.members[new_id] = old
        assert req.group_instance_id is not None
        group.static_members[req.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        old.deadline_ms = self._clock() + old.session_timeout_ms
        if group.state is GroupState.STABLE and unchanged:
            # KIP-345: a restarted static member takes its old place without a rebalance,
            # once the new member id is persisted.
            old.client_id = req.client_id
            old.client_host = req.client_host
            old.session_timeout_ms = req.session_timeout_ms
            old.rebalance_timeout_ms = req.rebalance_timeout_ms
            member = old
            generation = group.generation

            def stored() -> list[Effect]:
                return [
                    Reply(
                        token,
                        self._join_result(group, member, skip=member.member_id == group.leader_id),
                    )
                ]

            def failed(error: ErrorCode) -> list[Effect]:
                out: list[Effect] = [Reply(token, JoinResult(error, new_id))]
                if group.state is GroupState.STABLE and group.generation == generation:
                    self._prepare_rebalance(group, out)
                    self._schedule(group)
                return out

            effects.append(self._store(group, stored, failed))
            return
        self._update_member_and_rebalance(group, old, token, req, effects)

    # --- rebalance mechanics --------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, effects: list[Effect]) -> None:
        now = self._clock()
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._reset_sync(group, ErrorCode.REBALANCE_IN_PROGRESS, effects)
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        delay = self.config.initial_rebalance_delay_ms
        if group.state is GroupState.EMPTY and delay > 0:
            group.join_deadline_ms = now + delay
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
        else:
            group.join_deadline_ms = now + group.rebalance_timeout_ms()
            group.initial_delay_remaining_ms = None
        if group.state is not GroupState.PREPARING_REBALANCE:
            log.info(
                "group %s: rebalance from %s, generation %d, %d members",
                group.group_id,
                group.state.value,
                group.generation,
                len(group.members),
            )
        group.transition(GroupState.PREPARING_REBALANCE, now)

    def _reset_sync(self, group: Group, error: ErrorCode, effects: list[Effect]) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.sync_token is not None:
                effects.append(Reply(m.sync_token, SyncResult(error)))
                m.sync_token = None

    def _maybe_complete_join(self, group: Group, effects: list[Effect]) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.initial_delay_remaining_ms is None
            and not group.pending_members
            and all(m.join_token is not None for m in group.members.values())
        ):
            self._complete_join(group, effects)

    def _complete_join(self, group: Group, effects: list[Effect]) -> None:
        now = self._clock()
        for member in [m for m in group.members.values() if m.join_token is None]:
            self._remove_member(group, member, effects)
        group.join_deadline_ms = None
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        group.generation += 1
        self.rebalances[CLASSIC_GROUP] += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, now)
            effects.append(self._store(group, lambda: [], lambda _error: []))
            return
        group.protocol_name = self._select_protocol(group)
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in group.members.values():
            assert member.join_token is not None
            effects.append(Reply(member.join_token, self._join_result(group, member)))
            member.join_token = None
            member.is_new = False
            member.deadline_ms = now + member.session_timeout_ms
        group.pending_sync = set(group.members)
        group.sync_deadline_ms = now + group.rebalance_timeout_ms()

    @staticmethod
    def _select_protocol(group: Group) -> str:
        """Each member votes for its most preferred protocol that every member supports; the
        most votes win (ties: the earlier candidate in the leader's order)."""
        members = list(group.members.values())
        leader = group.members.get(group.leader_id or "", members[0])
        candidates = [
            name
            for name, _ in leader.protocols
            if all(any(p == name for p, _ in m.protocols) for m in members)
        ]
        votes = dict.fromkeys(candidates, 0)
        for m in members:
            for name, _ in m.protocols:
                if name in votes:
                    votes[name] += 1
                    break
        return max(candidates, key=lambda name: votes[name])

    def _fail_pending(self, member: Member, error: ErrorCode, effects: list[Effect]) -> None:
        if member.join_token is not None:
            effects.append(Reply(member.join_token, JoinResult(error, member.member_id)))
            member.join_token = None
        if member.sync_token is not None:
            effects.append(Reply(member.sync_token, SyncResult(error)))
            member.sync_token = None

    def _remove_member(self, group: Group, member: Member, effects: list[Effect]) -> None:
        log.info("group %s: member %s removed", group.group_id, member.member_id)
        self._fail_pending(member, ErrorCode.UNKNOWN_MEMBER_ID, effects)
        del group.members[member.member_id]
        if member.group_instance_id is not None:
            if group.static_members.get(member.group_instance_id) == member.member_id:
                del group.static_members[member.group_instance_id]
        group.pending_sync.discard(member.member_id)
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _remove_member_and_update(
        self, group: Group, member: Member, effects: list[Effect]
    ) -> None:
        self._remove_member(group, member, effects)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, effects)
        self._maybe_complete_join(group, effects)

    # --- group metadata persistence -------------------------------------------------------

    def _store(
        self,
        group: Group,
        on_success: Callable[[], list[Effect]],
        on_failure: Callable[[ErrorCode], list[Effect]],
    ) -> StoreGroup:
        self._next_store_id += 1
        store_id = self._next_store_id
        self._stores[store_id] = PendingStore(
            group.group_id, group.generation, on_success, on_failure
        )
        return StoreGroup(store_id, group.group_id, self.group_value(group))

    @staticmethod
    def group_value(group: Group) -> GroupValue:
        return GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp_ms,
            members=tuple(
                MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(group.protocol_name),
                    m.assignment,
                )
                for m in group.members.values()
            ),
        )

    def group_stored(self, store_id: int, error: ErrorCode) -> list[Effect]:
        """The outcome of a ``StoreGroup`` effect."""
        pending = self._stores.pop(store_id, None)
        if pending is None:
            return []
        effects = pending.on_success() if error == ErrorCode.NONE else pending.on_failure(error)
        group = self._groups.get(pending.group_id)
        if group is not None:
            self._schedule(group)
        return effects

    # --- SyncGroup ------------------------------------------------------------------------

    def sync(self, token: int, req: SyncRequest) -> list[Effect]:
        effects: list[Effect] = []

        def fail(error: ErrorCode) -> list[Effect]:
            effects.append(Reply(token, SyncResult(error)))
            return effects

        if not req.group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        error = self.coordinator_error(req.group_id)
        if error is not None:
            return fail(error)
        if self._wait_for_write(
            req.group_id,
            lambda: self.sync(token, req),
            lambda error: [Reply(token, SyncResult(error))],
        ):
            return effects
        group = self._groups.get(req.group_id)
        if group is None:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.consumer is not None:
            if not group.consumer.members:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            return self._classic_sync(token, group, req)
        if group.static_member_fenced(req.group_instance_id, req.member_id):
            return fail(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(req.member_id)
        if member is None:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if req.generation_id != group.generation:
            return fail(ErrorCode.ILLEGAL_GENERATION)
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is GroupState.EMPTY:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is GroupState.PREPARING_REBALANCE:
            return fail(ErrorCode.REBALANCE_IN_PROGRESS)
        now = self._clock()
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            group.sync_deadline_ms = None
        if group.state is GroupState.STABLE:
            member.deadline_ms = now + member.session_timeout_ms
            effects.append(Reply(token, self._sync_result(group, member)))
            self._schedule(group)
            return effects
        # CompletingRebalance: wait for the leader's assignment.
        if member.sync_token is not None:
            effects.append(Reply(member.sync_token, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)))
        member.sync_token = token
        if member.member_id == group.leader_id:
            self._leader_synced(group, dict(req.assignments), effects)
        self._schedule(group)
        return effects

    def _sync_result(self, group: Group, member: Member) -> SyncResult:
        return SyncResult(
            ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
        )

    def _leader_synced(
        self, group: Group, assignments: dict[str, bytes], effects: list[Effect]
    ) -> None:
        generation = group.generation
        # The record carries the assignment; the members only get it once it is persisted.
        snapshot = {m: assignments.get(m, b"") for m in group.members}
        for member_id, assignment in snapshot.items():
            group.members[member_id].assignment = assignment

        def still_current() -> bool:
            return (
                self._groups.get(group.group_id) is group
                and group.state is GroupState.COMPLETING_REBALANCE
                and group.generation == generation
            )

        def stored() -> list[Effect]:
            out: list[Effect] = []
            if not still_current():
                return out
            now = self._clock()
            group.transition(GroupState.STABLE, now)
            for m in group.members.values():
                if m.sync_token is not None:
                    out.append(Reply(m.sync_token, self._sync_result(group, m)))
                    m.sync_token = None
                    m.deadline_ms = now + m.session_timeout_ms
            return out

        def failed(error: ErrorCode) -> list[Effect]:
            out: list[Effect] = []
            if still_current():
                self._reset_sync(group, error, out)
                self._prepare_rebalance(group, out)
            return out

        effects.append(self._store(group, stored, failed))

    # --- Heartbeat ------------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        error = self.coordinator_error(group_id)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The member's state is being loaded; its session is not at risk meanwhile.
            return ErrorCode.NONE
        if error is not None:
            return error
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.consumer is not None:
            return self._classic_heartbeat(group, member_id, group_instance_id, generation_id)
        if group.static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        member.deadline_ms = self._clock() + member.session_timeout_ms
        self._schedule(group)
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # --- LeaveGroup -----------------------------------------------------------------------

    def leave(
        self, token: int, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> list[Effect]:
        """(member id, instance id) pairs leave; answered with a ``LeaveResult``: the
        request-level error and one error per member."""
        leaving = list(members)

        def answer(error: ErrorCode, errors: list[ErrorCode] | None = None) -> list[Effect]:
            return [Reply(token, LeaveResult(error, tuple(errors or ())))]

        if not group_id:
            return answer(ErrorCode.INVALID_GROUP_ID)
        error = self.coordinator_error(group_id)
        if error is not None:
            return answer(error)
        if self._wait_for_write(group_id, lambda: self.leave(token, group_id, leaving), answer):
            return []
        group = self._groups.get(group_id)
        if group is None:
            return answer(ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving))
        if group.consumer is not None:
            return self._classic_leave(token, group, leaving)
        effects: list[Effect] = []
        errors = [self._leave_one(group, m, i, effects) for m, i in leaving]
        self._schedule(group)
        return [*effects, *answer(ErrorCode.NONE, errors)]

    def _leave_one(
        self, group: Group, member_id: str, instance_id: str | None, effects: list[Effect]
    ) -> ErrorCode:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
            self._maybe_complete_join(group, effects)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member_and_update(group, member, effects)
        return ErrorCode.NONE
