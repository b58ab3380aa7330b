"""The logs' fsyncs and checkpoints run off the caller's thread (the event loop), in order,
and the files that vouch for data (the recovery-point checkpoint) become durable only after
that data (kbroker/log/background_sync.py)."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kbroker.log import LogConfig, LogManager
from kbroker.log.background_sync import BackgroundSync
from kbroker.log.fileio import TMP_SUFFIX
from kbroker.log.leader_epochs import FILE_NAME as EPOCHS_FILE
from kbroker.log.log_manager import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from replication.checkpoints import read_high_watermarks, write_high_watermarks

from .helpers import batch

CONFIG = LogConfig(segment_bytes=1000)
# A disk that takes this long for every fsync while the gate is shut: an fsync made on the
# caller's thread would hold it at least this long.
SLOW_FSYNC_SECONDS = 3.0
SYNCER_THREAD = "kbroker-background-sync"


@dataclass
class SlowDisk:
    """os.fsync replaced: it waits for `gate` (at most SLOW_FSYNC_SECONDS), then records the
    file it synced and the thread that asked."""

    gate: threading.Event = field(default_factory=threading.Event)
    synced: list[tuple[str, str]] = field(default_factory=list)
    fail_with: int | None = None

    def fsync(self, fd: int) -> None:
        self.gate.wait(SLOW_FSYNC_SECONDS)
        self.synced.append((os.readlink(f"/proc/self/fd/{fd}"), threading.current_thread().name))
        if self.fail_with is not None:
            raise OSError(self.fail_with, os.strerror(self.fail_with))

    def order_of(self, path: Path) -> list[int]:
        """When `path` was fsynced (or its temporary file, for an atomic replacement)."""
        names = (str(path), str(path) + TMP_SUFFIX)
        return [i for i, (synced, _) in enumerate(self.synced) if synced in names]


@pytest.fixture
def manager(tmp_path: Path) -> LogManager:
    """Opened (start-up's own fsyncs done) before the disk turns slow."""
    manager = LogManager([tmp_path])
    manager.open_all()
    return manager


@pytest.fixture
def slow_disk(manager: LogManager, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowDisk]:
    disk = SlowDisk()
    monkeypatch.setattr(os, "fsync", disk.fsync)
    yield disk
    disk.gate.set()


def roll_three_segments(manager: LogManager) -> None:
    plog = manager.get_or_create("t", 0, CONFIG)
    plog.assign_epoch_start(3, 0)
    tag = 0
    while len(plog.segment_base_offsets()) < 4:
        plog.append_as_leader(
            batch(1, value_size=100, tag=tag), leader_epoch=3, log_append_time_ms=None
        )
        tag += 1


def test_rolls_epochs_and_checkpoints_leave_the_fsyncs_to_the_syncer(
    tmp_path: Path, manager: LogManager, slow_disk: SlowDisk
) -> None:
    started = time.monotonic()
    roll_three_segments(manager)
    manager.flush_due()
    # The caller (the event loop) did not wait for the slow disk once.
    assert time.monotonic() - started < SLOW_FSYNC_SECONDS / 2
    plog = manager.get("t", 0)
    assert plog is not None
    # Nothing is vouched for before the disk answered.
    assert plog.recovery_point == 0
    slow_disk.gate.set()
    assert manager.syncer.wait_idle(30)
    bases = plog.segment_base_offsets()
    assert plog.recovery_point == bases[-1]
    assert {thread for _, thread in slow_disk.synced} == {SYNCER_THREAD}
    manager.flush_due()
    assert manager.syncer.wait_idle(30)
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): bases[-1]}
    assert (plog.directory / EPOCHS_FILE).read_text() == "0\n1\n3 0\n"
    manager.shutdown()


def test_a_checkpoint_is_fsynced_after_the_data_it_vouches_for(
    tmp_path: Path, manager: LogManager, slow_disk: SlowDisk
) -> None:
    slow_disk.gate.set()
    roll_three_segments(manager)
    assert manager.syncer.wait_idle(30)
    manager.flush_due()
    assert manager.syncer.wait_idle(30)
    plog = manager.get("t", 0)
    assert plog is not None
    sealed_logs = [s.log_path for s in plog.segments()[:-1]]
    epochs = plog.directory / EPOCHS_FILE
    checkpoint_fsyncs = slow_disk.order_of(tmp_path / RECOVERY_POINT_CHECKPOINT)
    assert len(checkpoint_fsyncs) == 1
    assert max(i for path in sealed_logs for i in slow_disk.order_of(path)) < checkpoint_fsyncs[0]
    assert slow_disk.order_of(epochs)[0] < slow_disk.order_of(sealed_logs[0])[0]
    manager.shutdown()


def test_a_failed_background_fsync_is_reported_and_vouches_for_nothing(
    tmp_path: Path, manager: LogManager, slow_disk: SlowDisk
) -> None:
    failures: list[tuple[Path, int | None]] = []
    manager.syncer.on_failure = lambda log_dir, exc: failures.append((log_dir, exc.errno))
    slow_disk.fail_with = errno.EIO
    slow_disk.gate.set()
    roll_three_segments(manager)
    assert manager.syncer.wait_idle(30)
    plog = manager.get("t", 0)
    assert plog is not None
    assert plog.recovery_point == 0
    assert failures and set(failures) == {(tmp_path, errno.EIO)}
    manager.syncer.stop()


def test_jobs_run_in_order_on_one_thread() -> None:
    syncer = BackgroundSync()
    ran: list[tuple[int, str]] = []
    for i in range(50):
        syncer.submit(Path("/"), lambda i=i: ran.append((i, threading.current_thread().name)))
    assert syncer.wait_idle(30)
    syncer.stop()
    assert ran == [(i, SYNCER_THREAD) for i in range(50)]


def test_the_high_watermark_checkpoint_is_written_by_the_syncer(
    tmp_path: Path, manager: LogManager, slow_disk: SlowDisk
) -> None:
    manager.get_or_create("t", 0, CONFIG)
    started = time.monotonic()
    write_high_watermarks(manager, {("t", 0): 7})
    assert time.monotonic() - started < SLOW_FSYNC_SECONDS / 2
    slow_disk.gate.set()
    assert manager.syncer.wait_idle(30)
    assert read_high_watermarks([tmp_path]) == {("t", 0): 7}
    assert {thread for _, thread in slow_disk.synced} == {SYNCER_THREAD}
    manager.shutdown()


def test_a_report_that_fails_does_not_stop_the_jobs_after_it() -> None:
    syncer = BackgroundSync()

    def undeliverable(_log_dir: Path, _exc: OSError) -> None:
        raise RuntimeError("Event loop is closed")

    syncer.on_failure = undeliverable
    ran: list[str] = []

    def failing() -> None:
        raise OSError(errno.EIO, "I/O error")

    syncer.submit(Path("/"), failing)
    syncer.submit(Path("/"), lambda: ran.append("after"))
    assert syncer.wait_idle(30)
    syncer.stop()
    assert ran == ["after"]
