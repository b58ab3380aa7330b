"""Run Apache Kafka 3.9.0's broker (../shared/kafka-3.9, ZooKeeper mode) for tests.

The oracle: compat_tests run against it as well as against kbroker, so a test that only
kbroker passes shows a kbroker quirk, not Kafka's behaviour. `KafkaProcess` has the interface
of `BrokerProcess` (start, stop, kill, restart, bootstrap, log_dir); it needs a running
ZooKeeper (compat_tests.zookeeper_process) and Java 17.

Files under the work directory: ``server.properties`` (written at each start), ``logs/``
(Kafka's ``log.dirs``), ``app-logs/`` (Kafka's own log files, LOG_DIR) and ``broker.out``
(its console: stdout and stderr). The heap is 512 MB (KAFKA_HEAP_OPTS; Kafka's default is
1 GB), enough for tests on a small shared machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path

from compat_tests.broker_process import REPO_ROOT, BrokerProcess, BrokerStartError
from kbroker.client import KafkaClient

KAFKA_HOME = REPO_ROOT.parent / "shared" / "kafka-3.9"
KAFKA_START = KAFKA_HOME / "bin" / "kafka-server-start.sh"
KAFKA_HEAP_OPTS = "-Xmx512m"

# What a single broker needs (Kafka's defaults ask for 3 replicas of its internal topics);
# everything else keeps Kafka's defaults, as kbroker's compat run keeps kbroker's.
SINGLE_BROKER = {
    "broker.id": "0",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


def kafka_available() -> bool:
    return KAFKA_START.is_file()


class KafkaProcess(BrokerProcess):
    """One Apache Kafka broker on a loopback port, registered in `zookeeper_connect`."""

    def __init__(
        self,
        work_dir: Path,
        zookeeper_connect: str,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(work_dir, host=host, port=port, overrides=overrides)
        self.zookeeper_connect = zookeeper_connect

    @property
    def stderr_path(self) -> Path:
        # Kafka logs to its console's stdout: one file holds both streams.
        return self.stdout_path

    @property
    def config_path(self) -> Path:
        return self.work_dir / "server.properties"

    def command(self) -> list[str]:
        return [str(KAFKA_START), str(self.config_path)]

    def environment(self) -> dict[str, str]:
        return {
            **super().environment(),
            "KAFKA_HEAP_OPTS": KAFKA_HEAP_OPTS,
            "LOG_DIR": str(self.work_dir / "app-logs"),
        }

    def start(self, timeout: float = 90.0) -> None:
        listener = f"PLAINTEXT://{self.host}:{self.port}"
        settings = {
            **SINGLE_BROKER,
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.log_dir),
            "zookeeper.connect": self.zookeeper_connect,
            **self.overrides,
        }
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        started = time.monotonic()
        super().start(timeout)
        # Kafka answers ApiVersions before the controller has sent it the cluster's metadata;
        # until then Metadata lists no broker.
        asyncio.run(self._wait_in_metadata(timeout - (time.monotonic() - started)))

    def restart(self, timeout: float = 90.0) -> None:
        # Kafka's controlled shutdown and start-up take longer than kbroker's.
        self.stop(timeout=30.0)
        self.start(max(timeout, 90.0))

    async def _wait_in_metadata(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                async with KafkaClient([(self.host, self.port)], timeout=5) as client:
                    md = await client.metadata([])
                if md.brokers and md.controller_id >= 0:
                    return
            except (OSError, TimeoutError, ConnectionError):
                pass
            await asyncio.sleep(0.2)
        self.kill()
        raise BrokerStartError(f"Kafka never listed itself in Metadata\n{self.stderr_tail()}")
