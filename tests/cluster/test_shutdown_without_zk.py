"""A broker asked to stop while ZooKeeper is unreachable still shuts down cleanly, within its
controlled-shutdown budget (controlled.shutdown.max.retries x
controlled.shutdown.retry.backoff.ms), instead of waiting forever on a ZooKeeper call until
its supervisor kills it (which would make the next start recover every log)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import wait_for
from local_cluster import BrokerProcess

from compat_tests.support import require
from compat_tests.zookeeper_process import ZooKeeperProcess, java_available

pytestmark = pytest.mark.slow

RETRIES = 2
BACKOFF_MS = 1000
BUDGET_S = RETRIES * BACKOFF_MS / 1000
# Closing the ZooKeeper client waits for its connection thread (kazoo bounds that by
# max(10 s, session timeout)); the rest is interpreter start-up and log flushing.
SLACK_S = 12.0


@pytest.mark.parametrize("zookeeper_gone", ["killed", "stopped"])
def test_sigterm_with_zookeeper_down_shuts_down_cleanly(
    tmp_path: Path, zookeeper_gone: str
) -> None:
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    zookeeper = ZooKeeperProcess(tmp_path / "zookeeper")
    broker = BrokerProcess(
        tmp_path / "broker",
        overrides={
            "broker.id": "1",
            "zookeeper.connect": zookeeper.connect,
            "zookeeper.session.timeout.ms": "6000",
            "offsets.topic.replication.factor": "1",
            "controlled.shutdown.max.retries": str(RETRIES),
            "controlled.shutdown.retry.backoff.ms": str(BACKOFF_MS),
        },
    )
    zookeeper.start()
    try:
        broker.start(timeout=60)
        # Registered in ZooKeeper and fully started (ApiVersions answers before that).
        wait_for(
            lambda: "kbroker 1 started" in broker.stderr_path.read_text() or None,
            60,
            "the broker to finish starting",
        )
        if zookeeper_gone == "killed":
            zookeeper.kill()
        else:
            zookeeper.stop()
        # Let the client notice the lost connection and its refresh loop block on it.
        time.sleep(2)
        started = time.monotonic()
        code = broker.stop(timeout=BUDGET_S + SLACK_S + 20)
        elapsed = time.monotonic() - started
    finally:
        broker.kill()
        zookeeper.kill()
    log = broker.stderr_path.read_text() + broker.stdout_path.read_text()
    assert code == 0, f"exit code {code} after {elapsed:.1f} s\n{broker.stderr_tail()}"
    assert "shut down cleanly" in log
    assert elapsed < BUDGET_S + SLACK_S, f"took {elapsed:.1f} s"
    assert (broker.log_dir / ".kafka_cleanshutdown").exists() or any(
        broker.log_dir.glob("**/.kafka_cleanshutdown")
    )
