"""Apache Kafka 4.3 (../shared/kafka-4.3) as one KRaft node (broker and controller in one
process) on free loopback ports, formatted in its work directory, for the console's tests.
Its README says how: a properties file, ``kafka-storage.sh format --standalone``, then
``kafka-server-start.sh``."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

from compat_tests.broker_process import REPO_ROOT, BrokerProcess, free_port

KAFKA43_HOME = REPO_ROOT.parent / "shared" / "kafka-4.3"
KAFKA43_BIN = KAFKA43_HOME / "bin"
HEAP = "-Xmx512m"


def kafka43_available() -> bool:
    return (KAFKA43_BIN / "kafka-server-start.sh").is_file()


class Kafka43Process(BrokerProcess):
    def __init__(self, work_dir: Path) -> None:
        super().__init__(work_dir)
        self.controller_port = free_port()

    @property
    def stderr_path(self) -> Path:
        return self.stdout_path

    @property
    def config_path(self) -> Path:
        return self.work_dir / "server.properties"

    def command(self) -> list[str]:
        return [str(KAFKA43_BIN / "kafka-server-start.sh"), str(self.config_path)]

    def environment(self) -> dict[str, str]:
        return {
            **super().environment(),
            "KAFKA_HEAP_OPTS": HEAP,
            "LOG_DIR": str(self.work_dir / "app-logs"),
        }

    def start(self, timeout: float = 120.0) -> None:
        controller = f"{self.host}:{self.controller_port}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": controller,
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        }
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        if not (self.log_dir / "meta.properties").exists():
            subprocess.run(
                [
                    str(KAFKA43_BIN / "kafka-storage.sh"), "format", "--standalone",
                    "--cluster-id", str(uuid.uuid4().hex[:22]), "--config", str(self.config_path),
                ],
                env={**self.environment(), "KAFKA_HEAP_OPTS": "-Xmx128m"},
                check=True,
                capture_output=True,
                timeout=120,
            )  # fmt: skip
        super().start(timeout)
