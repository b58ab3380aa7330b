"""What partition leaders and the group coordinator call to keep share-partition state (KIP-932).

A share partition's durable state (its start offset, the in-flight batches with their delivery
states and counts, the state epoch and the leader epoch of its writer) lives with the share
coordinator in ``__share_group_state``. The share partitions on each partition leader and the
group coordinator reach it through a ``SharePersister``, which routes each (group, topic id,
partition) key to its share coordinator, on this broker or another one.

Errors come back as Kafka's codes: per partition in the maps of ``initialize``, ``delete`` and
``read_summary``; as ``PersisterError`` from ``read`` and ``write``, which handle one partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from wire.errors import ErrorCode

# Kafka's codes for a record's delivery state in share-partition state (RecordState):
# acquired records are persisted as available, so a new leader delivers them again.
AVAILABLE = 0
ACKNOWLEDGED = 2
ARCHIVED = 4


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Offsets ``first_offset`` to ``last_offset`` (inclusive) in one delivery state."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartitionState:
    """One share partition's durable state."""

    state_epoch: int
    # -1: not initialized with an offset (the leader applies share.auto.offset.reset).
    start_offset: int
    batches: tuple[StateBatch, ...]
    leader_epoch: int = -1
    # Records at or past the start offset that are acknowledged or archived; -1: unknown
    # (KIP-1226's lag; writers before Kafka 4.2 do not report it).
    delivery_complete_count: int = -1


class PersisterError(Exception):
    """A read or write refused by the share coordinator (FENCED_STATE_EPOCH,
    FENCED_LEADER_EPOCH, ...) or that could not reach it in time."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message


class SharePersister(Protocol):
    async def initialize(
        self, group_id: str, partitions: Sequence[tuple[uuid.UUID, int, int, int]]
    ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        """Initialize (topic id, partition, state epoch, start offset) for each partition;
        the error of each (topic id, partition)."""
        ...

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> SharePartitionState:
        """The partition's state, read by the leader of ``leader_epoch``; raises
        ``PersisterError``."""
        ...

    async def write(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state: SharePartitionState
    ) -> None:
        """Store the partition's state (its batches combined with those stored); raises
        ``PersisterError``."""
        ...

    async def delete(
        self, group_id: str, partitions: Sequence[tuple[uuid.UUID, int]]
    ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        """Delete the state of each (topic id, partition); the error of each."""
        ...

    async def read_summary(
        self,
        group_id: str,
        partitions: Sequence[tuple[uuid.UUID, int]],
        leader_epoch: int = -1,
    ) -> dict[tuple[uuid.UUID, int], SharePartitionState | ErrorCode]:
        """The state of each (topic id, partition) without its batches (epochs, start offset
        and delivery complete count), or its error."""
        ...
