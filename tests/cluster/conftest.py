"""Cluster tests: a real ZooKeeper server and three kbroker processes on loopback.

Each test module gets its own cluster (module-scoped fixture); tests leave every broker
running when they finish, so the next test of the module starts from a whole cluster.
KBROKER_CLUSTER_DIR, when set, keeps the clusters' directories (logs included) there.
The directory is put on sys.path so the tests import local_cluster and helpers directly.
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


def java_available() -> bool:
    return Path("/usr/bin/java").exists() and any(Path("/usr/share/java").glob("zookeeper*.jar"))


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    if not java_available():
        pytest.skip("ZooKeeper (Debian package) and java are needed")
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
