"""Run Apache Kafka's brokers for tests: 3.9.0 in ZooKeeper mode and 4.3 in KRaft mode.

The oracles: compat_tests run against them as well as against kbroker, so a test that only
kbroker passes shows a kbroker quirk, not Kafka's behaviour. Both classes have the interface
of `BrokerProcess` (start, stop, kill, restart, bootstrap, log_dir) and need Java 17.

- `KafkaProcess`: Kafka 3.9.0 (../shared/kafka-3.9), registered in a running ZooKeeper
  (compat_tests.zookeeper_process).
- `KRaftKafkaProcess`: Kafka 4.3 (../shared/kafka-4.3), one combined broker and controller
  node (``process.roles=broker,controller``) whose storage is formatted at its first start
  (``kafka-storage.sh format --standalone``), with its controller listener on a second free
  loopback port.

Files under the work directory: ``server.properties`` (written at each start), ``logs/``
(Kafka's ``log.dirs``; in KRaft mode the metadata log too), ``app-logs/`` (Kafka's own log
files, LOG_DIR) and ``broker.out`` (its console: stdout and stderr). The heap is 512 MB
(KAFKA_HEAP_OPTS; Kafka's default is 1 GB), enough for tests on a small shared machine.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from compat_tests.broker_process import REPO_ROOT, BrokerProcess, BrokerStartError, free_port
from kbroker.client import KafkaClient
from wire.errors import KafkaError

KAFKA_HOME = REPO_ROOT.parent / "shared" / "kafka-3.9"
KAFKA_START = KAFKA_HOME / "bin" / "kafka-server-start.sh"
KAFKA43_HOME = REPO_ROOT.parent / "shared" / "kafka-4.3"
KAFKA43_BIN = KAFKA43_HOME / "bin"
KAFKA_HEAP_OPTS = "-Xmx512m"
# Kafka's offsets.topic.num.partitions default.
OFFSETS_TOPIC_PARTITIONS = 50

# What a single broker needs (Kafka's defaults ask for 3 replicas of its internal topics);
# everything else keeps Kafka's defaults, as kbroker's compat run keeps kbroker's.
SINGLE_BROKER = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
# Kafka 4.3's share coordinator keeps its state in an internal topic of 3 replicas by default.
SINGLE_KRAFT_NODE = {
    **SINGLE_BROKER,
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


def kafka_available() -> bool:
    return KAFKA_START.is_file()


def kafka43_available() -> bool:
    return (KAFKA43_BIN / "kafka-server-start.sh").is_file()


def java_string_hash(text: str) -> int:
    """Java's String.hashCode of an ASCII string, as a signed 32-bit int."""
    h = 0
    for char in text:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def probe_groups(partitions: int = OFFSETS_TOPIC_PARTITIONS) -> list[str]:
    """One group id per partition of __consumer_offsets: the group whose offsets live in
    partition p is the p-th (Kafka places a group by the absolute value of its id's Java
    hash code, modulo the partition count)."""
    groups: dict[int, str] = {}
    n = 0
    while len(groups) < partitions:
        name = f"compat-probe-{n}"
        groups.setdefault(abs(java_string_hash(name)) % partitions, name)
        n += 1
    return [groups[p] for p in range(partitions)]


def random_cluster_id() -> str:
    """A cluster id as `kafka-storage.sh random-uuid` prints it: a random UUID in unpadded
    URL-safe base64, never starting with '-' (Kafka's Uuid.randomUuid avoids those, which
    command lines would take for options)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class ApacheKafkaProcess(BrokerProcess):
    """What both Kafka brokers share: a properties file, Kafka's launcher and environment,
    and readiness once the broker lists itself in Metadata."""

    @property
    def stderr_path(self) -> Path:
        # Kafka logs to its console's stdout: one file holds both streams.
        return self.stdout_path

    @property
    def config_path(self) -> Path:
        return self.work_dir / "server.properties"

    def settings(self) -> dict[str, str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return {
            **super().environment(),
            "KAFKA_HEAP_OPTS": KAFKA_HEAP_OPTS,
            "LOG_DIR": str(self.work_dir / "app-logs"),
        }

    def prepare(self) -> None:
        """Anything to do after the properties file is written and before the broker runs."""

    def start(self, timeout: float = 90.0) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        settings = {**self.settings(), **self.overrides}
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        started = time.monotonic()
        self.prepare()
        super().start(timeout - (time.monotonic() - started))
        # Kafka answers ApiVersions before it has the cluster's metadata; until then
        # Metadata lists no broker.
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


class KafkaProcess(ApacheKafkaProcess):
    """One Apache Kafka 3.9 broker on a loopback port, registered in `zookeeper_connect`."""

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

    def command(self) -> list[str]:
        return [str(KAFKA_START), str(self.config_path)]

    def settings(self) -> dict[str, str]:
        listener = f"PLAINTEXT://{self.host}:{self.port}"
        return {
            "broker.id": "0",
            **SINGLE_BROKER,
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.log_dir),
            "zookeeper.connect": self.zookeeper_connect,
        }


class KRaftKafkaProcess(ApacheKafkaProcess):
    """One Apache Kafka 4.3 node, broker and controller in one process, on loopback ports."""

    NODE_ID = 1

    def __init__(
        self,
        work_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(work_dir, host=host, port=port, overrides=overrides)
        self.controller_port = free_port(host)

    def command(self) -> list[str]:
        return [str(KAFKA43_BIN / "kafka-server-start.sh"), str(self.config_path)]

    def settings(self) -> dict[str, str]:
        controller = f"{self.host}:{self.controller_port}"
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.NODE_ID),
            "controller.quorum.bootstrap.servers": controller,
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            **SINGLE_KRAFT_NODE,
        }

    def start(self, timeout: float = 90.0) -> None:
        started = time.monotonic()
        super().start(timeout)
        asyncio.run(self._wait_group_coordinator(timeout - (time.monotonic() - started)))

    async def _wait_group_coordinator(self, timeout: float) -> None:
        """Wait until every partition of __consumer_offsets has its group coordinator
        loaded (creating the topic on a fresh node), as kbroker has at start-up.

        Kafka 4.x answers FindCoordinator as soon as a partition of __consumer_offsets has a
        leader, but its coordinator runtime loads the partition afterwards and answers
        NOT_COORDINATOR meanwhile; librdkafka's synchronous commit and committed() give that
        error back instead of retrying. Kafka's own integration tests create the offsets
        topic before they start, too.
        """
        try:
            async with KafkaClient([(self.host, self.port)], timeout=max(timeout, 1.0)) as client:
                for group in probe_groups():
                    await client.committed(group)
        except (OSError, TimeoutError, ConnectionError, KafkaError) as exc:
            self.kill()
            raise BrokerStartError(
                f"Kafka's group coordinator never became ready: {exc}\n{self.stderr_tail()}"
            ) from exc

    def prepare(self) -> None:
        """Format the storage once (``meta.properties`` marks a formatted directory)."""
        if (self.log_dir / "meta.properties").exists():
            return
        result = subprocess.run(
            [
                str(KAFKA43_BIN / "kafka-storage.sh"),
                "format",
                "--cluster-id",
                random_cluster_id(),
                "--config",
                str(self.config_path),
                "--standalone",
            ],
            env={**self.environment(), "KAFKA_HEAP_OPTS": "-Xmx128m"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise BrokerStartError(
                f"kafka-storage.sh format failed ({result.returncode})\n"
                f"{result.stdout}{result.stderr}"
            )
