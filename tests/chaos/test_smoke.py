"""A short seeded fault schedule on a real cluster in network namespaces (the long runs are
``make chaos``): acks=all with min.insync.replicas=2 must lose, duplicate or un-show nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chaos.run import run_schedule
from chaos.schedule import KINDS
from compat_tests.support import require
from tests.ops.compose_emulation import can_emulate


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_short_schedule_of_pause_partition_full_disk_and_kill_is_safe(tmp_path: Path) -> None:
    problem = can_emulate()
    require(problem is None, problem or "")
    require(shutil.which("iptables") is not None, "iptables is not installed")
    # Seed 9: a pause past the session, a partition, a full disk, a kill -9 (zk-cut faults
    # are in make chaos).
    summary = run_schedule(9, 45.0, "all", KINDS, tmp_path)
    assert summary["faults"] == {"pause": 1, "partition": 1, "disk": 1, "kill": 1}
    assert summary["safe"], summary
    assert summary["acked"] > 0
    assert not summary["unexpected_exits"], summary
    # Its only log directory full, the broker went offline and stopped (KIP-112), and
    # started again once the space was back.
    assert summary["disk_restarts"] == ["broker-3"], summary
