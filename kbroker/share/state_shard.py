"""The share coordinator's state for one partition of ``__share_group_state``, as a pure core.

Kafka's share coordinator (KIP-932) keeps, per share partition (group, topic id, partition),
the state the partition leaders persist: the start offset, the state batches past it, the
state epoch and leader epoch. Every request for a key is decided here from the state replayed
so far; the answer carries the record to append (a ShareSnapshot, a ShareUpdate or a
tombstone, kbroker/share/state_records.py), which the shell writes with acks=all and then
replays, so the state only ever holds what is in the log.

How Kafka 4.3 decides (asked on its broker listener with the same requests):

- InitializeShareGroupState writes a snapshot: the state epoch and start offset asked for,
  no batches, leader epoch 0, delivery complete count 0 (-1 while the start offset is -1),
  and the next snapshot epoch when the key had a state. It replaces that state. A state
  epoch below the highest one seen for the key is FENCED_STATE_EPOCH.
- ReadShareGroupState of a key without state is INVALID_REQUEST; a leader epoch below the
  highest seen is FENCED_LEADER_EPOCH; a leader epoch the key has not seen yet (not -1) is
  written as a record before the answer, so later writes of older leaders are fenced.
- WriteShareGroupState of a key without state is INVALID_REQUEST; it is fenced by either
  epoch (-1 skips the check). It writes an update with the written batches combined among
  themselves (kbroker/share/batch_combiner.py), or, after
  ``share.coordinator.snapshot.update.records.per.snapshot`` updates, a snapshot of the whole
  state with the written batches laid over the stored ones. A start offset of -1 leaves the
  stored one. The leader epoch written is the stored one; a write never changes it.
- Replaying an update lays its batches over the state's and drops what falls below the
  start offset; replaying a snapshot replaces the state.
- DeleteShareGroupState writes a tombstone for a key with state and nothing otherwise.
- ReadShareGroupStateSummary gives the epochs, start offset and delivery complete count (for
  a key without state: start offset -1 and epochs 0).
- A topic or partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION, a negative
  partition INVALID_REQUEST.

Kafka also snapshots, every ``share.coordinator.cold.partition.snapshot.interval.ms``, the
states not written for that long, and deletes records before the oldest latest snapshot of
any key (``share.coordinator.state.topic.prune.interval.ms``): ``cold_keys``/``snapshot_of``
and ``redundant_offset`` give the shell both.
"""

from __future__ import annotations

import heapq
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from kbroker.share.batch_combiner import combine_batches
from kbroker.share.persister_api import SharePartitionState, StateBatch
from kbroker.share.state_records import (
    UNKNOWN,
    ShareSnapshot,
    ShareStateKey,
    ShareStateValue,
    ShareUpdate,
)
from wire.errors import ErrorCode, KafkaError

# What Kafka's coordinator answers, word for word.
NEGATIVE_PARTITION = "The partition id cannot be a negative number."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
FENCED_LEADER_EPOCH = "The leader epoch in the request is older than the epoch on the broker."
FENCED_STATE_EPOCH = (
    "The share coordinator rejected the request because the share-group state epoch did not match."
)
UNKNOWN_TOPIC_OR_PARTITION = "This server does not host this topic-partition."

# A key's summary before it has state.
NO_STATE_SUMMARY = SharePartitionState(
    state_epoch=0, start_offset=UNKNOWN, batches=(), leader_epoch=0
)


