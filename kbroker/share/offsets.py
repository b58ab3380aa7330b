"""A share group's offsets (KIP-932): DescribeShareGroupOffsets, AlterShareGroupOffsets and
DeleteShareGroupOffsets, on the group's coordinator, between the group coordinator (which
share partitions the group has state for) and the share persister (that state).

- Describing names each partition's share-partition start offset, the leader epoch of its last
  writer and its lag (KIP-1226: records from the start offset to the partition's end that are
  not yet acknowledged or archived; the high watermark comes from the partition's leader,
  here or another broker: kbroker/share/end_offsets.py; -1 when it cannot be told). A
  partition without state, or of a topic that does not exist, answers a start offset of -1;
  a group that does not exist answers no partition, as Kafka 4.3 does.
- Altering sets the start offsets of an empty (or new) share group: each partition's state is
  initialized again with the next state epoch, which fences its leader's cached state.
- Deleting removes the state of the group's partitions of the topics named.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbroker.group.events import AdminResult
from kbroker.share.persister_api import SharePartitionState
from wire.errors import ErrorCode

if TYPE_CHECKING:
    from kbroker.broker import Broker

UNKNOWN_PARTITION = "This server does not host this topic-partition."


@dataclass(frozen=True, slots=True)
class ShareOffset:
    topic: str
    topic_id: uuid.UUID
    partition: int
    start_offset: int = -1
    leader_epoch: int = -1
    lag: int = -1
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


class ShareGroupOffsets:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def describe(
        self, group_id: str, wanted: Sequence[tuple[str, Sequence[int]]] | None
    ) -> tuple[AdminResult | None, list[ShareOffset]]:
        refusal = self._broker.group_coordinator.core.share_offsets_refusal(group_id, False)
        if refusal is not None:
            return refusal, []
        initialized = self._broker.group_coordinator.core.initialized_partitions(group_id)
        rows: list[ShareOffset] = []
        if wanted is None:
            for topic_id, partitions in initialized.items():
                info = self._broker.metadata.topic_by_id(topic_id)
                if info is not None:
                    rows.extend(ShareOffset(info.name, topic_id, p) for p in sorted(partitions))
        else:
            for name, partitions in wanted:
                info = self._broker.metadata.topic(name)
                topic_id = info.topic_id if info is not None else uuid.UUID(int=0)
                rows.extend(ShareOffset(name, topic_id, p) for p in partitions)
        known = [
            (r.topic_id, r.partition)
            for r in rows
            if r.partition in initialized.get(r.topic_id, frozenset())
        ]
        summary = await self._broker.share_persister.read_summary(group_id, known) if known else {}
        high_watermarks = await self._broker.leader_end_offsets.high_watermarks(
            (r.topic, r.partition)
            for r in rows
            if isinstance(state := summary.get((r.topic_id, r.partition)), SharePartitionState)
            and state.start_offset >= 0
        )
        out = []
        for row in sorted(rows, key=lambda r: (r.topic, r.partition)):
            found = summary.get((row.topic_id, row.partition))
            if isinstance(found, SharePartitionState) and found.start_offset >= 0:
                out.append(
                    ShareOffset(
                        row.topic,
                        row.topic_id,
                        row.partition,
                        found.start_offset,
                        found.leader_epoch,
                        _lag(high_watermarks.get((row.topic, row.partition)), found),
                    )
                )
            elif isinstance(found, ErrorCode) and found != ErrorCode.NONE:
                out.append(ShareOffset(row.topic, row.topic_id, row.partition, error=found))
            else:
                out.append(ShareOffset(row.topic, row.topic_id, row.partition, leader_epoch=0))
        return None, out

    async def alter(
        self, group_id: str, wanted: Sequence[tuple[str, int, int]]
    ) -> tuple[AdminResult | None, list[ShareOffset]]:
        """Set (topic, partition, start offset) of an empty share group."""
        refusal = self._broker.group_coordinator.core.share_offsets_refusal(group_id, True)
        if refusal is not None:
            return refusal, []
        rows = []
        valid: list[ShareOffset] = []
        for name, partition, start in wanted:
            info = self._broker.metadata.topic(name)
            if info is None or not 0 <= partition < len(info.partitions):
                rows.append(
                    ShareOffset(
                        name,
                        info.topic_id if info is not None else uuid.UUID(int=0),
                        partition,
                        error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        message=UNKNOWN_PARTITION,
                    )
                )
                continue
            row = ShareOffset(name, info.topic_id, partition, start)
            valid.append(row)
        keys = [(r.topic_id, r.partition) for r in valid]
        current = await self._broker.share_persister.read_summary(group_id, keys) if keys else {}
        requests = []
        for row in valid:
            state = current.get((row.topic_id, row.partition))
            epoch = state.state_epoch + 1 if isinstance(state, SharePartitionState) else 0
            requests.append((row.topic_id, row.partition, epoch, row.start_offset))
        outcome = (
            await self._broker.share_persister.initialize(group_id, requests) if requests else {}
        )
        done = []
        for row in valid:
            error = outcome.get((row.topic_id, row.partition), ErrorCode.UNKNOWN_SERVER_ERROR)
            rows.append(ShareOffset(row.topic, row.topic_id, row.partition, error=error))
            if error == ErrorCode.NONE:
                done.append((row.topic_id, row.partition))
        result = await self._broker.group_coordinator.change_share_partitions(group_id, done, [])
        self._broker.share_partitions.forget_group(group_id)
        return (None if result.error == ErrorCode.NONE else result), rows

    async def delete(
        self, group_id: str, topics: Sequence[str]
    ) -> tuple[AdminResult | None, list[ShareOffset]]:
        """Delete the state of an empty share group's partitions of ``topics``."""
        refusal = self._broker.group_coordinator.core.share_offsets_refusal(group_id, True)
        if refusal is not None:
            return refusal, []
        initialized = self._broker.group_coordinator.core.initialized_partitions(group_id)
        rows = []
        removed = []
        for name in topics:
            info = self._broker.metadata.topic(name)
            if info is None:
                rows.append(
                    ShareOffset(
                        name,
                        uuid.UUID(int=0),
                        -1,
                        error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        message=UNKNOWN_PARTITION,
                    )
                )
                continue
            partitions = sorted(initialized.get(info.topic_id, frozenset()))
            error = ErrorCode.NONE
            if partitions:
                outcome = await self._broker.share_persister.delete(
                    group_id, [(info.topic_id, p) for p in partitions]
                )
                error = next((e for e in outcome.values() if e != ErrorCode.NONE), ErrorCode.NONE)
            if error == ErrorCode.NONE:
                removed.append(info.topic_id)
            rows.append(ShareOffset(name, info.topic_id, -1, error=error))
        result = await self._broker.group_coordinator.change_share_partitions(group_id, [], removed)
        self._broker.share_partitions.forget_group(group_id)
        return (None if result.error == ErrorCode.NONE else result), rows


def _lag(high_watermark: int | None, state: SharePartitionState) -> int:
    if high_watermark is None or state.delivery_complete_count < 0:
        return -1
    return max(high_watermark - state.start_offset - state.delivery_complete_count, 0)
