"""The broker as a process: start-up, graceful SIGTERM, configuration errors."""

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.broker_process import REPO_ROOT, BrokerProcess, api_versions_error

pytestmark = pytest.mark.timeout(120)


def test_sigterm_stops_gracefully_and_restart_recovers(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker")
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("graceful", 1, 1)])["graceful"].result(timeout=20)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for i in range(100):
            producer.produce("graceful", value=b"%d" % i, partition=0)
        assert producer.flush(20) == 0

        started = time.monotonic()
        code = broker.stop(timeout=15.0)
        assert code == 0, f"exit code {code} after SIGTERM\n{broker.stderr_tail()}"
        assert time.monotonic() - started < 15.0

        broker.start()
        host, port = broker.bootstrap.rsplit(":", 1)
        assert api_versions_error(host, int(port)) == 0
    finally:
        broker.stop()


def test_unknown_property_is_rejected_at_start(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", overrides={"no.such.property": "1"})
    started = time.monotonic()
    proc = subprocess.run(
        broker.command(), cwd=REPO_ROOT, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert proc.returncode != 0
    assert time.monotonic() - started < 30
    assert b"no.such.property" in proc.stderr, proc.stderr[-2000:]


def test_bad_value_is_rejected_at_start(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", overrides={"num.partitions": "many"})
    proc = subprocess.run(
        broker.command(), cwd=REPO_ROOT, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert proc.returncode != 0
    assert b"num.partitions" in proc.stderr, proc.stderr[-2000:]
