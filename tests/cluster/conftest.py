"""Cluster tests: a real ZooKeeper server and three kbroker processes on loopback.

Each test module gets its own cluster (module-scoped fixture); tests leave every broker
running when they finish, and each test starts once every broker is registered again (a
broker that was paused past its session timeout needs a moment to re-register).
KBROKER_CLUSTER_DIR, when set, keeps the clusters' directories (logs included) there.
The directory is put on sys.path so the tests import local_cluster and helpers directly.
``kafka_tools`` runs Apache Kafka 3.9's own tools (compat_tests/kafka_tools.py).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from local_cluster import LocalCluster  # noqa: E402

from compat_tests.kafka_tools import KafkaTools  # noqa: E402
from compat_tests.support import require  # noqa: E402
from compat_tests.zookeeper_process import java_available  # noqa: E402


@pytest.fixture(scope="module")
def module_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    keep = os.environ.get("KBROKER_CLUSTER_DIR")
    if keep:
        work = Path(keep) / request.module.__name__
        shutil.rmtree(work, ignore_errors=True)
    else:
        work = tmp_path_factory.mktemp("cluster")
    local = LocalCluster(work)
    try:
        local.start()
        yield local
    finally:
        local.kill_all()


@pytest.fixture
def cluster(module_cluster: LocalCluster) -> LocalCluster:
    """The module's cluster with every broker running: a test that failed before restarting
    the broker it stopped does not leave the module's next tests a broker short."""
    for broker in module_cluster.brokers.values():
        if not broker.running():
            broker.start(timeout=120)
    module_cluster.wait_registered()
    return module_cluster


@pytest.fixture(scope="session")
def kafka_tools(tmp_path_factory: pytest.TempPathFactory) -> KafkaTools:
    """Kafka 3.9's kafka-acls.sh and kafka-configs.sh, the launcher compiled once."""
    return KafkaTools(tmp_path_factory.mktemp("kafka-tools"))
