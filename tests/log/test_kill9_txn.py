"""A real kill -9 of a process writing transactions and markers, then recovery: the open
transactions (so the LSO) and the aborted-transaction index come back as the log says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kbroker.log import LogConfig, PartitionLog
from kbroker.producer_state import AbortedTxn
from wire.records.control import read_end_txn_marker

ROOT = Path(__file__).resolve().parents[2]


def expected_state(plog: PartitionLog) -> tuple[dict[int, int], list[AbortedTxn]]:
    """Open transactions and aborted ones, worked out from the batches of the log."""
    open_txns: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    for segment in plog.segments():
        for pos, header in segment.batches_from(0):
            pid = header.producer_id
            if not header.is_control:
                open_txns.setdefault(pid, header.base_offset)
                continue
            found = read_end_txn_marker(segment.read_batch(pos, header))
            assert found is not None
            first = open_txns.pop(pid, None)
            if first is not None and not found.commit:
                lso = min(open_txns.values(), default=header.base_offset + 1)
                aborted.append(AbortedTxn(pid, first, header.base_offset, lso))
    return open_txns, aborted


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_transactions_survive_kill9(tmp_path: Path, seed: int) -> None:
    directory = tmp_path / "t-0"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.log.kill9_txn_writer", str(directory), str(seed)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    reported = 0
    last_offset = -1
    try:
        assert child.stdout is not None
        for line in child.stdout:
            last_offset = int(line.split()[1])
            reported += 1
            if reported >= 600 + 150 * seed:
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL

    plog = PartitionLog.open(directory, LogConfig(segment_bytes=6_000), recover=True)
    assert len(plog.segment_base_offsets()) > 5
    assert plog.log_end_offset > last_offset
    open_txns, aborted = expected_state(plog)
    assert aborted, "the run aborted no transaction"
    assert plog.producers.ongoing_transactions() == open_txns
    assert plog.aborted_transactions(0, plog.log_end_offset) == aborted
    first_open = min(open_txns.values(), default=plog.log_end_offset)
    assert plog.producers.first_unstable_offset(plog.log_end_offset) in (None, first_open)
    plog.close()
    # A clean reopen (snapshot at the log end, no scan) agrees.
    again = PartitionLog.open(directory, LogConfig(segment_bytes=6_000), recover=False)
    assert again.producers.ongoing_transactions() == open_txns
    assert again.aborted_transactions(0, again.log_end_offset) == aborted
    again.close()
