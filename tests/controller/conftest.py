"""Fixtures of the controller tests: a real ZooKeeper server (Debian's package) per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.support import require
from compat_tests.zookeeper_process import ZooKeeperProcess, java_available


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[str]:
    """The connect string of a ZooKeeper server running for the test."""
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    server = ZooKeeperProcess(tmp_path / "zk")
    server.start()
    try:
        yield server.connect
    finally:
        server.stop()
