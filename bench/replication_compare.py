"""Replication, kbroker beside Apache Kafka 4.3, three brokers each (issue 30 item 4).

kbroker: tests/cluster/local_cluster.py (three brokers, Debian's ZooKeeper). Kafka 4.3: three
KRaft nodes, node 1 broker and controller in one process, nodes 2 and 3 brokers only, the
benchmark heap of one node each (512 MB). Both get the same replica settings (the local
cluster's: replica.lag.time.max.ms 2000, replica.fetch.wait.max.ms 200,
replica.fetch.backoff.ms 200).

Per run, on a new topic of `--partitions` partitions, replication factor 3,
min.insync.replicas 2:
- produce: `--records` records of `--size` bytes with acks=all and idempotence
  (replicated.produce, confluent-kafka), msgs/s and MB/s from the first send to the last
  delivery;
- catch-up: broker 3 is stopped (SIGTERM: a controlled shutdown), `--behind` records are
  produced while it is down, then it is started again; the seconds until it answers
  (start), and from then until it is back in the ISR of every partition of the topic
  (caught up), polled in Metadata every 0.1 s.

Clusters alternate run by run (the order flips each repeat); medians of `--repeat` runs, the
load average (1 min) beside each.

    .venv/bin/python bench/replication_compare.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "cluster"))
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import replicated  # noqa: E402
from local_cluster import FAST_FAILOVER, LocalCluster  # noqa: E402

from compat_tests.broker_process import BrokerProcess, BrokerStartError, free_port  # noqa: E402
from compat_tests.kafka_process import (  # noqa: E402
    KAFKA43_BIN,
    ApacheKafkaProcess,
    kafka43_available,
    random_cluster_id,
)

REPLICA_SETTINGS = {
    key: FAST_FAILOVER[key]
    for key in ("replica.lag.time.max.ms", "replica.fetch.wait.max.ms", "replica.fetch.backoff.ms")
}
RESTARTED = 3
POLL_SECONDS = 0.1


class KRaftNode(ApacheKafkaProcess):
    """One node of a Kafka 4.3 KRaft cluster whose one controller is node 1."""

    def __init__(self, work_dir: Path, node_id: int, controller_port: int, cluster_id: str) -> None:
        super().__init__(work_dir)
        self.node_id = node_id
        self.controller_port = controller_port
        self.cluster_id = cluster_id

    def command(self) -> list[str]:
        return [str(KAFKA43_BIN / "kafka-server-start.sh"), str(self.config_path)]

    def settings(self) -> dict[str, str]:
        controller = f"{self.host}:{self.controller_port}"
        plaintext = f"PLAINTEXT://{self.host}:{self.port}"
        combined = self.node_id == 1
        return {
            "process.roles": "broker,controller" if combined else "broker",
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": controller,
            "listeners": f"{plaintext},CONTROLLER://{controller}" if combined else plaintext,
            "advertised.listeners": plaintext,
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "auto.leader.rebalance.enable": "false",
            **REPLICA_SETTINGS,
        }

    def prepare(self) -> None:
        if (self.log_dir / "meta.properties").exists():
            return
        command = [
            str(KAFKA43_BIN / "kafka-storage.sh"),
            "format",
            "--cluster-id",
            self.cluster_id,
            "--config",
            str(self.config_path),
        ]
        if self.node_id == 1:
            command.append("--standalone")
        done = subprocess.run(
            command,
            env={**self.environment(), "KAFKA_HEAP_OPTS": "-Xmx128m"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise BrokerStartError(f"format failed: {done.stdout}{done.stderr}")


@dataclass
class Cluster:
    name: str
    brokers: dict[int, BrokerProcess]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for i, b in self.brokers.items() if i != RESTARTED)


@contextmanager
def kbroker_cluster() -> Iterator[Cluster]:
    work = Path(tempfile.mkdtemp(prefix="replication-kbroker-"))
    cluster = LocalCluster(work, 3)
    try:
        cluster.start()
        yield Cluster("kbroker", cluster.brokers)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


@contextmanager
def kafka43_cluster() -> Iterator[Cluster]:
    if not kafka43_available():
        raise SystemExit("Kafka 4.3 needs java and ../shared/kafka-4.3")
    work = Path(tempfile.mkdtemp(prefix="replication-kafka43-"))
    controller_port = free_port()
    cluster_id = random_cluster_id()
    nodes = {i: KRaftNode(work / f"node-{i}", i, controller_port, cluster_id) for i in (1, 2, 3)}
    try:
        for node in nodes.values():
            node.start(timeout=240)
        yield Cluster("kafka43", dict(nodes))
    finally:
        for node in nodes.values():
            node.stop(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


CLUSTERS = {"kbroker": kbroker_cluster, "kafka43": kafka43_cluster}


def wait_in_sync(bootstrap: str, topic: str, broker_id: int, timeout: float) -> float:
    """Seconds until `broker_id` is in the ISR of every partition of `topic`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.monotonic()
    while True:
        meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if meta is not None and meta.partitions:
            if all(broker_id in p.isrs for p in meta.partitions.values()):
                return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"broker {broker_id} not back in the ISR of {topic} in {timeout} s")
        time.sleep(POLL_SECONDS)


