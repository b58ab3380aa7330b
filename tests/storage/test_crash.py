"""Crash injection: a real child process is killed with SIGKILL in the middle of cleaning or
of retention, several times in a row; each restart must find a consistent log that lost no
live record."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbroker.log import LogManager
from kbroker.log.cleaner import CleanerConfig, LogCleaner
from wire.records.record import decode_records

from .crash_child import config_for

ROOT = Path(__file__).resolve().parents[2]
KILLS = 4


def run_until_killed(mode: str, root: Path, start_seq: int, rng: random.Random) -> list[str]:
    """Start the child, let it work through a few passes, kill it during the next one."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.crash_child", mode, str(root), str(start_seq)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    passes_wanted = rng.randint(2, 5)
    marker = "C" if mode == "clean" else "R"
    try:
        assert child.stdout is not None
        for line in child.stdout:
            lines.append(line.strip())
            if line.strip() == marker:
                passes_wanted -= 1
                if passes_wanted == 0:
                    time.sleep(rng.uniform(0.0, 0.05))
                    break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL, "the child died on its own"
    return lines


def read_log(manager: LogManager) -> tuple[list[tuple[int, bytes, bytes]], int, int]:
    plog = manager.get("t", 0)
    assert plog is not None
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        region = plog.read(offset, 1 << 20, max_offset=plog.log_end_offset, min_one_batch=True)
        if region is None:
            break
        records = decode_records(region.read())
        out += [(r.offset, r.key, r.value) for r in records]
        offset = records[-1].offset + 1 if records else offset + 1
    return out, plog.log_start_offset, plog.log_end_offset


def check_restart(mode: str, root: Path, appended: dict[int, tuple[bytes, bytes]]) -> int:
    """Reopen after the kill and check the log; returns the next sequence to write."""
    config = config_for(mode)
    manager = LogManager([root], config_for=lambda _t, _p: config)
    manager.open_all()
    try:
        directory = root / "t-0"
        leftovers = [p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap")]
        assert leftovers == []
        records, start, end = read_log(manager)
        offsets = [o for o, _, _ in records]
        assert offsets == sorted(set(offsets))
        assert max(appended) < end  # every acknowledged append survived the kill
        by_offset = {o: (k, v) for o, k, v in records}
        if mode == "clean":
            # Every key keeps its final acknowledged value (or a later one, written just
            # before the kill), and nothing the child wrote was altered.
            last: dict[bytes, int] = {}
            for offset, (key, _) in sorted(appended.items()):
                last[key] = offset
            for key, offset in last.items():
                newest = max(o for o, (k, _) in by_offset.items() if k == key)
                assert newest >= offset
            for offset, (key, value) in by_offset.items():
                if offset in appended:
                    assert (key, value[: len(appended[offset][1])]) == appended[offset]
        else:
            # No hole between the log start and the end, every acknowledged record at or
            # above the start is there, and retention kept the log near its bound.
            assert offsets == list(range(start, end))
            for offset, (key, prefix) in appended.items():
                if offset >= start:
                    assert by_offset[offset][0] == key
                    assert by_offset[offset][1].startswith(prefix)
            assert (
                manager.get("t", 0).size_bytes <= config.retention_bytes + 3 * config.segment_bytes
            )
        # The log keeps working: a full cleaner pass succeeds on it.
        LogCleaner(manager, CleanerConfig()).clean_log("t", 0)
        return int(records[-1][2].split(b":")[1]) + 1 if records else 0
    finally:
        manager.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["clean", "retain"])
def test_kill9_during_background_work_then_restart(tmp_path: Path, mode: str) -> None:
    rng = random.Random(f"{mode}-crash")
    appended: dict[int, tuple[bytes, bytes]] = {}
    next_seq = 0
    interrupted = 0
    for _ in range(KILLS):
        lines = run_until_killed(mode, tmp_path, next_seq, rng)
        for line in lines:
            if line.startswith("A "):
                _, key, seq, offset = line.split()
                # Values are "<key>:<seq>:" plus padding; the prefix identifies them.
                appended[int(offset)] = (key.encode(), f"{key}:{seq}:".encode())
        assert any(line in ("D", "S") for line in lines)
        names = [p.name for p in (tmp_path / "t-0").iterdir()]
        interrupted += any(n.endswith((".cleaned", ".swap")) for n in names)
        next_seq = check_restart(mode, tmp_path, appended)
    if mode == "clean":
        assert interrupted > 0, "no kill landed inside a cleaner pass"
