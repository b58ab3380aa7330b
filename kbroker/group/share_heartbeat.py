"""ShareGroupHeartbeat (KIP-932) in the group state machine: members join, heartbeat and leave
a share group, the group epoch rises with each change, the ``simple`` assignor computes the
target assignment over the partitions whose share-partition state is initialized, and each
member takes its target at once (share_group.py).

Before a subscribed partition is assigned, its share-partition state is set up at the share
coordinator: the partition is recorded as initializing and an ``InitializeShareState`` effect
asks the shell to initialize it (the group epoch as its state epoch, start offset -1: the
partition's leader applies ``share.auto.offset.reset`` when it first serves it); once that is
done (``share_state_initialized``) the partition is recorded as initialized and the group epoch
rises, so the next heartbeat assigns it. Kafka 4.3 writes the same records, but a heartbeat
later: a new group's first heartbeat writes epoch 2, the second computes the topics' metadata
hash (epoch 3) and only then asks for the initialization, whose partitions a later heartbeat
assigns (epoch 4); kbroker asks at the first heartbeat, and its first member gets partitions
one heartbeat interval sooner, at epoch 3.

Changes are stored before they take effect and before the answer goes out, through the same
machinery as consumer groups (consumer_heartbeat.py). Errors and their messages are Kafka
4.3's (asked with the same requests).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kbroker.group.consumer_heartbeat import (
    ConsumerGroupSettings,
    Drop,
    Handle,
    HeartbeatError,
    TopicsView,
)
from kbroker.group.events import (
    SHARE_GROUP,
    AdminResult,
    Effect,
    GroupConfig,
    GroupState,
    HeartbeatResult,
    InitializeShareState,
    Record,
    Reply,
    ShareHeartbeat,
    StoreRecords,
)
from kbroker.group.model import Group
from kbroker.group.offsets_store import GroupKey
from kbroker.group.share_group import (
    Assignment,
    ShareGroupData,
    ShareMember,
    TopicId,
    assign_shares,
)
from kbroker.group.share_records import (
    SHARE_CURRENT_ASSIGNMENT,
    SHARE_GROUP_METADATA,
    SHARE_MEMBER_METADATA,
    SHARE_STATE_PARTITIONS,
    SHARE_TARGET_MEMBER,
    SHARE_TARGET_METADATA,
    LoadedShareGroup,
    ShareCurrentValue,
    ShareEpochValue,
    ShareGroupKey,
    ShareMemberKey,
    ShareMemberValue,
    ShareStatePartitionsValue,
    ShareTargetEpochValue,
    ShareTargetValue,
    TopicPartitionsInfo,
)
from wire.errors import ErrorCode

SHARE_PROTOCOL_TYPE = "share"
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
# The group epoch a new share group starts at (see _share_heartbeat).
FIRST_SHARE_EPOCH = 2


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    members: tuple[ShareMember, ...] = ()


def _sorted(assignment: Assignment) -> dict[TopicId, tuple[int, ...]]:
    return {t: tuple(sorted(p)) for t, p in assignment.items() if p}


def _member_value(member: ShareMember) -> ShareMemberValue:
    return ShareMemberValue(
        member.rack_id,
        member.client_id,
        member.client_host,
        tuple(sorted(member.subscribed_topic_names)),
    )


def _tombstones(group_id: str, member_id: str) -> list[Record]:
    return [
        (ShareMemberKey(SHARE_CURRENT_ASSIGNMENT, group_id, member_id), None),
        (ShareMemberKey(SHARE_TARGET_MEMBER, group_id, member_id), None),
        (ShareMemberKey(SHARE_MEMBER_METADATA, group_id, member_id), None),
    ]


class ShareGroupProtocol:
    """The share group half of the group state machine."""

    config: GroupConfig
    _clock: Callable[[], int]
    _groups: dict[str, Group]
    rebalances: dict[str, int]
    _topics: TopicsView
    # The groups with a change being stored (consumer_heartbeat.py).
    _writing: dict[str, int]

    if TYPE_CHECKING:

        def coordinator_error(self, group_id: str) -> ErrorCode | None: ...

        def _schedule(self, group: Group) -> None: ...

        def _wait_for_write(self, group_id: str, handle: Handle, drop: Drop) -> bool: ...

        def _store_change(
            self,
            group_id: str,
            records: list[Record],
            on_stored: Callable[[], list[Effect]],
            on_failed: Callable[[ErrorCode], list[Effect]],
        ) -> StoreRecords: ...

    def _init_share_protocol(self, settings: Callable[[str], ConsumerGroupSettings]) -> None:
        """``settings``: a share group's session timeout and heartbeat interval."""
        self._share_settings = settings

    # --- ShareGroupHeartbeat --------------------------------------------------------------

    def share_heartbeat(self, token: int, req: ShareHeartbeat) -> list[Effect]:
        if self._wait_for_write(
            req.group_id,
            lambda: self.share_heartbeat(token, req),
            lambda error: [Reply(token, HeartbeatResult(error))],
        ):
            return []
        try:
            return self._share_heartbeat(token, req)
        except HeartbeatError as exc:
            return [Reply(token, HeartbeatResult(exc.error, exc.message))]

    def _validate_share(self, req: ShareHeartbeat) -> None:
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.INVALID_REQUEST, message)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        if req.member_epoch < LEAVE_EPOCH:
            raise invalid(f"MemberEpoch is invalid: {req.member_epoch}.")
        if req.member_epoch == JOIN_EPOCH and req.subscribed_topic_names is None:
            raise invalid("SubscribedTopicNames must be set in first request.")

    def _share_group(
        self, group_id: str, create: bool, records: list[Record]
    ) -> tuple[Group, ShareGroupData]:
        group = self._groups.get(group_id)
        if group is None:
            if not create:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = Group(group_id, GroupState.EMPTY, self._clock())
            self._groups[group_id] = group
            return group, ShareGroupData()
        if group.share is not None:
            return group, group.share.copy()
        empty_classic = group.consumer is None and not group.members
        if not (create and empty_classic and group.state is GroupState.EMPTY):
            raise HeartbeatError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            )
        if group.generation > 0:
            records.append((GroupKey(group_id), None))
        return group, ShareGroupData()

    def _share_heartbeat(self, token: int, req: ShareHeartbeat) -> list[Effect]:
        self._validate_share(req)
        error = self.coordinator_error(req.group_id)
        if error is not None:
            raise HeartbeatError(error)
        now = self._clock()
        records: list[Record] = []
        group, data = self._share_group(req.group_id, req.member_epoch == JOIN_EPOCH, records)
        group_id = req.group_id
        member = data.members.get(req.member_id)
        if req.member_epoch == LEAVE_EPOCH:
            if member is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {group_id}.",
                )
            self._remove_share_member(group_id, data, req.member_id, records)
            result = HeartbeatResult(ErrorCode.NONE, member_id=req.member_id, member_epoch=-1)
            return self._commit_share(token, group, data, records, result, [])
        if member is None:
            if req.member_epoch != JOIN_EPOCH:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {group_id}.",
                )
            if len(data.members) >= self.config.share_max_size:
                raise HeartbeatError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of "
                    f"{self.config.share_max_size} members.",
                )
            member = ShareMember(req.member_id)
        elif req.member_epoch not in (JOIN_EPOCH, member.member_epoch) and (
            req.member_epoch != member.previous_member_epoch
        ):
            relation = "greater" if req.member_epoch > member.member_epoch else "smaller"
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a {relation} member epoch ({req.member_epoch}) "
                f"than the one known by the group coordinator ({member.member_epoch}). The "
                "member must abandon all its partitions and rejoin.",
            )
        new_here = req.member_id not in (group.share.members if group.share else {})
        updated = replace(
            member,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=req.client_id,
            client_host=req.client_host,
            subscribed_topic_names=(
                frozenset(req.subscribed_topic_names)
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
        )
        bump = data.group_epoch == 0
        if new_here or _member_value(updated) != _member_value(member):
            records.append(
                (
                    ShareMemberKey(SHARE_MEMBER_METADATA, group_id, req.member_id),
                    _member_value(updated),
                )
            )
            bump |= updated.subscribed_topic_names != member.subscribed_topic_names
        data.members[req.member_id] = updated
        effects: list[Effect] = []
        initialize = self._partitions_to_initialize(group_id, data, records)
        metadata_hash = _initialized_hash(data, self._topics)
        if metadata_hash != data.metadata_hash:
            data.metadata_hash = metadata_hash
            bump = True
        if bump:
            # A new share group's first epoch is 2 on Kafka 4.3 (its first ShareGroupMetadata
            # record, read back from __consumer_offsets), one more than a bump.
            step = FIRST_SHARE_EPOCH if data.group_epoch == 0 else 1
            self._bump_share_epoch(group_id, data, records, step)
        if initialize:
            # At the group epoch: a new group's partitions at state epoch 2, as Kafka 4.3's
            # first share snapshots have it.
            effects.append(InitializeShareState(group_id, tuple(initialize), data.group_epoch))
        if data.group_epoch > data.assignment_epoch:
            self._assign_shares(group_id, data, records, now)
        before = data.members[req.member_id]
        target = data.targets.get(req.member_id, {})
        reconciled = before
        if before.member_epoch != data.assignment_epoch or before.assigned != target:
            reconciled = replace(
                before,
                member_epoch=data.assignment_epoch,
                previous_member_epoch=before.member_epoch,
                assigned=target,
            )
        if reconciled != before or new_here:
            data.members[req.member_id] = reconciled
            records.append(
                (
                    ShareMemberKey(SHARE_CURRENT_ASSIGNMENT, group_id, req.member_id),
                    ShareCurrentValue(
                        reconciled.member_epoch,
                        reconciled.previous_member_epoch,
                        0,
                        _sorted(reconciled.assigned),
                    ),
                )
            )
        settings = self._share_settings(group_id)
        data.session_deadlines[req.member_id] = now + settings.session_timeout_ms
        send = req.member_epoch == JOIN_EPOCH or reconciled.assigned != member.assigned
        result = HeartbeatResult(
            ErrorCode.NONE,
            member_id=req.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            assignment=reconciled.assigned if send else None,
        )
        return self._commit_share(token, group, data, records, result, effects)

    def _remove_share_member(
        self, group_id: str, data: ShareGroupData, member_id: str, records: list[Record]
    ) -> None:
        data.remove_member(member_id)
        records.extend(_tombstones(group_id, member_id))
        self._bump_share_epoch(group_id, data, records)

    def _bump_share_epoch(
        self, group_id: str, data: ShareGroupData, records: list[Record], step: int = 1
    ) -> None:
        """A new group epoch: a rebalance (Kafka's share-group-rebalance sensor)."""
        data.group_epoch += step
        self.rebalances[SHARE_GROUP] += 1
        records.append(
            (
                ShareGroupKey(SHARE_GROUP_METADATA, group_id),
                ShareEpochValue(data.group_epoch, data.metadata_hash),
            )
        )

    def _partitions_to_initialize(
        self, group_id: str, data: ShareGroupData, records: list[Record]
    ) -> list[tuple[TopicId, int]]:
        """The subscribed partitions with no share-partition state yet, now initializing."""
        todo: list[tuple[TopicId, int]] = []
        for name in sorted(data.subscribed_topic_names()):
            spec = self._topics.topic(name)
            if spec is None:
                continue
            known = data.initialized.get(spec.topic_id, frozenset()) | data.initializing.get(
                spec.topic_id, frozenset()
            )
            new = [p for p in range(spec.num_partitions) if p not in known]
            if new:
                data.initializing[spec.topic_id] = data.initializing.get(
                    spec.topic_id, frozenset()
                ) | frozenset(new)
                todo.extend((spec.topic_id, p) for p in new)
        if todo:
            records.append(self._state_partitions_record(group_id, data))
        return todo

    def _state_partitions_record(self, group_id: str, data: ShareGroupData) -> Record:
        def infos(table: dict[TopicId, frozenset[int]]) -> tuple[TopicPartitionsInfo, ...]:
            return tuple(
                TopicPartitionsInfo(t, self._topics.name_of(t) or "", tuple(sorted(ps)))
                for t, ps in sorted(table.items(), key=lambda item: item[0].bytes)
                if ps
            )

        return (
            ShareGroupKey(SHARE_STATE_PARTITIONS, group_id),
            ShareStatePartitionsValue(infos(data.initializing), infos(data.initialized)),
        )

    def _assign_shares(
        self, group_id: str, data: ShareGroupData, records: list[Record], now: int
    ) -> None:
        subscriptions = {}
        for m in data.members.values():
            ids = set()
            for name in m.subscribed_topic_names:
                spec = self._topics.topic(name)
                if spec is not None:
                    ids.add(spec.topic_id)
            subscriptions[m.member_id] = frozenset(ids)
        result = assign_shares(subscriptions, data.initialized, data.targets)
        for member_id, target in result.items():
            if target != data.targets.get(member_id):
                data.targets[member_id] = target
                records.append(
                    (
                        ShareMemberKey(SHARE_TARGET_MEMBER, group_id, member_id),
                        ShareTargetValue(_sorted(target)),
                    )
                )
        data.assignment_epoch = data.group_epoch
        records.append(
            (
                ShareGroupKey(SHARE_TARGET_METADATA, group_id),
                ShareTargetEpochValue(data.assignment_epoch, now),
            )
        )

    # --- initialization of share partitions -----------------------------------------------

    def share_state_initialized(
        self, group_id: str, outcome: dict[tuple[TopicId, int], ErrorCode]
    ) -> list[Effect]:
        """The outcome of an ``InitializeShareState`` effect: the partitions initialized are
        recorded so, and the group epoch rises so that they are assigned; the others are set
        up again at the next heartbeat."""
        handle: Handle = lambda: self.share_state_initialized(group_id, outcome)  # noqa: E731
        if self._wait_for_write(group_id, handle, lambda _error: []):
            return []
        group = self._groups.get(group_id)
        if group is None or group.share is None or self.coordinator_error(group_id) is not None:
            return []
        data = group.share.copy()
        for (topic_id, partition), error in outcome.items():
            pending = data.initializing.get(topic_id, frozenset())
            if partition not in pending:
                continue
            data.initializing[topic_id] = pending - {partition}
            if not data.initializing[topic_id]:
                del data.initializing[topic_id]
            if error == ErrorCode.NONE:
                data.initialized[topic_id] = data.initialized.get(topic_id, frozenset()) | {
                    partition
                }
        records = [self._state_partitions_record(group_id, data)]
        metadata_hash = _initialized_hash(data, self._topics)
        if metadata_hash != data.metadata_hash:
            data.metadata_hash = metadata_hash
            self._bump_share_epoch(group_id, data, records)

        def stored() -> list[Effect]:
            self._install_share(group, data)
            return []

        return [self._store_change(group_id, records, stored, lambda _error: [])]

    # --- share-group offsets (DescribeShareGroupOffsets, Alter..., Delete...) -------------

    def share_offsets_refusal(self, group_id: str, altering: bool) -> AdminResult | None:
        """Why a share group's offsets may not be described or changed now, or None. A group
        that does not exist may be: describing finds nothing, altering creates it (as Kafka
        4.3 does)."""
        error = self.coordinator_error(group_id)
        if error is not None:
            return AdminResult(error)
        group = self._groups.get(group_id)
        if group is None:
            return None
        if group.share is None:
            if not group.members and group.consumer is None and altering:
                return None
            return AdminResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            )
        if altering and group.share.members:
            return AdminResult(
                ErrorCode.NON_EMPTY_GROUP,
                f"Share group {group_id} has members: its offsets cannot be changed.",
            )
        return None

    def initialized_partitions(self, group_id: str) -> dict[TopicId, frozenset[int]]:
        group = self._groups.get(group_id)
        if group is None or group.share is None:
            return {}
        return dict(group.share.initialized)

    def change_share_partitions(
        self,
        token: int,
        group_id: str,
        initialized: Iterable[tuple[TopicId, int]],
        removed_topics: Iterable[TopicId],
    ) -> list[Effect]:
        """Record share partitions set up (AlterShareGroupOffsets) or whose state was deleted
        (DeleteShareGroupOffsets); creates an empty share group if there is none."""
        if self._wait_for_write(
            group_id,
            lambda: self.change_share_partitions(token, group_id, initialized, removed_topics),
            lambda error: [Reply(token, AdminResult(error))],
        ):
            return []
        refusal = self.share_offsets_refusal(group_id, altering=True)
        if refusal is not None:
            return [Reply(token, refusal)]
        records: list[Record] = []
        group, data = self._share_group(group_id, True, records)
        if data.group_epoch == 0:
            self._bump_share_epoch(group_id, data, records)
        for topic_id, partition in initialized:
            data.initialized[topic_id] = data.initialized.get(topic_id, frozenset()) | {partition}
        for topic_id in removed_topics:
            data.initialized.pop(topic_id, None)
            data.initializing.pop(topic_id, None)
        records.append(self._state_partitions_record(group_id, data))

        def stored() -> list[Effect]:
            self._install_share(group, data)
            return [Reply(token, AdminResult(ErrorCode.NONE))]

        def failed(error: ErrorCode) -> list[Effect]:
            return [Reply(token, AdminResult(error))]

        return [self._store_change(group_id, records, stored, failed)]

    def share_partitions(self, group_id: str) -> list[tuple[TopicId, int]]:
        """The share partitions of a share group that have (or may have) state."""
        group = self._groups.get(group_id)
        if group is None or group.share is None:
            return []
        out = []
        for table in (group.share.initialized, group.share.initializing):
            out.extend((t, p) for t, ps in table.items() for p in sorted(ps))
        return out

    # --- persistence ----------------------------------------------------------------------

    def _commit_share(
        self,
        token: int,
        group: Group,
        data: ShareGroupData,
        records: list[Record],
        result: HeartbeatResult,
        effects: list[Effect],
    ) -> list[Effect]:
        def stored() -> list[Effect]:
            self._install_share(group, data)
            return [Reply(token, result), *effects]

        def failed(error: ErrorCode) -> list[Effect]:
            return [Reply(token, HeartbeatResult(error, member_id=result.member_id))]

        if not records:
            return stored()
        return [self._store_change(group.group_id, records, stored, failed)]

    def _install_share(self, group: Group, data: ShareGroupData) -> None:
        group.share = data
        group.protocol_type = SHARE_PROTOCOL_TYPE
        state = GroupState(data.state_name())
        if state is not group.state:
            group.transition(state, self._clock())
        self._schedule(group)

    def _expire_share(self, group: Group, now: int, effects: list[Effect]) -> None:
        """Fence the members whose session ended."""
        data = group.share
        if data is None or group.group_id in self._writing:
            return
        expired = sorted(m for m, d in data.session_deadlines.items() if d <= now)
        if not expired:
            return
        changed = data.copy()
        records: list[Record] = []
        for member_id in expired:
            if member_id in changed.members:
                self._remove_share_member(group.group_id, changed, member_id, records)
            else:
                changed.session_deadlines.pop(member_id, None)
        if not records:
            self._install_share(group, changed)
            return

        def stored() -> list[Effect]:
            self._install_share(group, changed)
            return []

        effects.append(self._store_change(group.group_id, records, stored, lambda _error: []))

    # --- loading and describing -----------------------------------------------------------

    def _load_share_group(self, group: Group, loaded: LoadedShareGroup) -> None:
        """A share group replayed from its records: members get a full session from now."""
        now = self._clock()
        data = ShareGroupData()
        if loaded.epoch is not None:
            data.group_epoch = loaded.epoch.epoch
            data.metadata_hash = loaded.epoch.metadata_hash
        if loaded.target_epoch is not None:
            data.assignment_epoch = loaded.target_epoch.assignment_epoch
        if loaded.state_partitions is not None:
            for info in loaded.state_partitions.initialized:
                data.initialized[info.topic_id] = frozenset(info.partitions)
            for info in loaded.state_partitions.initializing:
                data.initializing[info.topic_id] = frozenset(info.partitions)
        settings = self._share_settings(group.group_id)
        for member_id, meta in loaded.members.items():
            current = loaded.current.get(member_id)
            member = ShareMember(
                member_id,
                meta.rack_id,
                meta.client_id,
                meta.client_host,
                frozenset(meta.subscribed_topic_names),
            )
            if current is not None:
                member = replace(
                    member,
                    member_epoch=current.member_epoch,
                    previous_member_epoch=current.previous_member_epoch,
                    assigned={t: frozenset(p) for t, p in current.assigned.items()},
                )
            data.members[member_id] = member
            data.session_deadlines[member_id] = now + settings.session_timeout_ms
        for member_id, target in loaded.targets.items():
            if member_id in data.members:
                data.targets[member_id] = {t: frozenset(p) for t, p in target.partitions.items()}
        group.share = data
        group.protocol_type = SHARE_PROTOCOL_TYPE
        group.state = GroupState(data.state_name())

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        error = self.coordinator_error(group_id)
        if error is not None:
            return ShareGroupDescription(group_id, error)
        group = self._groups.get(group_id)
        if group is None:
            return ShareGroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            )
        if group.share is None:
            return ShareGroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            )
        data = group.share
        return ShareGroupDescription(
            group_id,
            ErrorCode.NONE,
            state=data.state_name(),
            group_epoch=data.group_epoch,
            assignment_epoch=data.assignment_epoch,
            members=tuple(data.members.values()),
        )

    def share_group_records(self, group: Group) -> list[Record]:
        """Tombstones for every record of a share group (DeleteGroups, expiry)."""
        data = group.share
        if data is None:
            return []
        records: list[Record] = []
        for member_id in data.members:
            records.extend(_tombstones(group.group_id, member_id))
        for record in (SHARE_STATE_PARTITIONS, SHARE_TARGET_METADATA, SHARE_GROUP_METADATA):
            records.append((ShareGroupKey(record, group.group_id), None))
        return records


def _initialized_hash(data: ShareGroupData, topics: TopicsView) -> int:
    """A hash of the initialized partitions of the subscribed topics: when it changes, the
    assignment may."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(data.subscribed_topic_names()):
        spec = topics.topic(name)
        if spec is None:
            continue
        partitions = sorted(data.initialized.get(spec.topic_id, frozenset()))
        digest.update(f"{name}/{spec.topic_id}/{partitions}".encode())
    return int.from_bytes(digest.digest(), "big", signed=True) or 1
