"""The share coordinator's pure core, driven with a fake clock. The scenarios are the requests
sent to Kafka 4.3's broker listener (share.coordinator.snapshot.update.records.per.snapshot=3);
the answers and the records expected are what it answered and what
kafka-dump-log.sh --share-group-state-decoder showed in its ``__share_group_state``."""

from __future__ import annotations

import uuid
from contextlib import AbstractContextManager

import pytest

from kbroker.share.persister_api import SharePartitionState, StateBatch
from kbroker.share.state_records import ShareSnapshot, ShareStateKey, ShareUpdate
from kbroker.share.state_shard import (
    FENCED_LEADER_EPOCH,
    FENCED_STATE_EPOCH,
    NEGATIVE_PARTITION,
    READ_UNINITIALIZED,
    UNKNOWN_TOPIC_OR_PARTITION,
    WRITE_UNINITIALIZED,
    ShareStateShard,
    StateRecord,
)
from wire.errors import ErrorCode, KafkaError

TOPIC = uuid.UUID("086d7a92-8676-4a82-b296-5a232c010259")
OTHER_TOPIC = uuid.UUID("6703b99c-d7b7-48a5-a337-c119ff378f03")
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def b(first: int, last: int, state: int, count: int) -> StateBatch:
    return StateBatch(first, last, state, count)


class Harness:
    """A shard whose records are 'written' at once: appended to a log and replayed."""

    def __init__(self, updates_per_snapshot: int = 3, partitions: int = 1) -> None:
        self.now = 1_000
        self.log: list[StateRecord] = []
        self.topics = {TOPIC: partitions}
        self.shard = ShareStateShard(updates_per_snapshot, self.topics.get, lambda: self.now)

    def store(self, record: StateRecord | None) -> None:
        if record is not None:
            self.shard.replay(len(self.log), record)
            self.log.append(record)

    def initialize(self, key: ShareStateKey, state_epoch: int, start: int) -> None:
        self.store(self.shard.initialize(key, state_epoch, start))

    def read(self, key: ShareStateKey, leader_epoch: int) -> SharePartitionState:
        answer, record = self.shard.read(key, leader_epoch)
        self.store(record)
        return answer

    def write(
        self,
        key: ShareStateKey,
        state_epoch: int,
        leader_epoch: int,
        start: int,
        batches: list[StateBatch],
        delivery_complete_count: int = -1,
    ) -> None:
        written = SharePartitionState(
            state_epoch, start, tuple(batches), leader_epoch, delivery_complete_count
        )
        self.store(self.shard.write(key, written))

    def delete(self, key: ShareStateKey) -> None:
        self.store(self.shard.delete(key))

    def new_records(self, since: int) -> list[StateRecord]:
        return self.log[since:]


def fails(code: ErrorCode, message: str) -> AbstractContextManager[object]:
    return pytest.raises(KafkaError, match=f"^{code.name}: {message}$")


def snapshot(
    epoch: int, state: int, leader: int, start: int, count: int, now: int, *batches: StateBatch
) -> ShareSnapshot:
    return ShareSnapshot(epoch, state, leader, start, count, now, now, tuple(batches))


