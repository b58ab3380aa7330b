"""Offsets and admin operations of the group state machine: OffsetCommit validation, committed
offsets, OffsetDelete, offset expiry (KIP-211), DeleteGroups, DescribeGroups and ListGroups.

``GroupOffsets`` is a part of ``GroupStateMachine`` (kbroker/group/state_machine.py), kept here
because it concerns what a group has committed rather than who its members are.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from kbroker.group.consumer_group import ConsumerMember
from kbroker.group.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from kbroker.group.events import (
    CLASSIC_GROUP,
    CONSUMER_GROUP,
    SHARE_GROUP,
    GroupConfig,
    GroupDescription,
    GroupListing,
    GroupState,
    MemberDescription,
    Record,
    TopicPartition,
)
from kbroker.group.model import Group
from kbroker.group.offsets_store import NO_TIMESTAMP, GroupKey, OffsetKey, OffsetValue
from wire.errors import ErrorCode

# OffsetCommit v9 is the first a member of a consumer group (KIP-848) may use.
FIRST_MEMBER_EPOCH_COMMIT_VERSION = 9


class GroupOffsets:
    """The offsets half of the group state machine."""

    config: GroupConfig
    _clock: Callable[[], int]
    _groups: dict[str, Group]

    if TYPE_CHECKING:

        def partition_for(self, group_id: str) -> int: ...

        def coordinator_error(self, group_id: str) -> ErrorCode | None: ...

        def _schedule(self, group: Group) -> None: ...

        def consumer_group_records(self, group: Group) -> list[Record]: ...

        def share_group_records(self, group: Group) -> list[Record]: ...

    # --- offsets --------------------------------------------------------------------------

    def validate_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        version: int,
    ) -> ErrorCode:
        """Whether an OffsetCommit (of API ``version``) may proceed. Generation -1 without a
        member id is a commit from a consumer that does not use group membership ("simple"
        commit): allowed while the group is Empty, and it creates the group if there is none."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        error = self.coordinator_error(group_id)
        if error is not None:
            return error
        group = self._groups.get(group_id)
        if group is None:
            if generation_id < 0:
                self._groups[group_id] = Group(group_id, GroupState.EMPTY, self._clock())
                return ErrorCode.NONE
            # OffsetCommit v9 introduced GROUP_ID_NOT_FOUND here; older clients expect this.
            return ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION
        if group.consumer is not None:
            return _consumer_member_check(group, member_id, generation_id, version)
        if group.share is not None:
            # A share group keeps no offsets (KIP-932), as Kafka 4.3 answers.
            return ErrorCode.GROUP_ID_NOT_FOUND
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group_instance_id is not None:
                known = group.static_members.get(group_instance_id)
                if known is None:
                    return ErrorCode.UNKNOWN_MEMBER_ID
                if known != member_id:
                    return ErrorCode.FENCED_INSTANCE_ID
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif group.state is not GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.COMPLETING_REBALANCE:
            # The member knows the new generation but has no assignment yet.
            return ErrorCode.REBALANCE_IN_PROGRESS
        if member is not None:
            member.deadline_ms = self._clock() + member.session_timeout_ms
            self._schedule(group)
        return ErrorCode.NONE

    def validate_txn_commit(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Whether a TxnOffsetCommit may proceed (Kafka's checks): a group that does not exist
        is created; v3+ requests naming a member and generation are checked against them."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        error = self.coordinator_error(group_id)
        if error is not None:
            return error
        group = self._groups.get(group_id)
        if group is None:
            self._groups[group_id] = Group(group_id, GroupState.EMPTY, self._clock())
            return ErrorCode.NONE
        if group.consumer is not None:
            return _consumer_member_check(group, member_id, generation_id, None)
        if group.share is not None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id and member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+ names the member asking (KIP-848): in a consumer group it must be a
        member at that epoch. Without a member (id null, epoch -1) anyone may fetch."""
        group = self._groups.get(group_id)
        if group is None or group.consumer is None or (member_id is None and member_epoch == -1):
            return ErrorCode.NONE
        member = group.consumer.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return _epoch_check(member, member_epoch)

    def add_pending_txn_offsets(
        self, group_id: str, producer_id: int, offsets: dict[TopicPartition, OffsetValue]
    ) -> None:
        """TxnOffsetCommit offsets, once persisted: invisible until the marker."""
        group = self._groups.get(group_id)
        if group is not None:
            group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)

    def complete_txn(self, producer_id: int, partition: int, commit: bool) -> None:
        """The marker of ``producer_id``'s transaction reached offsets partition
        ``partition``: its pending offsets there become committed, or vanish on abort."""
        for group_id, group in self._groups.items():
            if self.partition_for(group_id) != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending is not None and commit:
                group.offsets.update(pending)

    def unstable(self, group_id: str, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Partitions with a transactional commit waiting for its marker (OffsetFetch
        require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        group = self._groups.get(group_id)
        if group is None or not group.pending_txn_offsets:
            return set()
        waiting = {tp for offsets in group.pending_txn_offsets.values() for tp in offsets}
        return waiting.intersection(partitions)

    def check_offset_metadata(self, metadata: str | None) -> ErrorCode:
        if metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        return ErrorCode.NONE

    def apply_offsets(self, group_id: str, offsets: dict[TopicPartition, OffsetValue]) -> None:
        """Committed offsets, once persisted."""
        group = self._groups.get(group_id)
        if group is None:
            return
        group.offsets.update(offsets)

    def committed(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetValue | None]:
        """Committed offsets of ``partitions`` (all of the group's when None; None values for
        partitions without one). The caller checks ``coordinator_error`` first."""
        group = self._groups.get(group_id)
        table = group.offsets if group is not None else {}
        if partitions is None:
            return dict(table)
        return {tp: table.get(tp) for tp in partitions}

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode], list[Record]]:
        """OffsetDelete: the offsets of topics the group still subscribes to stay."""
        wanted = list(partitions)
        error = ErrorCode.INVALID_GROUP_ID if not group_id else self.coordinator_error(group_id)
        if error is not None:
            return error, {}, []
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}, []
        subscribed: set[str] | None = set()
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            members = group.members or (group.consumer is not None and group.consumer.members)
            subscribed = group.subscribed_topics() if members else set()
        elif group.state is not GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP, {}, []
        errors: dict[TopicPartition, ErrorCode] = {}
        records: list[Record] = []
        for tp in wanted:
            if subscribed is None or tp[0] in subscribed:
                errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            errors[tp] = ErrorCode.NONE
            if group.offsets.pop(tp, None) is not None:
                records.append((OffsetKey(group_id, tp[0], tp[1]), None))
        return ErrorCode.NONE, errors, records

    def expire_offsets(
        self, pending: Mapping[str, Collection[TopicPartition]] | None = None
    ) -> list[Record]:
        """offsets.retention.minutes (KIP-211): offsets of an Empty group expire a retention
        period after it became empty; a simple group's (no protocol type) and the offsets of
        topics a Stable consumer group no longer subscribes to, after their commit. An explicit
        expire timestamp wins. An Empty group left without offsets is deleted.

        ``pending``: per group, partitions with a commit written but not yet applied; as in
        Kafka, they do not expire (the newer commit is on its way), and neither does a group
        that has any."""
        pending = pending or {}
        now = self._clock()
        retention = self.config.offsets_retention_ms
        records: list[Record] = []
        for group_id, group in list(self._groups.items()):
            if self.coordinator_error(group_id) is not None:
                continue
            if group.protocol_type is None:
                candidates, base = group.offsets, None
            elif group.state is GroupState.EMPTY:
                candidates, base = group.offsets, group.state_timestamp_ms
            elif group.state is GroupState.STABLE and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                topics = group.subscribed_topics()
                if topics is None:
                    continue
                candidates = {tp: v for tp, v in group.offsets.items() if tp[0] not in topics}
                base = None
            else:
                continue
            waiting = pending.get(group_id, ())
            for tp, value in list(candidates.items()):
                if tp in waiting:
                    continue
                if value.expire_timestamp != NO_TIMESTAMP:
                    expired = value.expire_timestamp <= now
                else:
                    start = value.commit_timestamp if base is None else base
                    expired = start + retention <= now
                if expired:
                    del group.offsets[tp]
                    records.append((OffsetKey(group_id, tp[0], tp[1]), None))
            if (
                group.state is GroupState.EMPTY
                # A share group keeps no offsets but its share partitions' state: it stays
                # until deleted, as in Kafka.
                and group.share is None
                and not group.offsets
                and not group.pending_txn_offsets
                and group_id not in pending
            ):
                del self._groups[group_id]
                records.extend(self.consumer_group_records(group))
                records.extend(self.share_group_records(group))
                records.append((GroupKey(group_id), None))
        return records

    # --- admin ----------------------------------------------------------------------------

    def delete_groups(self, group_ids: Iterable[str]) -> tuple[dict[str, ErrorCode], list[Record]]:
        """DeleteGroups: only Empty groups (or ones with nothing but offsets) go."""
        errors: dict[str, ErrorCode] = {}
        records: list[Record] = []
        for group_id in group_ids:
            error = ErrorCode.INVALID_GROUP_ID if not group_id else self.coordinator_error(group_id)
            if error is not None:
                errors[group_id] = error
                continue
            group = self._groups.get(group_id)
            if group is None:
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if group.state is not GroupState.EMPTY:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
                continue
            del self._groups[group_id]
            records.extend((OffsetKey(group_id, t, p), None) for t, p in group.offsets)
            records.extend(self.consumer_group_records(group))
            records.extend(self.share_group_records(group))
            records.append((GroupKey(group_id), None))
            errors[group_id] = ErrorCode.NONE
        return errors, records

    def is_empty_share_group(self, group_id: str) -> bool:
        """Whether the group is a share group without members (DeleteGroups may take it)."""
        group = self._groups.get(group_id)
        return group is not None and group.share is not None and not group.share.members

    def is_modern_group(self, group_id: str) -> bool:
        """Whether the group is a consumer group of KIP-848's protocol or a share group."""
        group = self._groups.get(group_id)
        return group is not None and (group.consumer is not None or group.share is not None)

    def describe(self, group_id: str) -> GroupDescription | None:
        """None if there is no such classic group. Member metadata and assignments are only
        shown in a Stable group, as Kafka does."""
        group = self._groups.get(group_id)
        if group is None or group.consumer is not None or group.share is not None:
            return None
        stable = group.state is GroupState.STABLE
        return GroupDescription(
            group_id,
            group.state,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            tuple(
                MemberDescription(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata_for(group.protocol_name) if stable else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            ),
        )

    def list_groups(self) -> list[GroupListing]:
        return [
            GroupListing(
                g.group_id,
                g.protocol_type or "",
                g.state,
                CONSUMER_GROUP
                if g.consumer is not None
                else SHARE_GROUP
                if g.share is not None
                else CLASSIC_GROUP,
            )
            for g in self._groups.values()
            if self.coordinator_error(g.group_id) is None
        ]


def _consumer_member_check(
    group: Group, member_id: str, member_epoch: int, version: int | None
) -> ErrorCode:
    """An offset commit to a consumer group (Kafka's ConsumerGroup.validateOffsetCommit):
    without a member epoch only while the group has no member; otherwise from a member at
    its current epoch, with OffsetCommit v9+ unless it uses the classic protocol (``version``
    None: a TxnOffsetCommit)."""
    data = group.consumer
    assert data is not None
    if member_epoch < 0 and not data.members:
        return ErrorCode.NONE
    member = data.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if (
        member.classic is None
        and version is not None
        and version < FIRST_MEMBER_EPOCH_COMMIT_VERSION
    ):
        return ErrorCode.UNSUPPORTED_VERSION
    return _epoch_check(member, member_epoch)


def _epoch_check(member: ConsumerMember, member_epoch: int) -> ErrorCode:
    """A member's epoch in an offset request; a classic member's is its generation."""
    if member.member_epoch == member_epoch:
        return ErrorCode.NONE
    if member.classic is not None:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.STALE_MEMBER_EPOCH
