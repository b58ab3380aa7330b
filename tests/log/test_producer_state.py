"""ProducerStateManager: Kafka's idempotent-producer rules, without IO."""

from __future__ import annotations

import pytest

from kbroker.producer_state import (
    INT32_MAX,
    BatchMetadata,
    PendingAppend,
    ProducerBatch,
    ProducerStateManager,
    last_sequence,
)
from wire.errors import ErrorCode, KafkaError


def pb(pid: int, epoch: int, seq: int, count: int, offset: int, ts: int = 0) -> ProducerBatch:
    return ProducerBatch(
        producer_id=pid,
        producer_epoch=epoch,
        first_seq=seq,
        last_seq=last_sequence(seq, count - 1),
        first_offset=offset,
        last_offset=offset + count - 1,
        timestamp=ts,
    )


def append(state: ProducerStateManager, *batches: ProducerBatch) -> PendingAppend | BatchMetadata:
    result = state.prepare(list(batches))
    if isinstance(result, PendingAppend):
        state.commit(result)
    return result


def expect_error(state: ProducerStateManager, batch: ProducerBatch, code: ErrorCode) -> None:
    with pytest.raises(KafkaError) as info:
        state.prepare([batch])
    assert info.value.code == code


def test_last_sequence_wraps_at_int32_max() -> None:
    assert last_sequence(5, 3) == 8
    assert last_sequence(INT32_MAX, 0) == INT32_MAX
    assert last_sequence(INT32_MAX, 1) == 0
    assert last_sequence(INT32_MAX - 1, 4) == 2


def test_no_producer_id_is_not_checked() -> None:
    state = ProducerStateManager()
    assert isinstance(append(state, pb(-1, -1, -1, 3, 0)), PendingAppend)
    assert isinstance(append(state, pb(-1, -1, -1, 3, 0)), PendingAppend)
    assert len(state) == 0


def test_in_sequence_batches_are_accepted_and_tracked() -> None:
    state = ProducerStateManager()
    append(state, pb(7, 0, 0, 3, 0))
    append(state, pb(7, 0, 3, 2, 3))
    entry = state.get(7)
    assert entry is not None and entry.epoch == 0 and entry.last_seq == 4


def test_duplicate_of_each_of_the_last_five_returns_original_offsets() -> None:
    state = ProducerStateManager()
    for i in range(5):
        append(state, pb(7, 0, i * 2, 2, 100 + i * 2))
    for i in range(5):
        dup = state.prepare([pb(7, 0, i * 2, 2, 999)])
        assert dup == BatchMetadata(i * 2, i * 2 + 1, 100 + i * 2, 101 + i * 2, 0)


def test_batch_older_than_the_five_cached_is_out_of_order_not_duplicate() -> None:
    state = ProducerStateManager()
    for i in range(6):
        append(state, pb(7, 0, i, 1, i))
    expect_error(state, pb(7, 0, 0, 1, 50), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert isinstance(state.prepare([pb(7, 0, 1, 1, 50)]), BatchMetadata)


def test_gap_in_sequence_is_out_of_order() -> None:
    state = ProducerStateManager()
    append(state, pb(7, 0, 0, 3, 0))
    expect_error(state, pb(7, 0, 4, 1, 3), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    expect_error(state, pb(7, 0, 1, 2, 3), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)


def test_sequence_wraps_from_int32_max_to_zero() -> None:
    state = ProducerStateManager()
    state.replay([pb(7, 0, INT32_MAX - 1, 2, 1)])
    expect_error(state, pb(7, 0, 1, 1, 3), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert isinstance(append(state, pb(7, 0, 0, 1, 3)), PendingAppend)


def test_older_epoch_is_fenced() -> None:
    state = ProducerStateManager()
    append(state, pb(7, 3, 0, 1, 0))
    expect_error(state, pb(7, 2, 1, 1, 1), ErrorCode.INVALID_PRODUCER_EPOCH)


def test_new_epoch_must_start_at_sequence_zero() -> None:
    state = ProducerStateManager()
    append(state, pb(7, 0, 0, 5, 0))
    expect_error(state, pb(7, 1, 5, 1, 5), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert isinstance(append(state, pb(7, 1, 0, 1, 5)), PendingAppend)
    assert state.get(7).epoch == 1  # type: ignore[union-attr]


def test_new_epoch_forgets_old_batches_for_duplicates() -> None:
    state = ProducerStateManager()
    append(state, pb(7, 0, 0, 1, 0))
    append(state, pb(7, 1, 0, 1, 1))
    # Same sequence as the epoch-0 batch but now the epoch-1 batch is the cached one.
    dup = state.prepare([pb(7, 1, 0, 1, 9)])
    assert isinstance(dup, BatchMetadata) and dup.first_offset == 1
    expect_error(state, pb(7, 0, 0, 1, 9), ErrorCode.INVALID_PRODUCER_EPOCH)


def test_unknown_producer_is_accepted_at_any_sequence() -> None:
    # Kafka 2.5+ (KIP-360): no state for the producer -> any first sequence is accepted.
    state = ProducerStateManager()
    assert isinstance(append(state, pb(9, 4, 42, 2, 0)), PendingAppend)
    expect_error(state, pb(9, 4, 45, 1, 2), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert isinstance(append(state, pb(9, 4, 44, 1, 2)), PendingAppend)


def test_batches_of_one_append_are_checked_against_each_other() -> None:
    state = ProducerStateManager()
    append(state, pb(7, 0, 0, 1, 0))
    ok = state.prepare([pb(7, 0, 1, 1, 1), pb(7, 0, 2, 1, 2), pb(8, 0, 0, 1, 3)])
    assert isinstance(ok, PendingAppend)
    with pytest.raises(KafkaError):
        state.prepare([pb(7, 0, 1, 1, 1), pb(7, 0, 3, 1, 2)])


def test_prepare_changes_nothing_until_commit() -> None:
    state = ProducerStateManager()
    pending = state.prepare([pb(7, 0, 0, 1, 0)])
    assert state.get(7) is None
    assert isinstance(pending, PendingAppend)
    state.commit(pending)
    assert state.get(7) is not None


def test_control_batch_bumps_epoch_without_sequence() -> None:
    state = ProducerStateManager()
    append(state, pb(7, 0, 0, 1, 0))
    marker = ProducerBatch(7, 1, -1, -1, 1, 1, 0, is_control=True)
    assert isinstance(append(state, marker), PendingAppend)
    assert state.get(7).epoch == 1  # type: ignore[union-attr]
    expect_error(state, pb(7, 0, 1, 1, 2), ErrorCode.INVALID_PRODUCER_EPOCH)


def test_replay_skips_checks() -> None:
    state = ProducerStateManager()
    state.replay([pb(7, 5, 10, 1, 0), pb(7, 2, 99, 1, 1)])
    assert state.get(7).epoch == 2  # type: ignore[union-attr]


def test_remove_expired() -> None:
    state = ProducerStateManager()
    append(state, pb(1, 0, 0, 1, 0, ts=1_000), pb(2, 0, 0, 1, 1, ts=5_000))
    assert state.remove_expired(now_ms=10_000, expiration_ms=6_000) == [1]
    assert state.get(1) is None and state.get(2) is not None


def test_entries_and_load_are_copies() -> None:
    state = ProducerStateManager()
    append(state, pb(1, 0, 0, 1, 0))
    saved = state.entries()
    append(state, pb(1, 0, 1, 1, 1))
    other = ProducerStateManager()
    other.load(saved)
    assert other.get(1).last_seq == 0  # type: ignore[union-attr]
    assert state.get(1).last_seq == 1  # type: ignore[union-attr]