def one_run(name: str, args: argparse.Namespace) -> dict[str, Any]:
    with CLUSTERS[name]() as cluster:
        bootstrap = cluster.bootstrap
        topic = f"replication-{uuid.uuid4().hex[:8]}"
        replicated.create_topic(bootstrap, topic, args.partitions, 3)
        wait_in_sync(bootstrap, topic, RESTARTED, 120)
        seconds = replicated.produce(bootstrap, topic, args.records, args.size, "all", True)
        wait_in_sync(bootstrap, topic, RESTARTED, 120)
        follower = cluster.brokers[RESTARTED]
        follower.stop(timeout=60)
        replicated.produce(bootstrap, topic, args.behind, args.size, "all", True)
        restarted = time.monotonic()
        follower.start(timeout=240)
        start_seconds = time.monotonic() - restarted
        caught_up = wait_in_sync(bootstrap, topic, RESTARTED, 300)
        row = {
            "cluster": name,
            "msgs_per_s": args.records / seconds,
            "mb_per_s": args.records * args.size / seconds / 1e6,
            "start_s": start_seconds,
            "catch_up_s": caught_up,
            "load": os.getloadavg()[0],
        }
        print(json.dumps(row), flush=True)
        return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", default="kbroker,kafka43")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--behind", type=int, default=100_000, help="records produced while down")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    names = args.clusters.split(",")
    runs = []
    for repeat in range(args.repeat):
        for name in names if repeat % 2 == 0 else names[::-1]:
            runs.append(one_run(name, args))
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args), "runs": runs}, indent=1, default=str))
    print(
        f"RF 3, acks=all, min.insync.replicas 2, {args.partitions} partitions, {args.size} B; "
        f"catch-up after {args.behind:,} records; medians of {args.repeat} alternating runs"
    )
    print(
        "| cluster | produce msgs/s | MB/s | restart to answering s | then back in ISR s | load |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name in names:
        mine = [r for r in runs if r["cluster"] == name]
        med = {k: statistics.median(r[k] for r in mine) for k in mine[0] if k != "cluster"}
        each = ", ".join(f"{r['msgs_per_s']:,.0f}" for r in mine)
        loads = [r["load"] for r in mine]
        print(
            f"| {name} | {med['msgs_per_s']:,.0f} ({each}) | {med['mb_per_s']:.1f} | "
            f"{med['start_s']:.1f} | {med['catch_up_s']:.1f} | "
            f"{min(loads):.1f}-{max(loads):.1f} |"
        )


if __name__ == "__main__":
    main()
