"""One broker process per log directory: a second one refuses to start and writes nothing
there (kbroker/log/dir_lock.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from compat_tests.broker_process import REPO_ROOT, BrokerProcess, free_port
from kbroker.cli import EXIT_START_FAILED
from kbroker.log.log_manager import LOG_START_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from replication.checkpoints import CHECKPOINT_FILE as HIGH_WATERMARK_CHECKPOINT

CHECKPOINTS = (LOG_START_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, HIGH_WATERMARK_CHECKPOINT)


def _files(directory: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(directory)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file()
    }


def test_a_second_broker_on_the_same_log_directory_refuses_to_start(tmp_path: Path) -> None:
    first = BrokerProcess(tmp_path)
    first.start()
    try:
        # The first broker's own first checkpoints (the log checkpoints within a second of its
        # start, the high watermarks within replica.high.watermark.checkpoint.interval.ms) are in.
        deadline = time.monotonic() + 10
        while not all((first.log_dir / name).exists() for name in CHECKPOINTS):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        before = _files(first.log_dir)
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "kbroker",
                "start",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                "--override",
                f"log.dirs={first.log_dir}",
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == EXIT_START_FAILED
        assert "in use by another process" in second.stderr
        assert _files(first.log_dir) == before
        assert first.running()
    finally:
        first.stop()
    # Stopped (or killed), the first broker leaves the directory free again.
    first.start()
    first.kill()
    first.start()
    first.stop()
