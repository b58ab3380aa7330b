"""Start-up: lazy segments after a clean shutdown, the recovery-point checkpoint after an
unclean one."""

from __future__ import annotations

from pathlib import Path

from kbroker.log import LogConfig, LogManager
from kbroker.log.log_manager import (
    RECOVERY_POINT_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kbroker.log.segment import LazySegment

from .helpers import batch, tags_of

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def manager(root: Path) -> LogManager:
    m = LogManager([root], config_for=lambda _t, _p: CONFIG)
    m.open_all()
    return m


def fill(root: Path, count: int = 80) -> LogManager:
    m = manager(root)
    plog = m.get_or_create("t", 0, CONFIG)
    for tag in range(count):
        plog.append_as_leader(
            batch(1, value_size=60, tag=tag), leader_epoch=0, log_append_time_ms=None
        )
    # The "crash" that follows comes after the background writes (checkpoints, fsyncs): a
    # real one would have cut them short, which the kill -9 tests cover.
    assert m.syncer.wait_idle(10)
    return m


def read_all(m: LogManager) -> list[tuple[int, int]]:
    plog = m.get("t", 0)
    out: list[tuple[int, int]] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        region = plog.read(offset, 1 << 20, max_offset=plog.log_end_offset, min_one_batch=True)
        got = tags_of(region.read())
        out += got
        offset = got[-1][0] + 1
    return out


def test_clean_start_opens_sealed_segments_lazily(tmp_path: Path) -> None:
    fill(tmp_path).shutdown()
    m = manager(tmp_path)
    plog = m.get("t", 0)
    segments = plog.segments()
    assert len(segments) > 5
    assert all(isinstance(s, LazySegment) and not s.loaded for s in segments[:-1])
    assert segments[-1].loaded
    # Sizes are known without opening anything; a read opens only what it touches.
    assert plog.size_bytes == sum(p.stat().st_size for p in plog.directory.glob("*.log"))
    assert read_all(m) == [(i, i) for i in range(80)]
    assert all(s.loaded and type(s).__name__ == "LogSegment" for s in segments)
    m.shutdown()


def test_a_lazy_segment_with_a_bad_index_is_rebuilt_on_first_use(tmp_path: Path) -> None:
    fill(tmp_path).shutdown()
    index = tmp_path / "t-0" / f"{0:020d}.index"
    index.write_bytes(index.read_bytes()[:-3])  # not a multiple of the entry size
    m = manager(tmp_path)
    assert read_all(m) == [(i, i) for i in range(80)]
    assert len(index.read_bytes()) % 8 == 0
    m.shutdown()


def test_unclean_start_validates_only_past_the_recovery_point(tmp_path: Path) -> None:
    m = fill(tmp_path)
    # The rolls' fsyncs run in the background; the recovery point follows them, and the
    # checkpoint written next holds it.
    assert m.syncer.wait_idle(10)
    m.flush_due()
    assert m.syncer.wait_idle(10)
    plog = m.get("t", 0)
    bases = plog.segment_base_offsets()
    # Every rolled segment was fsynced: the recovery point is at least the active base.
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] >= bases[-1]
    # Simulate an older checkpoint (written before the last rolls), then crash (no shutdown).
    write_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT, {("t", 0): bases[-3] + 1})
    m2 = manager(tmp_path)
    plog2 = m2.get("t", 0)
    assert plog2.recovered_segments == bases[-3:]
    assert all(not s.loaded for s in plog2.segments()[: len(bases) - 3])
    assert read_all(m2) == [(i, i) for i in range(80)]
    m2.shutdown()
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        ("t", 0): plog2.log_end_offset
    }


def test_unclean_start_without_a_checkpoint_scans_the_active_segment(tmp_path: Path) -> None:
    m = fill(tmp_path)
    bases = m.get("t", 0).segment_base_offsets()
    m2 = manager(tmp_path)  # no shutdown, no checkpoint
    assert m2.get("t", 0).recovered_segments == bases[-1:]
    assert read_all(m2) == [(i, i) for i in range(80)]
    m2.shutdown()


def _files(directory: Path) -> dict[str, tuple[int, int, int]]:
    """Name -> (inode, size, mtime): an atomic rewrite changes the inode, an append the size."""
    return {
        p.name: (p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.iterdir()
    }


def test_a_restart_with_nothing_new_rewrites_no_file(tmp_path: Path) -> None:
    fill(tmp_path).shutdown()
    before = _files(tmp_path / "t-0")
    manager(tmp_path).shutdown()
    assert _files(tmp_path / "t-0") == before


def test_recovery_that_finds_the_log_intact_rewrites_no_file(tmp_path: Path) -> None:
    fill(tmp_path)  # never shut down: the next start recovers the active segment
    before = _files(tmp_path / "t-0")
    m2 = manager(tmp_path)
    plog = m2.get("t", 0)
    assert plog.recovered_segments == plog.segment_base_offsets()[-1:]
    assert _files(tmp_path / "t-0") == before
    # What recovery scanned may have been in the page cache only: the next flush fsyncs it.
    assert plog.active_segment.dirty
    assert read_all(m2) == [(i, i) for i in range(80)]
    m2.shutdown()
