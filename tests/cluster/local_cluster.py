"""A local cluster on loopback: one ZooKeeper server (Debian's package) and N kbroker processes.

Used by the cluster tests, by bench/replicated.py and by `make cluster` (run as a script it
starts ZooKeeper and three brokers on ports 9092-9094 under ./cluster-data and stops them on
Ctrl-C).

Layout under the work directory: ``zookeeper/data`` (ZooKeeper's dataDir), ``zookeeper.out``
(its console output), and ``broker-<id>/`` per broker (see compat_tests/broker_process.py).
ZooKeeper is compat_tests.zookeeper_process's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from compat_tests.zookeeper_process import ZooKeeperProcess  # noqa: E402
from kbroker.client import KafkaClient  # noqa: E402

# Settings that make failures show quickly on a small shared machine.
FAST_FAILOVER = {
    "zookeeper.session.timeout.ms": "8000",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "200",
    "replica.fetch.wait.max.ms": "200",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "share.coordinator.state.topic.num.partitions": "3",
    "default.replication.factor": "3",
    "controlled.shutdown.retry.backoff.ms": "3000",
    "auto.leader.rebalance.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
}


class LocalCluster:
    """ZooKeeper plus brokers 1..n, each with its own port and data directory."""

    def __init__(
        self,
        work_dir: Path,
        size: int = 3,
        *,
        overrides: Mapping[str, str] | None = None,
        ports: list[int] | None = None,
        broker_type: type[BrokerProcess] = BrokerProcess,
    ) -> None:
        self.work_dir = work_dir
        self.zookeeper = ZooKeeperProcess(work_dir / "zookeeper")
        settings = {**FAST_FAILOVER, **(overrides or {})}
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(size):
            broker_id = i + 1
            self.brokers[broker_id] = broker_type(
                work_dir / f"broker-{broker_id}",
                port=ports[i] if ports else None,
                overrides={
                    "broker.id": str(broker_id),
                    "zookeeper.connect": self.zookeeper.connect,
                    **settings,
                },
            )

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> None:
        self.zookeeper.start()
        for broker in self.brokers.values():
            broker.start(timeout=60)
        self.wait_registered()

    def wait_registered(self, timeout: float = 60.0) -> None:
        """Wait until every running broker sees every running broker registered and a
        controller elected: asked one by one, since a broker that has just learned of a
        re-registration answers Metadata with it while another, which may be the one
        asked to create a topic next, has not yet ("only 2 broker(s) are registered")."""
        asyncio.run(self._wait_registered(timeout))

    async def _wait_registered(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not await self._all_see_all():
            if time.monotonic() > deadline:
                raise RuntimeError("brokers did not register")
            await asyncio.sleep(0.3)

    async def _all_see_all(self) -> bool:
        wanted = {i for i, b in self.brokers.items() if b.running()}
        for broker in (self.brokers[i] for i in wanted):
            try:
                async with KafkaClient([(broker.host, broker.port)], timeout=5) as client:
                    md = await client.metadata([])
            except (OSError, TimeoutError, ConnectionError):
                return False
            if not {b.node_id for b in md.brokers} >= wanted or md.controller_id < 0:
                return False
        return True

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.stop(timeout=30)
        self.zookeeper.stop()

    def kill_all(self) -> None:
        for broker in self.brokers.values():
            if broker.pid is not None and broker.running():
                os.kill(broker.pid, signal.SIGCONT)
            broker.kill()
        self.zookeeper.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description="ZooKeeper and three kbrokers on loopback")
    parser.add_argument("--dir", default="cluster-data")
    parser.add_argument("--base-port", type=int, default=9092)
    args = parser.parse_args()
    ports = [args.base_port + i for i in range(3)]
    cluster = LocalCluster(Path(args.dir).resolve(), 3, ports=ports)
    # SIGTERM stops the cluster like Ctrl-C does (SystemExit runs the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        cluster.start()
        print(f"cluster up: bootstrap {cluster.bootstrap}, zookeeper {cluster.zookeeper.connect}")
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping")
        cluster.stop()


if __name__ == "__main__":
    main()