def test_initialize_read_write_delete_as_kafka() -> None:
    h = Harness()
    g2 = ShareStateKey("g2", TOPIC, 0)
    h.initialize(g2, 3, 5)
    assert h.log == [StateRecord(g2, snapshot(0, 3, 0, 5, 0, 1_000))]
    assert h.read(g2, -1) == SharePartitionState(3, 5, ())
    assert h.shard.read_summary(g2) == SharePartitionState(3, 5, (), 0, 0)
    # A leader epoch the key has not seen is stored before the answer.
    assert h.read(g2, 4) == SharePartitionState(3, 5, ())
    assert h.log[-1] == StateRecord(g2, ShareUpdate(0, 4, 5, 0, ()))
    with fails(ErrorCode.FENCED_LEADER_EPOCH, FENCED_LEADER_EPOCH):
        h.write(g2, 3, 3, -1, [b(5, 9, ACKNOWLEDGED, 1)])
    with fails(ErrorCode.FENCED_STATE_EPOCH, FENCED_STATE_EPOCH):
        h.write(g2, 2, 4, -1, [b(5, 9, ACKNOWLEDGED, 1)])
    h.write(g2, 3, 4, -1, [b(5, 9, ACKNOWLEDGED, 1), b(7, 12, AVAILABLE, 2)], 3)
    assert h.log[-1] == StateRecord(
        g2, ShareUpdate(0, 4, -1, 3, (b(5, 6, ACKNOWLEDGED, 1), b(7, 12, AVAILABLE, 2)))
    )
    assert h.read(g2, 4) == SharePartitionState(
        3, 5, (b(5, 6, ACKNOWLEDGED, 1), b(7, 12, AVAILABLE, 2))
    )
    assert h.shard.read_summary(g2) == SharePartitionState(3, 5, (), 4, 3)
    # Initialize again: fenced below the state epoch, else a new state (the leader epoch
    # fence stays).
    with fails(ErrorCode.FENCED_STATE_EPOCH, FENCED_STATE_EPOCH):
        h.initialize(g2, 2, 9)
    h.now = 2_000
    h.initialize(g2, 3, 8)
    assert h.log[-1] == StateRecord(g2, snapshot(1, 3, 0, 8, 0, 2_000))
    assert h.read(g2, 4) == SharePartitionState(3, 8, ())
    assert h.shard.read_summary(g2) == SharePartitionState(3, 8, (), 0, 0)
    with fails(ErrorCode.FENCED_LEADER_EPOCH, FENCED_LEADER_EPOCH):
        h.read(g2, 3)
    # Topics and partitions the cluster does not have.
    for key in (ShareStateKey("g2", OTHER_TOPIC, 0), ShareStateKey("g2", TOPIC, 7)):
        with fails(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION):
            h.initialize(key, 3, 8)
    with fails(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION):
        h.shard.read_summary(ShareStateKey("g2", TOPIC, 9))
    assert h.shard.read_summary(ShareStateKey("nope", TOPIC, 0)) == SharePartitionState(
        0, -1, (), 0, -1
    )
    # Delete: a tombstone, then nothing to delete.
    count = len(h.log)
    h.delete(g2)
    h.delete(g2)
    assert h.new_records(count) == [StateRecord(g2, None)]
    with fails(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION):
        h.delete(ShareStateKey("zz", OTHER_TOPIC, 0))
    with fails(ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED):
        h.read(g2, 4)
    with fails(ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED):
        h.write(g2, 3, 4, -1, [])
    with fails(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION):
        h.read(ShareStateKey("s1", TOPIC, -1), 0)
    # The fences went with the state: a new state starts afresh.
    h.initialize(g2, 0, 0)
    h.write(g2, 0, 0, -1, [])


def test_updates_then_a_snapshot_as_kafka() -> None:
    h = Harness()
    g3 = ShareStateKey("g3", TOPIC, 0)
    h.initialize(g3, 1, -1)
    assert h.shard.read_summary(g3) == SharePartitionState(1, -1, (), 0, -1)
    assert h.read(g3, 2) == SharePartitionState(1, -1, ())
    with fails(ErrorCode.FENCED_LEADER_EPOCH, FENCED_LEADER_EPOCH):
        h.read(g3, 1)
    h.write(g3, -1, -1, -1, [b(0, 4, ACKNOWLEDGED, 1)], 7)
    h.write(g3, 1, 2, 3, [b(0, 4, ACKNOWLEDGED, 1), b(5, 5, ARCHIVED, 3)], 2)
    h.now = 1_500
    # The fourth write since the snapshot: a snapshot of the whole state.
    h.write(g3, 1, 2, -1, [b(6, 8, AVAILABLE, 1)])
    h.read(g3, 5)
    h.write(g3, 1, 5, 2, [], 2)
    assert h.read(g3, 5) == SharePartitionState(
        1, 2, (b(3, 4, ACKNOWLEDGED, 1), b(5, 5, ARCHIVED, 3), b(6, 8, AVAILABLE, 1))
    )
    h.now = 2_000
    h.initialize(g3, 2, 4)
    h.write(g3, 2, 5, -1, [b(1, 10, ACKNOWLEDGED, 1)], 2)
    assert h.read(g3, 5) == SharePartitionState(2, 4, (b(4, 10, ACKNOWLEDGED, 1),))
    assert h.shard.read_summary(g3) == SharePartitionState(2, 4, (), 0, 2)
    assert [r.value for r in h.log] == [
        snapshot(0, 1, 0, -1, -1, 1_000),
        ShareUpdate(0, 2, -1, -1, ()),
        ShareUpdate(0, 2, -1, 7, (b(0, 4, ACKNOWLEDGED, 1),)),
        ShareUpdate(0, 2, 3, 2, (b(3, 4, ACKNOWLEDGED, 1), b(5, 5, ARCHIVED, 3))),
        snapshot(
            1,
            1,
            2,
            3,
            -1,
            1_500,
            b(3, 4, ACKNOWLEDGED, 1),
            b(5, 5, ARCHIVED, 3),
            b(6, 8, AVAILABLE, 1),
        ),
        ShareUpdate(1, 5, 3, -1, ()),
        ShareUpdate(1, 5, 2, 2, ()),
        snapshot(2, 2, 0, 4, 0, 2_000),
        # A write keeps the stored leader epoch (the initialize set it to 0).
        ShareUpdate(2, 0, -1, 2, (b(1, 10, ACKNOWLEDGED, 1),)),
    ]


