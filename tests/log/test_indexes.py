"""Offset and time index files: format, lookups, truncation, sanity checks."""

from __future__ import annotations

import struct
from pathlib import Path

from kbroker.log.offset_index import OffsetIndex
from kbroker.log.time_index import NO_TIMESTAMP, TimeIndex


def test_offset_index_file_format_and_lookup(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex.create(path, 100, 1024)
    index.append(110, 4000)
    index.append(125, 9000)
    index.close()
    assert path.read_bytes() == struct.pack(">iiii", 10, 4000, 25, 9000)
    index = OffsetIndex.open(path, 100, 1024)
    assert index.problem is None
    assert index.lookup(99) == (100, 0)
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 4000)
    assert index.lookup(124) == (110, 4000)
    assert index.lookup(1000) == (125, 9000)


def test_offset_index_is_full_at_segment_index_bytes(tmp_path: Path) -> None:
    index = OffsetIndex.create(tmp_path / "0.index", 0, 24)
    for i in range(3):
        assert not index.is_full
        index.append(i * 10, i * 100 + 1)
    assert index.is_full
    index.append(1000, 100000)  # ignored: the segment rolls instead
    assert len(index) == 3


def test_offset_index_truncate(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = OffsetIndex.create(path, 0, 1024)
    for i in range(1, 5):
        index.append(i * 10, i * 100)
    index.truncate_to(30)
    assert len(index) == 2 and index.lookup(1000) == (20, 200)
    assert path.stat().st_size == 16
    index.append(35, 300)
    index.close()
    assert OffsetIndex.open(path, 0, 1024).lookup(40) == (35, 300)


def test_offset_index_problems(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    assert OffsetIndex.open(path, 0, 1024).problem == "missing"
    path.write_bytes(struct.pack(">ii", 5, 100) + b"\x00\x01")
    assert "multiple" in (OffsetIndex.open(path, 0, 1024).problem or "")
    path.write_bytes(struct.pack(">iiii", 5, 100, 4, 200))
    assert "increasing" in (OffsetIndex.open(path, 0, 1024).problem or "")
    path.write_bytes(struct.pack(">iiii", 5, 100, 6, 200))
    index = OffsetIndex.open(path, 0, 1024)
    assert index.problem is None
    index.check_against(200)
    assert "past the log end" in (index.problem or "")


def test_offset_index_replace_is_atomic_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(b"garbage")
    index = OffsetIndex.open(path, 0, 1024)
    index.replace([(3, 10), (8, 90)])
    assert index.problem is None
    assert path.read_bytes() == struct.pack(">iiii", 3, 10, 8, 90)
    assert not (tmp_path / "0.index.tmp").exists()


def test_time_index_format_and_lookup(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex.create(path, 50, 1200)
    assert index.last_entry() == (NO_TIMESTAMP, 50)
    index.maybe_append(1000, 55)
    index.maybe_append(1000, 58)  # not greater: skipped
    index.maybe_append(2000, 60)
    index.close()
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 5, 2000, 10)
    index = TimeIndex.open(path, 50, 1200)
    assert index.problem is None
    assert index.lookup(999) == (NO_TIMESTAMP, 50)
    assert index.lookup(1500) == (1000, 55)
    assert index.lookup(2000) == (2000, 60)
    assert index.last_entry() == (2000, 60)


def test_time_index_full_check_can_be_skipped_for_the_final_entry(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "0.timeindex", 0, 12)
    index.maybe_append(1, 1)
    assert index.is_full
    index.maybe_append(2, 2)
    assert len(index) == 1
    index.maybe_append(3, 3, skip_full_check=True)
    assert len(index) == 2


def test_time_index_problems_and_truncate(tmp_path: Path) -> None:
    path = tmp_path / "0.timeindex"
    path.write_bytes(struct.pack(">qiqi", 200, 1, 100, 2))
    assert "increasing" in (TimeIndex.open(path, 0, 1200).problem or "")
    path.write_bytes(struct.pack(">qi", 200, 1)[:-1])
    assert "multiple" in (TimeIndex.open(path, 0, 1200).problem or "")
    path.write_bytes(struct.pack(">qiqi", 100, 1, 200, 7))
    index = TimeIndex.open(path, 0, 1200)
    index.check_against(7)
    assert "past the log end" in (index.problem or "")
    index = TimeIndex.open(path, 0, 1200)
    index.truncate_to(5)
    assert index.last_entry() == (100, 1)
    assert path.stat().st_size == 12


def test_open_index_descriptors_are_bounded(tmp_path: Path, monkeypatch: object) -> None:
    """Past the bound the least recently written index gives up its descriptor (fsynced
    first when written since its last fsync); its next append opens the file again."""
    import os

    from kbroker.log import entry_index
    from kbroker.log.open_indexes import OpenIndexFiles

    budget = OpenIndexFiles(limit=2)
    monkeypatch.setattr(entry_index, "OPEN_INDEXES", budget)  # type: ignore[attr-defined]
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(entry_index.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))  # type: ignore[attr-defined]
    indexes = [OffsetIndex.create(tmp_path / f"{i}.index", 0, 1024) for i in range(3)]
    assert len(budget) == 2 and budget.evictions == 1
    assert indexes[0]._fd is None  # evicted when the third was created (nothing unsynced)
    assert synced == []
    indexes[1].append(5, 100)  # unsynced, then evicted by the next one's use
    indexes[0].append(7, 200)
    indexes[2].append(9, 300)
    assert indexes[1]._fd is None and len(synced) == 1
    for i, (offset, position) in enumerate([(7, 200), (5, 100), (9, 300)]):
        assert (tmp_path / f"{i}.index").read_bytes() == struct.pack(">ii", offset, position)
    indexes[1].append(6, 150)  # opens the file again
    assert indexes[1]._fd is not None
    assert indexes[1].lookup(6) == (6, 150)
    for index in indexes:
        index.close()
    assert len(budget) == 0
