"""Two network faults at once in real namespaces: healing one leaves the other in force."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from chaos.run import BROKERS, CLIENT, ZOOKEEPER, ChaosCluster, Injector
from chaos.schedule import Fault
from compat_tests.support import require
from tests.ops.compose_emulation import can_emulate, tool_env, wait_until

PORT = 2181
LISTEN = (
    "import socket\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    f"s.bind(('0.0.0.0', {PORT}))\n"
    "s.listen()\n"
    "while True:\n"
    "    s.accept()[0].close()\n"
)
CONNECT = "import socket, sys\nsocket.create_connection((sys.argv[1], int(sys.argv[2])), 1)\n"


@pytest.mark.timeout(120)
def test_healing_a_partition_keeps_an_overlapping_zookeeper_cut(tmp_path: Path) -> None:
    problem = can_emulate()
    require(problem is None, problem or "")
    require(shutil.which("iptables") is not None, "iptables is not installed")
    cluster = ChaosCluster(tmp_path)
    try:
        cluster.net.open([ZOOKEEPER, *BROKERS, CLIENT])
        cluster.net.start(ZOOKEEPER, [sys.executable, "-c", LISTEN], tool_env())

        def reach(host: str) -> bool:
            argv = [sys.executable, "-c", CONNECT, cluster.address(ZOOKEEPER), str(PORT)]
            return cluster.net.run(host, argv, timeout=30).returncode == 0

        def reachable() -> set[str]:
            return {host for host in (*BROKERS, CLIENT) if reach(host)}

        wait_until(lambda: reach(CLIENT), "listener", 30, cluster.net, [ZOOKEEPER])
        injector = Injector(cluster)
        # ZooKeeper alone on one side; broker-1 also cut from ZooKeeper: the same rules twice.
        partition = Fault(0.0, 10.0, "partition", (ZOOKEEPER,))
        zk_cut = Fault(1.0, 10.0, "zk-cut", ("broker-1",))
        injector.apply(partition)
        injector.apply(zk_cut)
        assert reachable() == {CLIENT}
        injector.heal(partition)
        assert reachable() == {"broker-2", "broker-3", CLIENT}
        injector.heal(zk_cut)
        assert reachable() == {*BROKERS, CLIENT}
    finally:
        cluster.close()
