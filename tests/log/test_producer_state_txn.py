"""ProducerStateManager: transactions, markers and the last stable offset (KIP-98)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbroker.producer_state import (
    AbortedTxn,
    PendingAppend,
    ProducerBatch,
    ProducerStateManager,
)
from wire.errors import ErrorCode, KafkaError
from wire.records.control import EndTxnMarker

from .test_producer_state import pb


def data(pid: int, seq: int, count: int, offset: int, *, epoch: int = 0, txn: bool = True):
    return replace(pb(pid, epoch, seq, count, offset, ts=offset), is_transactional=txn)


def marker(pid: int, offset: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0):
    return ProducerBatch(
        producer_id=pid,
        producer_epoch=epoch,
        first_seq=-1,
        last_seq=-1,
        first_offset=offset,
        last_offset=offset,
        timestamp=offset,
        is_control=True,
        is_transactional=True,
        marker=EndTxnMarker(commit, coordinator_epoch),
    )


def append(state: ProducerStateManager, batch: ProducerBatch) -> list[AbortedTxn]:
    pending = state.prepare([batch])
    assert isinstance(pending, PendingAppend)
    return state.commit(pending)


def expect_error(state: ProducerStateManager, batch: ProducerBatch, code: ErrorCode) -> None:
    with pytest.raises(KafkaError) as info:
        state.prepare([batch])
    assert info.value.code == code


def test_first_transactional_batch_opens_the_transaction() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 2, 10))
    append(state, data(7, 2, 3, 12))
    entry = state.get(7)
    assert entry is not None and entry.current_txn_first_offset == 10
    assert state.ongoing_transactions() == {7: 10}
    assert state.first_unstable_offset(high_watermark=15) == 10


def test_commit_marker_closes_it_and_records_the_coordinator_epoch() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 2, 10))
    assert append(state, marker(7, 12, commit=True, coordinator_epoch=4)) == []
    entry = state.get(7)
    assert entry is not None and not entry.in_transaction and entry.coordinator_epoch == 4
    assert state.ongoing_transactions() == {}


def test_transaction_stays_unstable_until_the_high_watermark_passes_its_marker() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 2, 10))
    append(state, marker(7, 12, commit=True))
    assert state.first_unstable_offset(high_watermark=12) == 10
    assert state.first_unstable_offset(high_watermark=13) is None
    # Forgotten once passed, even if asked with an older watermark later.
    assert state.first_unstable_offset(high_watermark=12) is None


def test_abort_marker_reports_the_aborted_range_with_its_last_stable_offset() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 2, 10))
    append(state, data(8, 0, 1, 12))
    append(state, data(7, 2, 1, 13))
    assert append(state, marker(7, 14, commit=False)) == [AbortedTxn(7, 10, 14, 12)]
    append(state, data(9, 0, 1, 15, txn=False))
    assert append(state, marker(8, 16, commit=False)) == [AbortedTxn(8, 12, 16, 17)]
    assert state.first_unstable_offset(high_watermark=20) is None


def test_marker_without_open_transaction_reports_nothing() -> None:
    state = ProducerStateManager()
    assert append(state, marker(7, 0, commit=False, epoch=3)) == []
    assert state.get(7).epoch == 3  # type: ignore[union-attr]
    assert state.first_unstable_offset(high_watermark=0) is None


def test_marker_with_an_older_producer_epoch_is_refused() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 1, 0, epoch=2))
    expect_error(state, marker(7, 1, commit=True, epoch=1), ErrorCode.INVALID_PRODUCER_EPOCH)


def test_marker_with_an_older_coordinator_epoch_is_fenced() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 1, 0))
    append(state, marker(7, 1, commit=True, coordinator_epoch=5))
    append(state, data(7, 1, 1, 2))
    expect_error(
        state,
        marker(7, 3, commit=True, coordinator_epoch=4),
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    )
    assert append(state, marker(7, 3, commit=False, coordinator_epoch=5)) == [
        AbortedTxn(7, 2, 3, 4)
    ]


def test_non_transactional_batch_during_a_transaction_is_invalid_txn_state() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 1, 0))
    expect_error(state, data(7, 1, 1, 1, txn=False), ErrorCode.INVALID_TXN_STATE)


def test_transactional_batch_with_an_older_epoch_is_invalid_producer_epoch() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 1, 0, epoch=1))
    expect_error(state, data(7, 1, 1, 1, epoch=0), ErrorCode.INVALID_PRODUCER_EPOCH)


def test_bumped_epoch_marker_then_new_producer_starts_at_sequence_zero() -> None:
    # The coordinator fences a producer: an abort marker with the bumped epoch, then the new
    # producer (same id, that epoch) starts its sequences at 0.
    state = ProducerStateManager()
    append(state, data(7, 0, 3, 0, epoch=0))
    assert append(state, marker(7, 3, commit=False, epoch=1)) == [AbortedTxn(7, 0, 3, 4)]
    append(state, data(7, 0, 1, 4, epoch=1))
    assert state.ongoing_transactions() == {7: 4}


def test_replay_rebuilds_transactions_and_returns_the_aborted_ones() -> None:
    state = ProducerStateManager()
    aborted = state.replay(
        [data(7, 0, 2, 0), data(8, 0, 1, 2), marker(7, 3, commit=False), data(8, 1, 1, 4)]
    )
    assert aborted == [AbortedTxn(7, 0, 3, 2)]
    assert state.ongoing_transactions() == {8: 2}
    assert state.first_unstable_offset(high_watermark=10) == 2


def test_load_restores_open_transactions() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 1, 5))
    other = ProducerStateManager()
    other.load(state.entries())
    assert other.ongoing_transactions() == {7: 5}
    other.clear()
    assert other.first_unstable_offset(high_watermark=9) is None


def test_producers_with_an_open_transaction_do_not_expire() -> None:
    state = ProducerStateManager()
    append(state, data(7, 0, 1, 0))
    append(state, data(8, 0, 1, 1, txn=False))
    assert state.remove_expired(now_ms=100_000, expiration_ms=10) == [8]
    assert state.get(7) is not None


def test_closed_transactions_are_forgotten_once_replicated() -> None:
    state = ProducerStateManager()
    state.replay([data(7, 0, 1, 0), marker(7, 1, commit=False), data(8, 0, 1, 2)])
    assert state.first_unstable_offset(high_watermark=0) == 0
    state.on_high_watermark(2)
    # Only the open transaction is left, whatever watermark is asked about later.
    assert state.first_unstable_offset(high_watermark=0) == 2


def _prepared(state: ProducerStateManager, batch: ProducerBatch, **options: object) -> None:
    pending = state.prepare([batch], **options)  # type: ignore[arg-type]
    assert isinstance(pending, PendingAppend)
    state.commit(pending)


def test_a_verified_transaction_start_needs_its_guard() -> None:
    # KIP-890: the guard taken before asking the coordinator admits the batch that opens the
    # transaction; a marker in between (the transaction ended meanwhile) voids it.
    state = ProducerStateManager()
    assert state.needs_verification(7, 0)
    guard = state.begin_verification(7, 0)
    assert state.begin_verification(7, 0) is guard
    _prepared(state, data(7, 0, 1, 10), verification=guard)
    assert not state.needs_verification(7, 0)
    _prepared(state, data(7, 1, 1, 11), verification=guard)  # the transaction is open now
    append(state, marker(7, 12, commit=False))
    assert state.needs_verification(7, 0)
    late = state.begin_verification(7, 0)
    append(state, marker(7, 13, commit=False))
    with pytest.raises(KafkaError) as info:
        state.prepare([data(7, 2, 1, 14)], verification=late)
    assert info.value.code == ErrorCode.INVALID_TXN_STATE
    assert state.ongoing_transactions() == {}
    failed = state.begin_verification(7, 0)
    state.end_verification(failed)
    with pytest.raises(KafkaError):
        state.prepare([data(7, 2, 1, 14)], verification=failed)


def test_a_version_2_marker_must_bump_the_epoch_of_an_open_transaction() -> None:
    # KIP-1228: with transaction version 2 a marker carries the epoch after the end's bump; an
    # equal epoch is a late marker of an earlier end and must not close the transaction.
    state = ProducerStateManager()
    append(state, data(7, 0, 1, 10, epoch=3))
    with pytest.raises(KafkaError) as info:
        state.prepare([marker(7, 11, commit=True, epoch=3)], marker_version=2)
    assert info.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    _prepared(state, marker(7, 11, commit=True, epoch=4), marker_version=2)
    assert state.ongoing_transactions() == {}
    # Sent again (its answer lost): nothing is open, so it closes nothing and is accepted.
    _prepared(state, marker(7, 12, commit=True, epoch=4), marker_version=2)
    # Version 1 markers keep the epoch of their transaction.
    append(state, data(8, 0, 1, 13, epoch=2))
    _prepared(state, marker(8, 14, commit=True, epoch=2))
