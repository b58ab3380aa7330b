"""leader-epoch-checkpoint: file format and KIP-101/279 end offset lookups."""

from __future__ import annotations

from pathlib import Path

from kbroker.log.leader_epochs import LeaderEpochCache


def test_checkpoint_file_format(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    cache.assign(1, 10)  # same epoch, later offset: no change
    cache.assign(3, 20)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 20\n"
    assert LeaderEpochCache(tmp_path).entries() == [(1, 0), (3, 20)]
    assert not list(tmp_path.glob("*.tmp"))


def test_negative_epochs_are_ignored(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(-1, 0)
    assert cache.entries() == [] and cache.latest_epoch() == -1
    assert not (tmp_path / "leader-epoch-checkpoint").exists()


def test_assign_removes_non_monotonic_entries(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(3, 5)
    assert cache.entries() == [(1, 0), (3, 5)]


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(0, 100) == (-1, -1)
    cache.assign(2, 10)
    cache.assign(4, 30)
    cache.assign(7, 50)
    assert cache.end_offset_for(7, 100) == (7, 100)  # latest: the log end offset
    assert cache.end_offset_for(4, 100) == (4, 50)
    assert cache.end_offset_for(5, 100) == (4, 50)  # unknown epoch: the one before it
    assert cache.end_offset_for(1, 100) == (1, 10)  # older than all known
    assert cache.end_offset_for(8, 100) == (-1, -1)  # newer than all known
    assert cache.end_offset_for(-1, 100) == (-1, -1)


def test_truncate_from_end_and_start(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in ((1, 0), (2, 10), (3, 20)):
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries() == [(1, 0), (2, 10)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(2, 15)]
    assert LeaderEpochCache(tmp_path).entries() == [(2, 15)]


def test_corrupt_checkpoint_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n1 0\n")
    assert LeaderEpochCache(tmp_path).entries() == []


def test_batched_changes_are_written_once_and_only_when_the_history_changed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(3, 10)
    inode = path.stat().st_ino
    # Recovery forgets the tail's epochs and re-derives the same ones: nothing is written.
    with cache.batched():
        cache.truncate_from_end(5)
        cache.assign(3, 10)
    assert path.stat().st_ino == inode
    reopened = LeaderEpochCache(tmp_path)
    with reopened.batched():
        reopened.truncate_from_end(5)
        reopened.assign(3, 10)
    assert path.stat().st_ino == inode
    with reopened.batched():
        reopened.assign(4, 20)
        reopened.assign(5, 30)
        assert path.read_text() == "0\n2\n0 0\n3 10\n"
    assert path.read_text() == "0\n4\n0 0\n3 10\n4 20\n5 30\n"