@dataclass(frozen=True, slots=True)
class ShareState:
    """A key's state: Kafka's ShareGroupOffset."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int
    write_timestamp: int


@dataclass(frozen=True, slots=True)
class StateRecord:
    """A record to append: a snapshot, an update, or (``value`` None) a tombstone."""

    key: ShareStateKey
    value: ShareStateValue | None


def _snapshot_of(state: ShareState) -> ShareSnapshot:
    return ShareSnapshot(
        snapshot_epoch=state.snapshot_epoch,
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        delivery_complete_count=state.delivery_complete_count,
        create_timestamp=state.create_timestamp,
        write_timestamp=state.write_timestamp,
        batches=state.batches,
    )


class ShareStateShard:
    """The keys of one ``__share_group_state`` partition. ``partitions_of(topic_id)`` is the
    topic's partition count, None for a topic the cluster does not have; ``clock`` gives
    milliseconds."""

    def __init__(
        self,
        updates_per_snapshot: int,
        partitions_of: Callable[[uuid.UUID], int | None],
        clock: Callable[[], int],
    ) -> None:
        self._updates_per_snapshot = updates_per_snapshot
        self._partitions_of = partitions_of
        self._clock = clock
        self._states: dict[ShareStateKey, ShareState] = {}
        # The highest epochs seen per key, which fence older leaders and group epochs.
        self._leader_epochs: dict[ShareStateKey, int] = {}
        self._state_epochs: dict[ShareStateKey, int] = {}
        # Updates replayed since the key's last snapshot.
        self._updates: dict[ShareStateKey, int] = {}
        # Offset of each key's latest snapshot; heap of (offset, key) for the smallest.
        self._snapshot_offsets: dict[ShareStateKey, int] = {}
        self._oldest: list[tuple[int, int, ShareStateKey]] = []
        self._pushes = itertools.count()
        self._redundant: int | None = None

    # --- what is stored ---------------------------------------------------------------

    def state(self, key: ShareStateKey) -> ShareState | None:
        return self._states.get(key)

    def keys(self) -> list[ShareStateKey]:
        return list(self._states)

    def __len__(self) -> int:
        return len(self._states)

    def redundant_offset(self) -> int | None:
        """Records before this offset are needed by no key (each key's latest snapshot is at
        or past it); None while there is nothing to delete."""
        if self._redundant is None or self._redundant <= 0:
            return None
        return self._redundant

    # --- replay -----------------------------------------------------------------------

    def replay(self, offset: int, record: StateRecord) -> None:
        """Apply a record of the log at ``offset`` (written here or loaded)."""
        key, value = record.key, record.value
        if value is None:
            self._states.pop(key, None)
            self._leader_epochs.pop(key, None)
            self._state_epochs.pop(key, None)
            self._updates.pop(key, None)
            self._track_snapshot(key, offset, deleted=True)
        elif isinstance(value, ShareSnapshot):
            self._raise(self._leader_epochs, key, value.leader_epoch)
            self._raise(self._state_epochs, key, value.state_epoch)
            self._states[key] = ShareState(
                snapshot_epoch=value.snapshot_epoch,
                state_epoch=value.state_epoch,
                leader_epoch=value.leader_epoch,
                start_offset=value.start_offset,
                delivery_complete_count=value.delivery_complete_count,
                batches=value.batches,
                create_timestamp=value.create_timestamp,
                write_timestamp=value.write_timestamp,
            )
            # As Kafka: the count restarts only after a snapshot that the count caused.
            if key in self._updates and self._updates[key] >= self._updates_per_snapshot:
                self._updates[key] = 0
            self._track_snapshot(key, offset, deleted=False)
        else:
            self._raise(self._leader_epochs, key, value.leader_epoch)
            self._states[key] = self._updated(self._states.get(key), value)
            self._updates[key] = self._updates.get(key, 0) + 1

    @staticmethod
    def _raise(epochs: dict[ShareStateKey, int], key: ShareStateKey, epoch: int) -> None:
        if epoch > epochs.get(key, epoch - 1):
            epochs[key] = epoch

    @staticmethod
    def _updated(state: ShareState | None, update: ShareUpdate) -> ShareState:
        if state is None:
            return ShareState(
                snapshot_epoch=update.snapshot_epoch,
                state_epoch=0,
                leader_epoch=update.leader_epoch,
                start_offset=update.start_offset,
                delivery_complete_count=update.delivery_complete_count,
                batches=update.batches,
                create_timestamp=0,
                write_timestamp=0,
            )
        start = state.start_offset if update.start_offset == UNKNOWN else update.start_offset
        leader = state.leader_epoch if update.leader_epoch == UNKNOWN else update.leader_epoch
        return replace(
            state,
            leader_epoch=leader,
            start_offset=start,
            delivery_complete_count=update.delivery_complete_count,
            batches=combine_batches(state.batches, update.batches, start),
        )

    def _track_snapshot(self, key: ShareStateKey, offset: int, *, deleted: bool) -> None:
        """Kafka's ShareCoordinatorOffsetsManager: the smallest latest-snapshot offset over the
        keys, a tombstone counting as its key's last snapshot until it is replayed."""
        offsets = self._snapshot_offsets
        offsets[key] = offset
        oldest = self._oldest
        if len(oldest) > 2 * len(offsets) + 16:
            oldest[:] = [(o, next(self._pushes), k) for k, o in offsets.items()]
            heapq.heapify(oldest)
        else:
            heapq.heappush(oldest, (offset, next(self._pushes), key))
        while offsets.get(oldest[0][2]) != oldest[0][0]:
            heapq.heappop(oldest)
        self._redundant = oldest[0][0]
        if deleted:
            del offsets[key]

    # --- requests ---------------------------------------------------------------------

    def _check_partition(self, key: ShareStateKey) -> None:
        if key.partition < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION)

    def _check_topic(self, key: ShareStateKey) -> None:
        count = self._partitions_of(key.topic_id)
        if count is None or key.partition >= count:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION)

    def _check_leader_epoch(self, key: ShareStateKey, leader_epoch: int) -> None:
        if leader_epoch != UNKNOWN and self._leader_epochs.get(key, leader_epoch) > leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH, FENCED_LEADER_EPOCH)

    def _check_state_epoch(self, key: ShareStateKey, state_epoch: int) -> None:
        if state_epoch != UNKNOWN and self._state_epochs.get(key, state_epoch) > state_epoch:
            raise KafkaError(ErrorCode.FENCED_STATE_EPOCH, FENCED_STATE_EPOCH)

    def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> StateRecord:
        self._check_partition(key)
        self._check_state_epoch(key, state_epoch)
        self._check_topic(key)
        state = self._states.get(key)
        now = self._clock()
        return StateRecord(
            key,
            ShareSnapshot(
                snapshot_epoch=0 if state is None else state.snapshot_epoch + 1,
                state_epoch=state_epoch,
                leader_epoch=0,
                start_offset=start_offset,
                delivery_complete_count=UNKNOWN if start_offset == UNKNOWN else 0,
                create_timestamp=now,
                write_timestamp=now,
                batches=(),
            ),
        )

    def read(
        self, key: ShareStateKey, leader_epoch: int
    ) -> tuple[SharePartitionState, StateRecord | None]:
        """The state (its epochs, start offset and batches) and, for a leader epoch new to
        the key, the record that stores it."""
        self._check_partition(key)
        state = self._states.get(key)
        if state is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED)
        self._check_leader_epoch(key, leader_epoch)
        self._check_topic(key)
        answer = SharePartitionState(state.state_epoch, state.start_offset, state.batches)
        if leader_epoch == UNKNOWN or self._leader_epochs.get(key) == leader_epoch:
            return answer, None
        stored = SharePartitionState(
            state_epoch=state.state_epoch,
            start_offset=state.start_offset,
            batches=(),
            leader_epoch=leader_epoch,
            delivery_complete_count=state.delivery_complete_count,
        )
        return answer, self._record(key, state, stored, leader_epoch=leader_epoch)

    def write(self, key: ShareStateKey, written: SharePartitionState) -> StateRecord:
        self._check_partition(key)
        state = self._states.get(key)
        if state is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED)
        self._check_leader_epoch(key, written.leader_epoch)
        self._check_state_epoch(key, written.state_epoch)
        self._check_topic(key)
        return self._record(key, state, written, leader_epoch=state.leader_epoch)

    def _record(
        self, key: ShareStateKey, state: ShareState, written: SharePartitionState, leader_epoch: int
    ) -> StateRecord:
        if self._updates.get(key, 0) < self._updates_per_snapshot:
            return StateRecord(
                key,
                ShareUpdate(
                    snapshot_epoch=state.snapshot_epoch,
                    leader_epoch=leader_epoch,
                    start_offset=written.start_offset,
                    delivery_complete_count=written.delivery_complete_count,
                    batches=combine_batches((), written.batches, written.start_offset),
                ),
            )
        start = state.start_offset if written.start_offset == UNKNOWN else written.start_offset
        now = self._clock()
        return StateRecord(
            key,
            ShareSnapshot(
                snapshot_epoch=state.snapshot_epoch + 1,
                state_epoch=state.state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start,
                delivery_complete_count=written.delivery_complete_count,
                create_timestamp=now,
                write_timestamp=now,
                batches=combine_batches(state.batches, written.batches, start),
            ),
        )

    def delete(self, key: ShareStateKey) -> StateRecord | None:
        self._check_partition(key)
        self._check_topic(key)
        return StateRecord(key, None) if key in self._states else None

    def read_summary(self, key: ShareStateKey) -> SharePartitionState:
        self._check_partition(key)
        self._check_topic(key)
        state = self._states.get(key)
        if state is None:
            return NO_STATE_SUMMARY
        return SharePartitionState(
            state_epoch=state.state_epoch,
            start_offset=state.start_offset,
            batches=(),
            leader_epoch=state.leader_epoch,
            delivery_complete_count=state.delivery_complete_count,
        )

    # --- housekeeping -----------------------------------------------------------------

    def cold_keys(self, interval_ms: int) -> list[ShareStateKey]:
        """The keys whose state nobody wrote for ``interval_ms``: their old snapshots hold
        pruning back. As in Kafka, none while every state has been snapshotted so before
        (its write timestamp moved past its creation)."""
        states = self._states
        if all(s.create_timestamp != s.write_timestamp for s in states.values()):
            return []
        now = self._clock()
        return [key for key, s in states.items() if now - s.write_timestamp >= interval_ms]

    def snapshot_of(self, key: ShareStateKey) -> StateRecord:
        """A snapshot of the key's state as it is (the next snapshot epoch, written now)."""
        state = self._states[key]
        return StateRecord(
            key,
            _snapshot_of(
                replace(
                    state, snapshot_epoch=state.snapshot_epoch + 1, write_timestamp=self._clock()
                )
            ),
        )

    def keys_of_topic(self, topic_id: uuid.UUID) -> list[ShareStateKey]:
        """The keys of a topic (deleted: Kafka writes a tombstone for each)."""
        return [key for key in self._states if key.topic_id == topic_id]
