"""A real kill -9 of a process appending to a log, then recovery."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kbroker.log import LogConfig, PartitionLog

from .helpers import batch, tags_of

ROOT = Path(__file__).resolve().parents[2]


def test_every_reported_batch_survives_kill9(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.log.kill9_writer", str(directory)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    reported: list[tuple[int, int, int]] = []
    try:
        assert child.stdout is not None
        for line in child.stdout:
            first, last, tag = map(int, line.split())
            reported.append((first, last, tag))
            if len(reported) >= 1500:
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert len(reported) == 1500

    plog = PartitionLog.open(directory, LogConfig(segment_bytes=20_000), recover=True)
    assert len(plog.segment_base_offsets()) > 5
    assert plog.log_end_offset >= reported[-1][1] + 1
    records: list[tuple[int, int]] = []
    offset = 0
    while offset < plog.log_end_offset:
        region = plog.read(offset, 1 << 20, max_offset=plog.log_end_offset, min_one_batch=True)
        assert region is not None
        got = tags_of(region.read())
        records.extend(got)
        offset = got[-1][0] + 1
    # No gap, and every reported batch is where the append said.
    assert [o for o, _ in records] == list(range(plog.log_end_offset))
    by_offset = dict(records)
    for first, last, tag in reported:
        assert all(by_offset[o] == tag for o in range(first, last + 1))
    # The producer state survived too: the next sequence must follow the last one.
    leo = plog.log_end_offset
    result = plog.append_as_leader(
        batch(1, producer_id=11, producer_epoch=0, base_sequence=leo),
        leader_epoch=1,
        log_append_time_ms=None,
    )
    assert result.first_offset == leo and not result.duplicate
