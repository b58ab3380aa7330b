"""Online migration between the classic and the consumer group protocols (KIP-848), as Kafka's
group coordinator does it, so that a running group of consumers can be upgraded (or
downgraded) one member at a time without stopping.

- **Upgrade**: a member of the consumer protocol joining a classic group of consumers (protocol
  type ``consumer``) turns it into a consumer group, if ``group.consumer.migration.policy``
  allows (``bidirectional`` or ``upgrade``) and the group is within ``group.consumer.max.size``.
  Each classic member becomes a member at the group's generation as its epoch, with the
  partitions of its last assignment as both its current and its target assignment: nothing
  moves until the assignor runs for the joining member. The classic group's record is
  tombstoned and the consumer group's records are written in the same batch.
- **Classic members inside a consumer group** keep speaking JoinGroup, SyncGroup, Heartbeat
  and LeaveGroup. A JoinGroup is a full heartbeat: it updates the member's subscription (from
  its embedded consumer protocol metadata), may bump the group epoch and recompute the target,
  and reconciles the member with the partitions it says it owns; it is answered at once with
  the member epoch as the generation, and no member is the leader. SyncGroup answers the
  member's assigned partitions in the consumer protocol, in the version of its subscription.
  Heartbeat answers REBALANCE_IN_PROGRESS when the member must join again: its epoch is behind
  the group's, it has partitions to revoke, or the partitions it waits for were released.
  A member that does not join (or sync) within its rebalance timeout after being asked is
  fenced, like one whose session (its JoinGroup's session timeout) ends.
- **Downgrade**: when the last member of the consumer protocol leaves (or is fenced) and every
  remaining member uses the classic protocol, the group becomes a classic group again (policy
  ``bidirectional`` or ``downgrade``, within ``group.max.size``) at the group epoch as its
  generation, each member with its target assignment, and rebalances. A static classic member
  replacing the last consumer-protocol member downgrades the group without a rebalance.
- A JoinGroup to an empty consumer group makes it a classic group (its records tombstoned).

A mixin of ``GroupStateMachine`` beside ``ConsumerGroupProtocol``, whose change machinery
(persist first, then install and answer) it uses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from kbroker.group.consumer_group import (
    Assignment,
    ClassicMembership,
    ConsumerGroupData,
    ConsumerMember,
    MemberState,
    TopicId,
)
from kbroker.group.consumer_heartbeat import (
    ConsumerGroupSettings,
    HeartbeatError,
    TopicsView,
    assignment_value,
    member_tombstones,
    metadata_value,
    sorted_assignment,
)
from kbroker.group.consumer_protocol import (
    PROTOCOL_TYPE,
    assigned_partitions,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from kbroker.group.consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    ConsumerMemberKey,
    GroupEpochValue,
    RegexKey,
    TargetEpochValue,
    TargetMemberValue,
)
from kbroker.group.events import (
    Effect,
    GroupConfig,
    GroupState,
    HeartbeatResult,
    JoinRequest,
    JoinResult,
    LeaveResult,
    Record,
    Reply,
    StoreRecords,
    SyncRequest,
    SyncResult,
)
from kbroker.group.model import Group, Member
from kbroker.group.offsets_store import GroupKey, GroupValue
from wire.errors import DecodeError, ErrorCode

log = logging.getLogger(__name__)


class ProtocolMigration:
    """Conversions between group types, and classic members in consumer groups."""

    config: GroupConfig
    _clock: Callable[[], int]
    _groups: dict[str, Group]
    _new_uuid: Callable[[], str]
    _topics: TopicsView
    _consumer_settings: Callable[[str], ConsumerGroupSettings]

    if TYPE_CHECKING:

        def _commit(
            self,
            token: int,
            group: Group,
            data: ConsumerGroupData,
            records: list[Record],
            result: HeartbeatResult | JoinResult | LeaveResult,
        ) -> list[Effect]: ...

        def _store_change(
            self,
            group_id: str,
            records: list[Record],
            on_stored: Callable[[], list[Effect]],
            on_failed: Callable[[ErrorCode], list[Effect]],
            data: ConsumerGroupData | None = None,
        ) -> StoreRecords: ...

        def _pending_data(self, group_id: str) -> ConsumerGroupData | None: ...

        def _update_member(
            self,
            group_id: str,
            data: ConsumerGroupData,
            member: ConsumerMember,
            updated: ConsumerMember,
            owned: Assignment | None,
            new_here: bool,
            records: list[Record],
        ) -> ConsumerMember: ...

        def _replace_static(
            self,
            group_id: str,
            data: ConsumerGroupData,
            static: ConsumerMember,
            member_id: str,
            records: list[Record],
        ) -> ConsumerMember: ...

        def _bump_epoch(
            self, group_id: str, data: ConsumerGroupData, records: list[Record]
        ) -> None: ...

        def _prepare_rebalance(self, group: Group, effects: list[Effect]) -> None: ...

        def _join_result(
            self, group: Group, member: Member, *, skip: bool = False
        ) -> JoinResult: ...

        @staticmethod
        def _select_protocol(group: Group) -> str: ...

        @staticmethod
        def group_value(group: Group) -> GroupValue: ...

        def _schedule(self, group: Group) -> None: ...

    # --- classic to consumer ----------------------------------------------------------------

    def _may_upgrade(self, group: Group) -> bool:
        """Whether a consumer-protocol member may join this classic group (Kafka's checks)."""
        reason = None
        if not self.config.consumer_migration_policy.upgrades:
            reason = "the online upgrade is disabled"
        elif group.protocol_type != PROTOCOL_TYPE:
            reason = "the group does not use the consumer embedded protocol"
        elif len(group.members) > self.config.consumer_max_size:
            reason = "the group size exceeds the consumer group maximum size"
        if reason is not None:
            log.info(
                "cannot upgrade classic group %s to a consumer group: %s", group.group_id, reason
            )
        return reason is None

    def _upgrade(self, group: Group, records: list[Record]) -> ConsumerGroupData:
        """The consumer group a classic group of consumers becomes, and its records."""
        now = self._clock()
        generation = group.generation
        data = ConsumerGroupData(
            group_epoch=generation, assignment_epoch=generation, creation_time_ms=now
        )
        for classic in group.members.values():
            metadata = (
                classic.metadata_for(group.protocol_name)
                if group.protocol_name is not None
                else classic.protocols[0][1]
                if classic.protocols
                else b""
            )
            try:
                subscription = decode_subscription(metadata)
                assigned = assigned_partitions(classic.assignment)
            except DecodeError:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Cannot upgrade the classic group {group.group_id} to consumer group "
                    "because the embedded consumer protocol is malformed.",
                ) from None
            assignment = {
                topic_id: frozenset(p for p in partitions if data.owner_of(topic_id, p) is None)
                for topic_id, partitions in self._by_id(assigned.items()).items()
            }
            member = ConsumerMember(
                classic.member_id,
                classic.group_instance_id,
                subscription.rack_id,
                classic.client_id,
                classic.client_host,
                frozenset(subscription.topics),
                None,
                classic.rebalance_timeout_ms,
                None,
                member_epoch=generation,
                previous_member_epoch=generation,
                state=MemberState.STABLE,
                assigned=assignment,
                classic=ClassicMembership(classic.session_timeout_ms, classic.protocols),
            )
            data.put_member(member)
            data.targets[member.member_id] = assignment
            data.session_deadlines[member.member_id] = now + classic.session_timeout_ms
        records.append((GroupKey(group.group_id), None))
        for member in data.members.values():
            records.append(
                (
                    ConsumerMemberKey(MEMBER_METADATA, group.group_id, member.member_id),
                    metadata_value(member),
                )
            )
        records.append(
            (
                ConsumerGroupKey(GROUP_METADATA, group.group_id),
                GroupEpochValue(generation, 0, now),
            )
        )
        for member in data.members.values():
            records.append(
                (
                    ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, group.group_id, member.member_id),
                    TargetMemberValue(sorted_assignment(member.assigned)),
                )
            )
        records.append(
            (
                ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group.group_id),
                TargetEpochValue(generation, now),
            )
        )
        for member in data.members.values():
            records.append(
                (
                    ConsumerMemberKey(CURRENT_ASSIGNMENT, group.group_id, member.member_id),
                    assignment_value(member),
                )
            )
        log.info(
            "group %s: upgraded from classic to consumer group at epoch %d with %d members",
            group.group_id,
            generation,
            len(data.members),
        )
        return data

    def _by_id(self, by_name: Iterable[tuple[str, Iterable[int]]]) -> dict[TopicId, set[int]]:
        """Topic names to ids (topics that no longer exist, or partitions they no longer
        have, are left out)."""
        out: dict[TopicId, set[int]] = {}
        for name, partitions in by_name:
            spec = self._topics.topic(name)
            if spec is None:
                continue
            wanted = {p for p in partitions if 0 <= p < spec.num_partitions}
            if wanted:
                out.setdefault(spec.topic_id, set()).update(wanted)
        return out

    def _by_name(self, assignment: Assignment) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic_id, partitions in assignment.items():
            name = self._topics.name_of(topic_id)
            if name is not None and partitions:
                out[name] = sorted(partitions)
        return out

    # --- consumer to classic ----------------------------------------------------------------

    def _may_downgrade(self, data: ConsumerGroupData, leaving_id: str) -> bool:
        """Whether the group becomes classic as ``leaving_id`` leaves (Kafka's checks)."""
        if not data.only_classic_members_besides(leaving_id) or len(data.members) <= 1:
            return False
        if not self.config.consumer_migration_policy.downgrades:
            log.info("cannot downgrade consumer group: the online downgrade is disabled")
            return False
        return len(data.members) - 1 <= self.config.max_size

    def _downgrade(
        self,
        group: Group,
        data: ConsumerGroupData,
        leaving_id: str | None,
        records: list[Record],
        answer: Callable[[], list[Effect]],
        refuse: Callable[[ErrorCode], list[Effect]],
    ) -> StoreRecords:
        """Store the consumer group's tombstones and the classic group it becomes, without
        ``leaving_id``; once stored, install it (rebalancing it when a member left) and
        ``answer``."""
        group_id = group.group_id
        now = self._clock()
        for member_id in data.members:
            records.extend(member_tombstones(group_id, member_id))
        if leaving_id is not None and leaving_id not in data.members:
            records.extend(member_tombstones(group_id, leaving_id))
        records.extend((RegexKey(group_id, regex), None) for regex in data.regexes)
        records.append((ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group_id), None))
        records.append((ConsumerGroupKey(GROUP_METADATA, group_id), None))
        classic = Group(group_id, GroupState.STABLE, now)
        classic.generation = data.group_epoch
        classic.protocol_type = PROTOCOL_TYPE
        for member in data.members.values():
            if member.member_id == leaving_id or member.classic is None:
                continue
            classic.members[member.member_id] = Member(
                member_id=member.member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                session_timeout_ms=member.classic.session_timeout_ms,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                protocol_type=PROTOCOL_TYPE,
                protocols=member.classic.protocols,
                deadline_ms=now + member.classic.session_timeout_ms,
            )
            if member.instance_id is not None:
                classic.static_members[member.instance_id] = member.member_id
        classic.protocol_name = self._select_protocol(classic)
        classic.leader_id = next(iter(classic.members), None)
        for member_id, classic_member in classic.members.items():
            target = data.targets.get(member_id, data.members[member_id].assigned)
            version = protocol_version(classic_member.metadata_for(classic.protocol_name))
            classic_member.assignment = encode_assignment(self._by_name(target), version)
        records.append((GroupKey(group_id), self.group_value(classic)))

        def stored() -> list[Effect]:
            effects: list[Effect] = []
            group.consumer = None
            group.generation = classic.generation
            group.protocol_type = classic.protocol_type
            group.protocol_name = classic.protocol_name
            group.leader_id = classic.leader_id
            group.members = classic.members
            group.static_members = classic.static_members
            group.transition(GroupState.STABLE, self._clock())
            log.info(
                "group %s: downgraded from consumer to classic group at generation %d",
                group_id,
                group.generation,
            )
            if leaving_id is not None:
                self._prepare_rebalance(group, effects)
            effects.extend(answer())
            self._schedule(group)
            return effects

        return self._store_change(group_id, records, stored, refuse)

    def _empty_consumer_to_classic(self, group: Group) -> StoreRecords:
        """A classic member joining an empty consumer group: the group becomes classic (its
        consumer records tombstoned; its offsets stay)."""
        data = group.consumer
        assert data is not None and not data.members
        records: list[Record] = [
            *((RegexKey(group.group_id, regex), None) for regex in data.regexes),
            (ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group.group_id), None),
            (ConsumerGroupKey(GROUP_METADATA, group.group_id), None),
        ]
        group.consumer = None
        group.protocol_type = None
        group.transition(GroupState.EMPTY, self._clock())
        return self._store_change(group.group_id, records, list, lambda _error: [])

    # --- classic requests to a consumer group -----------------------------------------------

    def _classic_member(
        self, data: ConsumerGroupData, member_id: str, instance_id: str | None
    ) -> ConsumerMember:
        """The classic member a request is from (Kafka's validateConsumerGroupMember and
        throwIfMemberDoesNotUseClassicProtocol)."""
        if instance_id is None:
            member = data.members.get(member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            static_id = data.static_members.get(instance_id)
            if static_id is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
            if static_id != member_id:
                raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID)
            member = data.members[static_id]
        if member.classic is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    @staticmethod
    def _consumer_group_supports(data: ConsumerGroupData, member_id: str, req: JoinRequest) -> bool:
        """A JoinGroup's protocols: of type ``consumer``, with one every other classic member
        supports."""
        if req.protocol_type != PROTOCOL_TYPE or not req.protocols:
            return False
        others = [
            m.classic
            for m in data.members.values()
            if m.classic is not None and m.member_id != member_id
        ]
        return any(
            all(any(name == theirs for theirs, _ in c.protocols) for c in others)
            for name, _ in req.protocols
        )

    def _classic_join(self, token: int, group: Group, req: JoinRequest) -> list[Effect]:
        try:
            return self._classic_join_or_refuse(token, group, req)
        except HeartbeatError as exc:
            return [Reply(token, JoinResult(exc.error, req.member_id))]

    def _classic_join_or_refuse(self, token: int, group: Group, req: JoinRequest) -> list[Effect]:
        assert group.consumer is not None
        data = group.consumer.copy()
        group_id = group.group_id
        unknown = not req.member_id
        member_id = req.member_id or self._new_uuid()
        if member_id not in data.members and len(data.members) >= self.config.consumer_max_size:
            raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not self._consumer_group_supports(data, member_id, req):
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and req.group_instance_id is None and req.require_known_member_id:
            # KIP-394, as for a classic group: the member joins again with this id.
            return [Reply(token, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))]
        try:
            subscription = decode_subscription(req.protocols[0][1])
        except DecodeError:
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL) from None
        records: list[Record] = []
        replaced_id = None
        if req.group_instance_id is None:
            member = data.members.get(member_id) or ConsumerMember(member_id)
        elif unknown:
            static_id = data.static_members.get(req.group_instance_id)
            if static_id is None:
                member = ConsumerMember(member_id)
            else:
                # A static member restarting with the classic protocol replaces its old
                # incarnation at once, whichever protocol that one used.
                replaced_id = static_id
                member = self._replace_static(
                    group_id, data, data.members[static_id], member_id, records
                )
        else:
            member = self._classic_member(data, member_id, req.group_instance_id)
        owned = {
            t: frozenset(p)
            for t, p in self._by_id(
                (tp.topic, tp.partitions) for tp in subscription.owned_partitions
            ).items()
        }
        classic = ClassicMembership(req.session_timeout_ms, req.protocols)
        updated = replace(
            member,
            instance_id=req.group_instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=None,
            subscribed_topic_names=frozenset(subscription.topics),
            client_id=req.client_id,
            client_host=req.client_host,
            classic=classic,
        )
        stored = group.consumer.members
        reconciled = self._update_member(
            group_id, data, member, updated, owned, member_id not in stored, records
        )
        now = self._clock()
        if replaced_id is not None and self._replacement_downgrades(group.consumer, replaced_id):

            def answer() -> list[Effect]:
                joined = group.members[reconciled.member_id]
                return [Reply(token, self._join_result(group, joined))]

            def refuse(error: ErrorCode) -> list[Effect]:
                return [Reply(token, JoinResult(error, member_id))]

            return [self._downgrade(group, data, None, records, answer, refuse)]
        data.session_deadlines[member_id] = now + req.session_timeout_ms
        # The SyncGroup is due within the rebalance timeout (Kafka's sync timeout).
        data.classic_deadlines[member_id] = now + max(req.rebalance_timeout_ms, 0)
        result = JoinResult(
            ErrorCode.NONE,
            member_id,
            reconciled.member_epoch,
            PROTOCOL_TYPE,
            classic.protocol_name,
        )
        return self._commit(token, group, data, records, result)

    def _replacement_downgrades(self, data: ConsumerGroupData, replaced_id: str) -> bool:
        """A static classic member replacing the last member of the consumer protocol."""
        return (
            data.only_classic_members_besides(replaced_id)
            and self.config.consumer_migration_policy.downgrades
            and len(data.members) <= self.config.max_size
        )

    def _classic_sync(self, token: int, group: Group, req: SyncRequest) -> list[Effect]:
        data = group.consumer
        assert data is not None
        try:
            member = self._classic_member(data, req.member_id, req.group_instance_id)
        except HeartbeatError as exc:
            return [Reply(token, SyncResult(exc.error))]
        assert member.classic is not None
        if member.member_epoch != req.generation_id:
            return [Reply(token, SyncResult(ErrorCode.ILLEGAL_GENERATION))]
        if (req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE) or (
            req.protocol_name is not None and req.protocol_name != member.classic.protocol_name
        ):
            return [Reply(token, SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))]
        now = self._clock()
        if (
            data.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            # A rebalance began since it joined: it must join again first (unless it has yet
            # to revoke partitions, which this answer asks it to do).
            self._touch(group, member.member_id, join_by=now + member.rebalance_timeout_ms)
            return [Reply(token, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))]
        self._touch(
            group, member.member_id, session=now + member.classic.session_timeout_ms, synced=True
        )
        version = protocol_version(member.classic.protocols[0][1])
        assignment = encode_assignment(self._by_name(member.assigned), version)
        return [
            Reply(
                token,
                SyncResult(ErrorCode.NONE, assignment, PROTOCOL_TYPE, member.classic.protocol_name),
            )
        ]

    def _classic_heartbeat(
        self, group: Group, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        data = group.consumer
        assert data is not None
        try:
            member = self._classic_member(data, member_id, instance_id)
        except HeartbeatError as exc:
            return exc.error
        assert member.classic is not None
        if member.member_epoch != generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        now = self._clock()
        self._touch(group, member.member_id, session=now + member.classic.session_timeout_ms)
        if (
            member.member_epoch < data.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not data.waits_on_others(member)
            )
        ):
            # It must join again: to catch up with the group epoch, to revoke partitions, or
            # to collect the partitions it waited for.
            self._touch(group, member.member_id, join_by=now + member.rebalance_timeout_ms)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _classic_leave(
        self, token: int, group: Group, members: list[tuple[str, str | None]]
    ) -> list[Effect]:
        assert group.consumer is not None
        data = group.consumer.copy()
        records: list[Record] = []
        errors: list[ErrorCode] = []
        for member_id, instance_id in members:
            try:
                if instance_id is not None and not member_id:
                    # An administrative removal names only the instance.
                    member_id = data.static_members.get(instance_id, "")
                member = self._classic_member(data, member_id, instance_id)
            except HeartbeatError as exc:
                errors.append(exc.error)
                continue
            data.remove_member(member.member_id)
            records.extend(member_tombstones(group.group_id, member.member_id))
            errors.append(ErrorCode.NONE)
        if records:
            self._bump_epoch(group.group_id, data, records)
        return self._commit(token, group, data, records, LeaveResult(ErrorCode.NONE, tuple(errors)))

    def _touch(
        self,
        group: Group,
        member_id: str,
        *,
        session: int | None = None,
        join_by: int | None = None,
        synced: bool = False,
    ) -> None:
        """Move a classic member's deadlines, in the installed state and in a change being
        stored (which replaces it once stored), so that neither loses them: ``session`` its
        session's end; ``join_by`` when it must have joined again, unless already due;
        ``synced`` it has synced, nothing more is due."""
        for data in (group.consumer, self._pending_data(group.group_id)):
            if data is None or member_id not in data.members:
                continue
            if session is not None:
                data.session_deadlines[member_id] = session
            if join_by is not None:
                data.classic_deadlines.setdefault(member_id, join_by)
            if synced:
                data.classic_deadlines.pop(member_id, None)
        self._schedule(group)
