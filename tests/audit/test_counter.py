"""The audit's counting core over hand-built batches: windows, spanning batches, LogAppendTime,
transactions committed and aborted, and batches read again."""

from __future__ import annotations

from kbroker.audit.counter import PartitionCounter, WindowCount
from wire.records.control import end_txn_marker
from wire.records.record import Record, build_batch

W = 1000


def batch(offset: int, timestamps: list[int], **kwargs: object) -> bytes:
    records = [Record(offset + i, ts, b"k", b"v") for i, ts in enumerate(timestamps)]
    return build_batch(records, base_offset=offset, **kwargs)  # type: ignore[arg-type]


def marker(offset: int, producer_id: int, *, commit: bool) -> bytes:
    record = end_txn_marker(commit, 0, offset=offset, timestamp=5000)
    return build_batch(
        [record],
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=0,
        transactional=True,
        control=True,
    )


def txn(offset: int, timestamps: list[int], producer_id: int) -> bytes:
    return batch(offset, timestamps, producer_id=producer_id, producer_epoch=0, transactional=True)


def test_batches_within_one_window_are_counted_from_their_header() -> None:
    counter = PartitionCounter(W, 0)
    counter.add(batch(0, [1000, 1500, 1999]) + batch(3, [2000, 2001]))
    assert counter.windows == {1000: WindowCount(3, 0, 2), 2000: WindowCount(2, 3, 4)}
    assert counter.next_offset == 5


def test_a_batch_spanning_windows_is_split_by_its_records_timestamps() -> None:
    counter = PartitionCounter(W, 0)
    # Out of order within the batch: the first record is not the oldest window's only one.
    counter.add(batch(0, [1999, 2500, 1200, 3000]))
    assert counter.windows == {
        1000: WindowCount(2, 0, 2),
        2000: WindowCount(1, 1, 1),
        3000: WindowCount(1, 3, 3),
    }


def test_log_append_time_puts_every_record_at_the_batch_max_timestamp() -> None:
    counter = PartitionCounter(W, 0)
    # build_batch keeps the records' timestamps; the broker overwrote the max with its clock.
    counter.add(batch(0, [100, 2500], timestamp_type=1))
    assert counter.windows == {2000: WindowCount(2, 0, 1)}


def test_committed_transactions_count_at_their_marker_and_aborted_ones_never() -> None:
    counter = PartitionCounter(W, 0)
    counter.add(txn(0, [1000, 1001], producer_id=7) + txn(2, [1002], producer_id=8))
    assert counter.windows == {}
    counter.add(batch(3, [1500]) + marker(4, 8, commit=False))
    assert counter.windows == {1000: WindowCount(1, 3, 3)}
    counter.add(txn(5, [2100], producer_id=7) + marker(6, 7, commit=True))
    assert counter.windows == {
        1000: WindowCount(3, 0, 3),
        2000: WindowCount(1, 5, 5),
    }


def test_batches_already_counted_are_skipped_and_changes_reported_once() -> None:
    counter = PartitionCounter(W, 0)
    first = batch(0, [1000])
    counter.add(first)
    assert counter.take_changed() == {1000: WindowCount(1, 0, 0)}
    counter.add(first + batch(1, [3000]))
    assert counter.windows[1000] == WindowCount(1, 0, 0)
    assert counter.take_changed() == {3000: WindowCount(1, 1, 1)}
    assert counter.take_changed() == {}


def test_a_counter_started_past_the_log_start_skips_the_batches_below() -> None:
    counter = PartitionCounter(W, 2)
    counter.add(batch(0, [1000, 1001]) + batch(2, [1002]))
    assert counter.windows == {1000: WindowCount(1, 2, 2)}


def test_a_counter_started_inside_a_batch_counts_only_the_records_from_there() -> None:
    # DeleteRecords put the log start at offset 3, inside a batch of one window.
    counter = PartitionCounter(W, 3)
    counter.add(batch(0, [1000, 1001, 1002, 1003, 1004]))
    assert counter.windows == {1000: WindowCount(2, 3, 4)}