def test_a_snapshot_every_updates_per_snapshot_writes() -> None:
    h = Harness(updates_per_snapshot=500)
    key = ShareStateKey("g", TOPIC, 0)
    h.initialize(key, 0, 0)
    for offset in range(1_600):
        h.write(key, 0, 0, offset, [b(offset, offset, ACKNOWLEDGED, 1)])
    snapshots = [i for i, r in enumerate(h.log) if isinstance(r.value, ShareSnapshot)]
    assert snapshots == [0, 501, 1002, 1503]
    # A snapshot carries the whole state, cut at the start offset.
    last = h.log[1503].value
    assert isinstance(last, ShareSnapshot)
    assert (last.snapshot_epoch, last.start_offset, last.batches) == (
        3,
        1502,
        (b(1502, 1502, ACKNOWLEDGED, 1),),
    )
    assert h.read(key, 0) == SharePartitionState(0, 1599, (b(1599, 1599, ACKNOWLEDGED, 1),))


def test_loading_the_log_again_gives_the_same_state_and_fences() -> None:
    h = Harness()
    keys = [ShareStateKey(g, TOPIC, 0) for g in ("a", "b")]
    for key in keys:
        h.initialize(key, 1, 0)
    for i in range(10):
        key = keys[i % 2]
        h.read(key, i)
        h.write(key, 1, i, i, [b(i, i + 3, AVAILABLE, 1), b(i + 1, i + 1, ACKNOWLEDGED, 2)], i)
    h.delete(keys[1])
    loaded = ShareStateShard(3, h.topics.get, lambda: h.now)
    for offset, record in enumerate(h.log):
        loaded.replay(offset, record)
    assert loaded.keys() == [keys[0]]
    assert loaded.state(keys[0]) == h.shard.state(keys[0])
    with fails(ErrorCode.FENCED_LEADER_EPOCH, FENCED_LEADER_EPOCH):
        loaded.read(keys[0], 7)
    assert loaded.redundant_offset() == h.shard.redundant_offset()


def test_records_before_the_oldest_latest_snapshot_are_redundant() -> None:
    h = Harness(updates_per_snapshot=2)
    a, c = ShareStateKey("a", TOPIC, 0), ShareStateKey("c", TOPIC, 0)
    assert h.shard.redundant_offset() is None
    h.initialize(a, 0, 0)  # offset 0
    assert h.shard.redundant_offset() is None  # nothing before offset 0
    h.initialize(c, 0, 0)  # 1
    for i in range(3):  # a: updates at 2, 3, then the snapshot at 4
        h.write(a, 0, 0, i, [])
    assert h.shard.redundant_offset() == 1  # a's first snapshot (0) is superseded
    h.initialize(c, 0, 5)  # 5
    assert h.shard.redundant_offset() == 4
    h.delete(a)  # 6: a tombstone counts until it is replayed, then a is gone
    assert h.shard.redundant_offset() == 5
    h.delete(c)  # 7
    assert h.shard.redundant_offset() == 7


def test_cold_states_are_snapshotted_again() -> None:
    h = Harness()
    warm, cold = ShareStateKey("warm", TOPIC, 0), ShareStateKey("cold", TOPIC, 0)
    h.initialize(cold, 0, 0)
    h.now = 200_000
    h.initialize(warm, 0, 0)
    h.now = 400_000
    assert h.shard.cold_keys(300_000) == [cold]
    record = h.shard.snapshot_of(cold)
    assert record == StateRecord(cold, ShareSnapshot(1, 0, 0, 0, 0, 1_000, 400_000, ()))
    h.store(record)
    h.now = 600_000
    assert h.shard.cold_keys(300_000) == [warm]
    h.store(h.shard.snapshot_of(warm))
    # Kafka skips the pass while no state still has its creation time as its write time.
    h.now = 2_000_000
    assert h.shard.cold_keys(300_000) == []


def test_the_keys_of_a_topic() -> None:
    h = Harness(partitions=2)
    keys = [ShareStateKey("g", TOPIC, 0), ShareStateKey("g", TOPIC, 1)]
    for key in keys:
        h.initialize(key, 0, 0)
    h.topics[OTHER_TOPIC] = 1
    h.initialize(ShareStateKey("g", OTHER_TOPIC, 0), 0, 0)
    assert h.shard.keys_of_topic(TOPIC) == keys


def test_an_update_without_a_snapshot_starts_a_state() -> None:
    shard = ShareStateShard(3, {TOPIC: 1}.get, lambda: 0)
    key = ShareStateKey("g", TOPIC, 0)
    shard.replay(0, StateRecord(key, ShareUpdate(0, 2, 5, 1, (b(5, 5, ACKNOWLEDGED, 1),))))
    assert shard.read_summary(key) == SharePartitionState(0, 5, (), 2, 1)
