"""The aborted-transaction index (.txnindex): file format, and its life with the segments."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from kbroker.log import LogConfig, PartitionLog
from kbroker.log.txn_index import ENTRY_SIZE, TxnIndex
from kbroker.producer_state import AbortedTxn

from .compaction_helpers import cleaner_for, compact_config, manager_with_log, put
from .txn_helpers import append, marker, txn_batch

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=150)


def open_log(path: Path, *, recover: bool = False) -> PartitionLog:
    return PartitionLog.open(path / "topic-0", SMALL, recover=recover)


def txn_files(plog: PartitionLog) -> list[str]:
    return sorted(p for p in os.listdir(plog.directory) if ".txnindex" in p)


def test_entry_layout_is_kafkas(tmp_path: Path) -> None:
    index = TxnIndex(tmp_path / "x.txnindex")
    index.append(AbortedTxn(7, 10, 20, 21))
    assert ENTRY_SIZE == 34
    assert (tmp_path / "x.txnindex").read_bytes() == struct.pack(">hqqqq", 0, 7, 10, 20, 21)
    assert TxnIndex(tmp_path / "x.txnindex").entries() == [AbortedTxn(7, 10, 20, 21)]


def test_collect_and_completeness(tmp_path: Path) -> None:
    index = TxnIndex(tmp_path / "x.txnindex")
    for entry in (AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 15, 16)):
        index.append(entry)
    assert index.collect(6, 12) == ([AbortedTxn(2, 3, 9, 10)], True)
    assert index.collect(6, 20) == ([AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 15, 16)], False)
    assert index.collect(0, 4) == ([AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 9, 10)], True)
    assert index.collect(16, 20) == ([], False)


def test_torn_tail_is_dropped_and_truncate_to(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    index = TxnIndex(path)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.append(AbortedTxn(2, 6, 9, 10))
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")
    reread = TxnIndex(path)
    assert len(reread.entries()) == 2 and path.stat().st_size == 2 * ENTRY_SIZE
    reread.truncate_to(9)
    assert reread.entries() == [AbortedTxn(1, 0, 5, 6)] and path.stat().st_size == ENTRY_SIZE
    reread.truncate_to(0)
    assert not path.exists()


def test_abort_markers_are_indexed_in_their_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, txn_batch(7, 0))  # 0-1
    append(plog, txn_batch(8, 0))  # 2-3
    append(plog, marker(7, commit=False))  # 4
    append(plog, marker(8, commit=True))  # 5
    assert txn_files(plog) == ["00000000000000000000.txnindex"]
    assert plog.aborted_transactions(0, 6) == [AbortedTxn(7, 0, 4, 2)]
    assert plog.aborted_transactions(5, 6) == []
    plog.roll()
    append(plog, txn_batch(7, 2))  # 6-7
    plog.roll()
    append(plog, marker(7, commit=False))  # 8
    assert txn_files(plog) == [
        "00000000000000000000.txnindex",
        "00000000000000000008.txnindex",
    ]
    assert plog.aborted_transactions(6, 9) == [AbortedTxn(7, 6, 8, 9)]
    assert plog.aborted_transactions(0, 9) == [AbortedTxn(7, 0, 4, 2), AbortedTxn(7, 6, 8, 9)]
    plog.close()


def test_index_goes_with_its_segment_on_deletion_and_truncation(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, txn_batch(7, 0))
    append(plog, marker(7, commit=False))  # 2
    plog.roll()
    append(plog, txn_batch(7, 2))  # 3-4
    append(plog, marker(7, commit=False))  # 5
    plog.truncate_to(5)
    assert txn_files(plog) == ["00000000000000000000.txnindex"]
    assert plog.aborted_transactions(0, 5) == [AbortedTxn(7, 0, 2, 3)]
    assert plog.producers.ongoing_transactions() == {7: 3}
    plog.roll()
    plog.delete_records_before(5)
    assert txn_files(plog) == ["00000000000000000000.txnindex.deleted"]
    plog.close()
    assert txn_files(plog) == []


def test_follower_appends_build_the_same_index(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    append(leader, txn_batch(7, 0))
    append(leader, txn_batch(8, 0))
    append(leader, marker(7, commit=False))
    append(leader, marker(8, commit=False))
    region = leader.read(0, 1 << 20, max_offset=leader.log_end_offset, min_one_batch=True)
    assert region is not None
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(bytearray(region.read()))
    assert follower.aborted_transactions(0, 6) == leader.aborted_transactions(0, 6)
    assert follower.aborted_transactions(0, 6) == [AbortedTxn(7, 0, 4, 2), AbortedTxn(8, 2, 5, 6)]


def test_recovery_rebuilds_the_index(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, txn_batch(7, 0))  # 0-1
    append(plog, marker(7, commit=False))  # 2
    plog.roll()
    append(plog, txn_batch(8, 0))  # 3-4
    append(plog, txn_batch(7, 2))  # 5-6
    append(plog, marker(7, commit=False))  # 7
    expected = plog.aborted_transactions(0, 8)
    assert expected == [AbortedTxn(7, 0, 2, 3), AbortedTxn(7, 5, 7, 3)]
    plog.flush()
    directory = plog.directory
    # A crash: no clean close, and the active segment's index files lost.
    for name in os.listdir(directory):
        if name.startswith("00000000000000000003.") and name.endswith(("txnindex", ".index")):
            os.unlink(directory / name)
    reopened = open_log(tmp_path, recover=True)
    assert reopened.aborted_transactions(0, 8) == expected
    assert reopened.producers.ongoing_transactions() == {8: 3}
    # An unclean shutdown rescans the active segment: its index is written again, the same.
    (directory / "00000000000000000003.txnindex").write_bytes(b"")
    assert open_log(tmp_path, recover=True).aborted_transactions(0, 8) == expected


def test_a_cleaner_swap_keeps_the_index(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    append(plog, txn_batch(7, 0, key=b"k"))
    append(plog, marker(7, commit=False))
    for i in range(30):
        put(plog, [(b"a%d" % (i % 3), b"v" * 30)])
    plog.roll()
    before = plog.aborted_transactions(0, plog.log_end_offset)
    assert before == [AbortedTxn(7, 0, 2, 3)]
    assert cleaner_for(manager).clean_once()
    assert plog.aborted_transactions(0, plog.log_end_offset) == before
    assert "00000000000000000000.txnindex" in txn_files(plog)
    manager.shutdown()
