"""AbortedFilter: which fetched batches a read_committed consumer leaves out."""

from __future__ import annotations

from wire.records.batch import read_header
from wire.records.control import EndTxnMarker, end_txn_marker_batch
from wire.records.isolation import AbortedFilter
from wire.records.record import Record, build_batch


def _with_offset(batch: bytes, base_offset: int) -> bytes:
    return base_offset.to_bytes(8, "big") + batch[8:]


def _data(pid: int, base: int, count: int, *, transactional: bool = True) -> bytes:
    records = [Record(i, 0, None, b"%d-%d" % (pid, base + i)) for i in range(count)]
    batch = build_batch(
        records,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=base,
        transactional=transactional,
    )
    return _with_offset(batch, base)


def _marker(pid: int, offset: int, commit: bool) -> bytes:
    batch = end_txn_marker_batch(
        EndTxnMarker(commit, 0), producer_id=pid, producer_epoch=0, timestamp=0
    )
    return _with_offset(batch, offset)


def _kept(batches: list[bytes], aborted: list[tuple[int, int]]) -> list[int]:
    """Base offsets of the batches the filter keeps."""
    walk = AbortedFilter(aborted)
    return [
        read_header(b).base_offset for b in batches if not walk.drop(read_header(b), memoryview(b))
    ]


def test_aborted_batches_until_their_marker_and_control_batches_are_dropped() -> None:
    batches = [
        _data(1, 0, 2),  # producer 1's transaction, aborted
        _data(2, 2, 2),  # producer 2's, committed
        _data(3, 4, 1, transactional=False),  # an idempotent producer's, never filtered
        _marker(1, 5, commit=False),
        _marker(2, 6, commit=True),
        _data(1, 7, 1),  # producer 1's next transaction, committed
        _marker(1, 8, commit=True),
        _data(2, 9, 1),  # producer 2's second transaction, aborted
        _marker(2, 10, commit=False),
    ]
    assert _kept(batches, [(1, 0), (2, 9)]) == [2, 4, 7]
    # read_uncommitted: nothing aborted is known; only the markers go.
    assert _kept(batches, []) == [0, 2, 4, 7, 9]
