"""A broker asked to stop while ZooKeeper is unreachable still shuts down cleanly, within its
controlled-shutdown budget (controlled.shutdown.max.retries x
controlled.shutdown.retry.backoff.ms), instead of waiting forever on a ZooKeeper call until
its supervisor kills it (which would make the next start recover every log)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import wait_for
from kazoo.client import KazooClient
from local_cluster import BrokerProcess

from compat_tests.support import require
from compat_tests.zookeeper_process import ZooKeeperProcess, java_available

pytestmark = pytest.mark.slow

RETRIES = 2
BACKOFF_MS = 1000
BUDGET_S = RETRIES * BACKOFF_MS / 1000
# The broker waits at most ZK_STOP_SECONDS (3 s) for its ZooKeeper client to close; the
# rest is log flushing and the exit.
SLACK_S = 6.0


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


def test_sigterm_while_starting_stops_the_start(tmp_path: Path) -> None:
    """A broker whose start waits to register in ZooKeeper (another session still holds its
    id's node, as after an unclean stop) stops as soon as it is asked to, not once the
    start is over."""
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    zookeeper = ZooKeeperProcess(tmp_path / "zookeeper")
    zookeeper.start()
    squatter = KazooClient(hosts=zookeeper.connect)
    squatter.start(timeout=30)
    registration = {
        "version": 5,
        "host": "127.0.0.1",
        "port": 1,
        "endpoints": ["PLAINTEXT://127.0.0.1:1"],
        "jmx_port": -1,
        "timestamp": "0",
    }
    squatter.create(
        "/brokers/ids/1", json.dumps(registration).encode(), ephemeral=True, makepath=True
    )
    broker = BrokerProcess(
        tmp_path / "broker",
        overrides={
            "broker.id": "1",
            "zookeeper.connect": zookeeper.connect,
            "offsets.topic.replication.factor": "1",
        },
    )
    try:
        broker.start(timeout=60)
        time.sleep(2)
        assert "kbroker 1 started" not in broker.stderr_path.read_text()
        started = time.monotonic()
        code = broker.stop(timeout=30)
        elapsed = time.monotonic() - started
    finally:
        broker.kill()
        squatter.stop()
        zookeeper.kill()
    log = broker.stderr_path.read_text()
    assert code == 0, f"exit code {code} after {elapsed:.1f} s\n{broker.stderr_tail()}"
    assert "stop requested while starting" in log and "shut down cleanly" in log
    assert elapsed < SLACK_S, f"took {elapsed:.1f} s"
