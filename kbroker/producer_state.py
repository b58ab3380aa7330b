"""Idempotent producer state of one partition (KIP-98): pure, no IO, no clock.

For each producer id the state keeps its current epoch and the metadata of its last five
batches (first/last sequence, first/last offset, max timestamp). The partition log feeds it
batch headers:

- `prepare(batches)` checks the batches of one leader append and returns either a
  `PendingAppend` (commit it once the bytes are written) or the `BatchMetadata` of a duplicate;
  a violation raises `KafkaError`.
- `replay(batch)` applies a batch already in the log, without checks (recovery, follower
  appends, rebuild after truncation).

Rules (Kafka's ProducerStateManager semantics, as of Kafka 2.5+/KIP-360):
- producer id -1 (no producer) is not checked;
- an epoch lower than the producer's current one -> INVALID_PRODUCER_EPOCH;
- a duplicate (same epoch, same first and last sequence as one of the cached last five
  batches) is not appended; the original offsets are returned;
- a new (greater) epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER, except
  for a producer without state (unknown, or its state expired): since KIP-360 Kafka accepts
  any sequence then, rather than UNKNOWN_PRODUCER_ID;
- same epoch: the first sequence must follow the last one (int32 wraparound to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER.
A batch covers sequences base_sequence .. base_sequence + last_offset_delta (wrapping).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from wire.errors import ErrorCode, KafkaError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 0x7FFFFFFF
# Kafka keeps the metadata of this many batches per producer for duplicate detection (it is
# also the client's bound on in-flight requests with idempotence).
NUM_BATCHES_TO_RETAIN = 5


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record (sequences wrap from INT32_MAX to 0)."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True)
class BatchMetadata:
    """What is remembered of one appended batch."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True)
class ProducerBatch:
    """The producer-related facts of one batch header, with its assigned offsets."""

    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int
    is_control: bool = False

    def metadata(self) -> BatchMetadata:
        return BatchMetadata(
            self.first_seq, self.last_seq, self.first_offset, self.last_offset, self.timestamp
        )


@dataclass
class ProducerEntry:
    """State of one producer id."""

    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN), self.last_timestamp
        )

    def add(self, batch: ProducerBatch) -> None:
        if batch.producer_epoch != self.epoch:
            # A new epoch starts a new sequence space; old batches can no longer be duplicates.
            self.batches.clear()
            self.epoch = batch.producer_epoch
        if not batch.is_control:
            self.batches.append(batch.metadata())
        self.last_timestamp = batch.timestamp

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        if batch.producer_epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == batch.first_seq and meta.last_seq == batch.last_seq:
                return meta
        return None


@dataclass(frozen=True)
class PendingAppend:
    """Checked updates of one append, applied by `ProducerStateManager.commit`."""

    updates: dict[int, ProducerEntry]


class ProducerStateManager:
    """Per-partition producer id -> `ProducerEntry`."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> dict[int, ProducerEntry]:
        """A copy of the state (for snapshots)."""
        return {pid: entry.copy() for pid, entry in self._producers.items()}

    def load(self, entries: dict[int, ProducerEntry]) -> None:
        """Replace the state (from a snapshot)."""
        self._producers = {pid: entry.copy() for pid, entry in entries.items()}

    def clear(self) -> None:
        self._producers.clear()

    def prepare(self, batches: Sequence[ProducerBatch]) -> PendingAppend | BatchMetadata:
        """Check a leader append; a `BatchMetadata` result means a duplicate batch."""
        updates: dict[int, ProducerEntry] = {}
        for batch in batches:
            if batch.producer_id == NO_PRODUCER_ID:
                continue
            current = self._producers.get(batch.producer_id)
            if current is not None and not batch.is_control:
                duplicate = current.find_duplicate(batch)
                if duplicate is not None:
                    return duplicate
            updated = updates.get(batch.producer_id)
            if updated is None:
                updated = current.copy() if current is not None else ProducerEntry()
                updates[batch.producer_id] = updated
            self._check(batch, current, updated)
            updated.add(batch)
        return PendingAppend(updates)

    def _check(
        self, batch: ProducerBatch, current: ProducerEntry | None, updated: ProducerEntry
    ) -> None:
        if batch.producer_epoch < updated.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {batch.producer_id} epoch {batch.producer_epoch} is older than "
                f"the current epoch {updated.epoch}",
            )
        if batch.is_control:
            return
        if batch.producer_epoch != updated.epoch:
            if batch.first_seq != 0 and updated.epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {batch.producer_id} new epoch {batch.producer_epoch} must start "
                    f"at sequence 0, not {batch.first_seq}",
                )
            return
        if current is None or current.epoch == NO_PRODUCER_EPOCH:
            # No known state for this producer (KIP-360): any sequence is accepted.
            return
        if not _in_sequence(updated.last_seq, batch.first_seq):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {batch.producer_id} sequence {batch.first_seq} does not follow "
                f"{updated.last_seq}",
            )

    def commit(self, pending: PendingAppend) -> None:
        """Apply a prepared append after its batches were written."""
        self._producers.update(pending.updates)

    def replay(self, batches: Iterable[ProducerBatch]) -> None:
        """Apply batches already in the log (no checks)."""
        for batch in batches:
            if batch.producer_id == NO_PRODUCER_ID:
                continue
            entry = self._producers.get(batch.producer_id)
            if entry is None:
                entry = self._producers[batch.producer_id] = ProducerEntry()
            entry.add(batch)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for `expiration_ms` (producer.id.expiration.ms)."""
        expired = [
            pid
            for pid, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return expired
