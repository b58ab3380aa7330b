"""The log cleaner and transactions: aborted records go, markers go after
delete.retention.ms once their transaction has no batch left (Kafka's rules)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbroker.log import PartitionLog
from kbroker.producer_state import AbortedTxn

from .compaction_helpers import cleaner_for, compact_config, manager_with_log, put, read_batches
from .helpers import FakeClock
from .txn_helpers import append, marker, txn_batch

RETENTION_MS = 60_000


def values(plog: PartitionLog) -> dict[bytes, bytes]:
    """key -> value of the data records left (markers excluded)."""
    return {
        r.key: r.value
        for header, records in read_batches(plog)
        if not header.is_control
        for r in records
        if r.key is not None
    }


def markers(plog: PartitionLog) -> list[tuple[int, int]]:
    """(offset, producer id) of the non-empty markers left."""
    return [(h.base_offset, h.producer_id) for h, r in read_batches(plog) if h.is_control and r]


def filler(plog: PartitionLog, rounds: int = 12) -> None:
    for i in range(rounds):
        put(plog, [(b"f%d" % (i % 2), b"x" * 60)])


def test_aborted_records_go_and_never_shadow_committed_values(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    put(plog, [(b"k", b"committed")])  # 0
    append(plog, txn_batch(7, 0, 1, key=b"k"))  # 1, aborted
    append(plog, txn_batch(8, 0, 1, key=b"j"))  # 2, committed
    append(plog, marker(7, commit=False))  # 3
    append(plog, marker(8, commit=True))  # 4
    filler(plog)
    plog.roll()
    assert cleaner_for(manager).clean_log("t", 0)
    kept = values(plog)
    assert kept[b"k"] == b"committed" and b"j" in kept
    assert markers(plog) == [(3, 7), (4, 8)]
    # The aborted batch is the last of producer 7, so it stays, empty, with its marker's entry.
    assert plog.aborted_transactions(0, plog.log_end_offset) == [AbortedTxn(7, 1, 3, 2)]
    manager.shutdown()


def test_markers_go_after_delete_retention_once_their_transaction_is_empty(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    manager, plog = manager_with_log(
        tmp_path, compact_config(delete_retention_ms=RETENTION_MS), clock
    )
    append(plog, txn_batch(7, 0, 1, key=b"k"))  # 0, aborted
    append(plog, marker(7, commit=False))  # 1
    append(plog, txn_batch(7, 1, 1, key=b"m"))  # 2, committed
    append(plog, marker(7, commit=True))  # 3
    put(plog, [(b"m", b"newer")])  # 4: the committed record is compacted away
    filler(plog)
    plog.roll()
    cleaner = cleaner_for(manager, clock)
    assert cleaner.clean_log("t", 0)
    # Both transactions had batches in this pass: both markers stay.
    assert markers(plog) == [(1, 7), (3, 7)]
    assert plog.aborted_transactions(0, 4) == [AbortedTxn(7, 0, 1, 2)]
    assert b"k" not in values(plog)
    assert cleaner.clean_log("t", 0)
    # The aborted transaction has no batch left: its marker is stamped with a delete horizon
    # and loses its index entry. The committed one keeps its (emptied) batch: it is producer
    # 7's last data batch, which its sequence state needs, so its marker stays for good.
    assert markers(plog) == [(1, 7), (3, 7)]
    assert plog.aborted_transactions(0, 4) == []
    clock.advance_ms(RETENTION_MS - 1)
    assert cleaner.clean_log("t", 0)
    assert markers(plog) == [(1, 7), (3, 7)]
    clock.advance_ms(2)
    assert cleaner.clean_log("t", 0)
    assert markers(plog) == [(3, 7)]
    first = read_batches(plog)[0][0]
    assert (first.base_offset, first.records_count, first.is_transactional) == (2, 0, True)
    manager.shutdown()
    _, reopened = manager_with_log(tmp_path, compact_config(delete_retention_ms=RETENTION_MS))
    assert reopened.producers.ongoing_transactions() == {}


def test_open_transactions_bound_the_cleanable_range(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    put(plog, [(b"k", b"1")])
    append(plog, txn_batch(7, 0, 1, key=b"k"))  # 1, open
    filler(plog)
    plog.roll()
    cleaner = cleaner_for(manager)
    assert cleaner.plan_for(("t", 0), plog, force=True) is not None
    cleaner._stable_offset = lambda _tp: 1  # the broker passes the partition's LSO
    assert cleaner.plan_for(("t", 0), plog, force=True) is None
    manager.shutdown()


class Crash(Exception):
    pass


@pytest.mark.parametrize("crash_after", [1, 2, 3])
def test_a_crash_during_the_swap_keeps_the_aborted_transaction_index(
    tmp_path: Path, crash_after: int
) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    for i in range(6):
        append(plog, txn_batch(7, i, 1, key=b"a%d" % i))
        append(plog, marker(7, commit=i % 2 == 0))
        filler(plog, 4)
    plog.roll()
    before = plog.aborted_transactions(0, plog.log_end_offset)
    assert len(before) == 3
    plog.update_config(compact_config(segment_bytes=4000))
    cleaner = cleaner_for(manager)
    plan = cleaner.grab_filthiest()
    assert plan is not None
    result = cleaner.build(plan)

    def step_done(step: int) -> None:
        if step == crash_after:
            raise Crash

    with pytest.raises(Crash):
        cleaner.install(result, step_done)
    reopened = PartitionLog.open(plog.directory, compact_config(), recover=True)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == before
    assert not [p for p in os.listdir(reopened.directory) if p.endswith((".swap", ".cleaned"))]
    assert reopened.producers.ongoing_transactions() == {}
    reopened.close()
