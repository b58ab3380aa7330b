"""Mirror topics between real clusters under faults (issue 27, Show items 1 and 2), run by hand:

    PYTHONPATH=$PWD python tests/cluster/mirror_clusters_scenario.py [--dir DIR] [--rate 300]

Not part of `make test` (about eight processes; needs root for the link cut). Starts cluster A
(ZooKeeper and three kbrokers), cluster B (its own ZooKeeper and three kbrokers) and Apache
Kafka 4.3 (one KRaft node); mirrors a two-partition topic of Kafka 4.3 and one of A (RF 3 on
A) onto B (RF 3), while each source takes a steady idempotent producer (``p-<n>``, record n to
partition n % 2) and a transactional producer (ten records per transaction, every third one
aborted). During the copy: A's leader of the source partition is killed -9 and restarted, B's
leader of the mirror partition is killed -9 and restarted, and the A->B link is cut for
``--cut`` seconds. Then it checks that each mirror's batches equal its source's byte for byte,
that read_committed and read_uncommitted reads of mirror and source agree offset by offset, that
every acknowledged ``p-`` record is there once and in order, every committed transaction's
records are there once and no aborted one is visible to read_committed. Prints the lag over
time (records, and ms as the age of the oldest source record the mirror lacks, at the sampling
interval's resolution) and the catch-up time after each fault, and a JSON verdict; exits 1 when
a check fails.

The link cut on loopback: B's brokers run inside a cgroup v2 of their own, and an iptables
rule drops every packet their sockets send to A's ports (``-m cgroup --path``). Requests and
TCP acknowledgements from B to A vanish, nothing is refused or reset: a black hole of the link
alone, while producers, B's own replication and the sampler keep reaching both clusters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
for entry in (str(REPO_ROOT), str(HERE)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from helpers import full_isr, partition_view, wait_for  # noqa: E402
from local_cluster import LocalCluster  # noqa: E402

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from compat_tests.kafka_process import KRaftKafkaProcess  # noqa: E402
from kbroker.client import LATEST, KafkaClient  # noqa: E402
from tests.integration.mirror_support import (  # noqa: E402
    addresses,
    assert_identical,
    create_topic,
    mirrors,
    wait_caught_up,
)

PARTITIONS = 2
SAMPLE_SECONDS = 0.5
STEADY_SECONDS = 10.0
CGROUP = Path(f"/sys/fs/cgroup/unified/kbroker-mirror-link-{os.getpid()}")


class LinkSideBroker(BrokerProcess):
    """A broker of cluster B: it enters CGROUP before it runs, so its sockets belong there."""

    def command(self) -> list[str]:
        procs = str(CGROUP / "cgroup.procs")
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *super().command()]


def link_rule(a_ports: list[int]) -> list[str]:
    ports = ",".join(str(p) for p in a_ports)
    return [
        *("OUTPUT", "-p", "tcp", "-m", "multiport", "--dports", ports),
        *("-m", "cgroup", "--path", f"/{CGROUP.name}", "-j", "DROP"),
    ]


def end_offsets(bootstrap: str, topic: str) -> list[int] | None:
    async def ask() -> list[int]:
        async with KafkaClient(addresses(bootstrap), timeout=3) as client:
            found = await client.list_offsets([(topic, p) for p in range(PARTITIONS)], LATEST)
            return [found[(topic, p)] for p in range(PARTITIONS)]

    try:
        return asyncio.run(asyncio.wait_for(ask(), 5))
    except Exception:  # noqa: BLE001 - a sample missed during a fault is simply skipped
        return None


@dataclass
class Workload:
    """A steady idempotent producer and a transactional producer on one source topic."""

    bootstrap: str
    topic: str
    rate: int
    stop: threading.Event = field(default_factory=threading.Event)
    sent: int = 0
    acked: dict[int, list[int]] = field(default_factory=lambda: {p: [] for p in range(PARTITIONS)})
    committed: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    uncertain: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for target in (self._plain, self._transactions):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self.threads.append(thread)

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(180)
            if thread.is_alive():
                self.errors.append("a producer thread did not finish")

    def _delivered(self, error: KafkaError | None, message: object) -> None:
        if error is not None:
            self.errors.append(str(error))
            return
        value = message.value()  # type: ignore[attr-defined]
        self.acked[message.partition()].append(int(value[2:]))  # type: ignore[attr-defined]

    def _plain(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        started = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            for n in range(self.sent, due):
                producer.produce(
                    self.topic, b"p-%d" % n, partition=n % PARTITIONS, on_delivery=self._delivered
                )
            self.sent = max(self.sent, due)
            producer.poll(0)
            time.sleep(0.01)
        if producer.flush(150) != 0:
            self.errors.append("plain producer: records still undelivered")

    def _transactions(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": f"show-{self.topic}",
                "linger.ms": 5,
            }
        )
        producer.init_transactions(90)
        k = 0
        while not self.stop.is_set():
            commit = k % 3 != 1
            values = [f"t-{k}-{i}" for i in range(10)]
            try:
                producer.begin_transaction()
                for i, value in enumerate(values):
                    producer.produce(self.topic, value.encode(), partition=i % PARTITIONS)
                producer.flush(60)
                if commit:
                    producer.commit_transaction(60)
                    self.committed += values
                else:
                    producer.abort_transaction(60)
                    self.aborted += values
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal():
                    self.errors.append(f"transactional producer fatal: {error}")
                    return
                # Abortable or retriable (a leader killed under it): its outcome is whatever
                # the abort leaves, and if the abort fails too the outcome is unknown.
                try:
                    producer.abort_transaction(60)
                    self.aborted += values
                except KafkaException:
                    self.uncertain += values
            k += 1
            time.sleep(0.2)


@dataclass
class Pair:
    name: str
    source: str
    mirror: str
    topic: str
    # (when the mirror was read, the source's end offsets just after, the mirror's)
    samples: list[tuple[float, list[int], list[int]]] = field(default_factory=list)
    # (when the source was read, its end offsets), whether the mirror answered or not
    timeline: list[tuple[float, list[int]]] = field(default_factory=list)


def sample(pairs: list[Pair], started: float, stop: threading.Event) -> None:
    while not stop.is_set():
        for pair in pairs:
            # The mirror first: the source only grows, so the lag is never under-counted.
            mirror_at = time.monotonic() - started
            mirror = end_offsets(pair.mirror, pair.topic)
            source_at = time.monotonic() - started
            source = end_offsets(pair.source, pair.topic)
            if source is not None:
                pair.timeline.append((source_at, source))
            if source is not None and mirror is not None:
                pair.samples.append((mirror_at, source, mirror))
        stop.wait(SAMPLE_SECONDS)


def lag_ms(pair: Pair, index: int) -> int:
    """The age of the oldest source record the mirror lacks at a sample (0 when it lacks
    none): when the source's end offset passed it, interpolated linearly between the two
    source reads around that moment, as the producers write at a steady rate."""
    t, _, mirror = pair.samples[index]
    oldest = t
    for p in range(PARTITIONS):
        missing = mirror[p]
        previous: tuple[float, int] | None = None
        for at, source in pair.timeline:
            if source[p] > missing:
                if previous is None or source[p] == previous[1]:
                    oldest = min(oldest, at)
                else:
                    share = (missing + 1 - previous[1]) / (source[p] - previous[1])
                    oldest = min(oldest, previous[0] + share * (at - previous[0]))
                break
            previous = (at, source[p])
    return round((t - oldest) * 1000)


def catch_up(pair: Pair, since: float) -> float | None:
    """Seconds from ``since`` until the mirror holds what the source held then (the first
    sample at or after it)."""
    after = [s for s in pair.samples if s[0] >= since]
    if not after:
        return None
    target = after[0][1]
    for t, _, mirror in after:
        if all(mirror[p] >= target[p] for p in range(PARTITIONS)):
            return round(t - since, 2)
    return None


@dataclass
class Fault:
    name: str
    start: float
    end: float = 0.0

    def figures(self, pair: Pair) -> dict[str, object]:
        during = [sum(s) - sum(m) for t, s, m in pair.samples if self.start <= t <= self.end]
        return {
            "start": round(self.start, 2),
            "end": round(self.end, 2),
            "catch_up_from_start_s": catch_up(pair, self.start),
            "catch_up_from_end_s": catch_up(pair, self.end),
            "max_lag_records_during": max(during, default=None),
            "samples_during": len(during),
        }


def read_partitions(bootstrap: str, topic: str, isolation: str) -> dict[int, list[tuple[int, str]]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"show-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    found: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
    done: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while len(done) < PARTITIONS:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} at {bootstrap}: end of {done} only")
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition())
                    continue
                raise KafkaException(message.error())
            found[message.partition()].append((message.offset(), message.value().decode()))
    finally:
        consumer.close()
    return found


def check(pair: Pair, workload: Workload) -> dict[str, object]:
    verdict: dict[str, object] = {"pair": pair.name, "producer_errors": workload.errors[:5]}
    try:
        assert_identical(pair.source, pair.mirror, pair.topic, PARTITIONS)
        verdict["batches_byte_for_byte"] = True
    except AssertionError as exc:
        verdict["batches_byte_for_byte"] = f"NO: {exc}"
    reads = {
        (side, isolation): read_partitions(bootstrap, pair.topic, isolation)
        for side, bootstrap in (("source", pair.source), ("mirror", pair.mirror))
        for isolation in ("read_committed", "read_uncommitted")
    }
    for isolation in ("read_committed", "read_uncommitted"):
        verdict[f"{isolation}_same_offsets_and_values"] = (
            reads[("source", isolation)] == reads[("mirror", isolation)]
        )
    committed_view = reads[("mirror", "read_committed")]
    plain = {
        p: [int(v[2:]) for _, v in records if v.startswith("p-")]
        for p, records in committed_view.items()
    }
    verdict["plain_sent"] = workload.sent
    verdict["plain_exact_in_order"] = all(
        plain[p] == list(range(p, workload.sent, PARTITIONS)) == workload.acked[p]
        for p in range(PARTITIONS)
    )
    visible = [v for p in committed_view for _, v in committed_view[p] if v.startswith("t-")]
    verdict["transactions"] = {
        "committed_records": len(workload.committed),
        "aborted_records": len(workload.aborted),
        "unknown_outcome_records": len(workload.uncertain),
    }
    possible = set(workload.committed + workload.uncertain)
    verdict["committed_each_once"] = len(visible) == len(set(visible)) and (
        set(workload.committed) <= set(visible) <= possible
    )
    verdict["aborted_hidden_by_read_committed"] = not set(visible) & set(workload.aborted)
    uncommitted = reads[("mirror", "read_uncommitted")]
    verdict["aborted_present_in_read_uncommitted"] = set(workload.aborted) <= {
        v for p in uncommitted for _, v in uncommitted[p]
    }
    return verdict


def passed(verdict: dict[str, object]) -> bool:
    keys = [k for k, v in verdict.items() if isinstance(v, bool) or k == "batches_byte_for_byte"]
    return all(verdict[k] is True for k in keys) and not verdict["producer_errors"]


def kill_and_restart(cluster: LocalCluster, topic: str, note: Callable[[str], None]) -> float:
    """Kills -9 the leader of the topic's partition 0 and restarts it; returns when it was
    killed (time.monotonic)."""
    view = partition_view(cluster, topic)
    assert view is not None
    victim = cluster.brokers[view.leader]
    killed_at = time.monotonic()
    victim.kill()
    note(f"killed -9 broker {view.leader}, leader of {topic}-0")
    wait_for(
        lambda: (v := partition_view(cluster, topic)) and v.leader not in (-1, view.leader),
        90,
        f"a new leader of {topic}-0",
    )
    note(f"new leader of {topic}-0 elected")
    victim.start(timeout=90)
    note(f"broker {view.leader} restarted")
    return killed_at


def run(args: argparse.Namespace, work: Path) -> int:
    CGROUP.mkdir()
    kafka = KRaftKafkaProcess(work / "kafka43")
    cluster_a = LocalCluster(work / "cluster-a")
    cluster_b = LocalCluster(work / "cluster-b", broker_type=LinkSideBroker)
    a_ports = [b.port for b in cluster_a.brokers.values()]
    rule_on = False
    workloads: list[Workload] = []
    stop_sampling = threading.Event()
    started = time.monotonic()
    load_at_start = os.getloadavg()
    events: list[dict[str, object]] = []

    def note(what: str) -> None:
        event = {"t": round(time.monotonic() - started, 2), "event": what}
        events.append(event)
        print(json.dumps(event), flush=True)

    try:
        kafka.start()
        cluster_a.start()
        cluster_b.start()
        note("Kafka 4.3 and clusters A and B up")
        pairs = [
            Pair("kafka43->B", kafka.bootstrap, cluster_b.bootstrap, "orders-k43"),
            Pair("A->B", cluster_a.bootstrap, cluster_b.bootstrap, "orders-a"),
        ]
        create_topic(kafka.bootstrap, "orders-k43", PARTITIONS)
        create_topic(cluster_a.bootstrap, "orders-a", PARTITIONS, replicas=3)
        wait_for(lambda: full_isr(cluster_a, "orders-a"), 90, "orders-a fully replicated")
        for pair, link in zip(pairs, ("from-kafka43", "from-a"), strict=True):
            created = mirrors(
                *("create", "--bootstrap-server", pair.mirror, "--source-bootstrap", pair.source),
                *("--topic", pair.topic, "--link", link, "--replication-factor", "3"),
            )
            if created.returncode != 0:
                raise RuntimeError(created.stderr)
        note("mirrors created")
        workloads = [Workload(pair.source, pair.topic, args.rate) for pair in pairs]
        for workload in workloads:
            workload.start()
        threading.Thread(target=sample, args=(pairs, started, stop_sampling), daemon=True).start()
        faults: list[Fault] = []
        for name, cluster in (("A source leader", cluster_a), ("B mirror leader", cluster_b)):
            time.sleep(STEADY_SECONDS)
            killed_at = kill_and_restart(cluster, "orders-a", note)
            faults.append(Fault(f"{name} kill -9", killed_at - started, time.monotonic() - started))
        time.sleep(STEADY_SECONDS)
        cut = Fault("A->B link cut", time.monotonic() - started)
        subprocess.run(["iptables", "-A", *link_rule(a_ports)], check=True, timeout=30)
        rule_on = True
        note(f"A->B link cut (cgroup black hole) for {args.cut} s")
        time.sleep(args.cut)
        subprocess.run(["iptables", "-D", *link_rule(a_ports)], check=True, timeout=30)
        rule_on = False
        note("A->B link healed")
        cut.end = time.monotonic() - started
        faults.append(cut)
        time.sleep(STEADY_SECONDS)
        for workload in workloads:
            workload.finish()
        note("producers stopped")
        for pair in pairs:
            wait_caught_up(pair.source, pair.mirror, pair.topic, PARTITIONS)
        note("mirrors caught up")
        stop_sampling.set()
        wait_for(lambda: full_isr(cluster_b, "orders-a"), 90, "orders-a's mirror fully in ISR")
        verdicts = [check(pair, workload) for pair, workload in zip(pairs, workloads, strict=True)]
        report = {
            "load_average_at_start_and_end": [load_at_start, os.getloadavg()],
            "events": events,
            "verdicts": verdicts,
            "faults": {},
            "lag": {},
        }
        for pair in pairs:
            report["faults"][pair.name] = {  # type: ignore[index]
                fault.name: fault.figures(pair) for fault in faults
            }
            report["lag"][pair.name] = [  # type: ignore[index]
                {
                    "t": round(t, 1),
                    "records": sum(s) - sum(m),
                    "ms": lag_ms(pair, i),
                }
                for i, (t, s, m) in enumerate(pair.samples)
            ]
        (work / "report.json").write_text(json.dumps(report, indent=1))
        for pair in pairs:
            print(f"lag of {pair.name} (t s: records, ms)")
            rows = report["lag"][pair.name]  # type: ignore[index]
            print("  " + "  ".join(f"{r['t']}:{r['records']},{r['ms']}" for r in rows[::4]))
        summary = {key: report[key] for key in ("load_average_at_start_and_end", "faults")}
        print(json.dumps({**summary, "verdicts": verdicts}, indent=1))
        return 0 if all(passed(v) for v in verdicts) else 1
    finally:
        stop_sampling.set()
        if rule_on:
            subprocess.run(["iptables", "-D", *link_rule(a_ports)], timeout=30)
        for workload in workloads:
            workload.stop.set()
        for cluster in (cluster_b, cluster_a):
            cluster.stop()
        kafka.stop(timeout=60)
        CGROUP.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="keep the clusters' directories here")
    parser.add_argument("--rate", type=int, default=300, help="plain records/s per source")
    parser.add_argument("--cut", type=float, default=30.0, help="seconds the link is cut")
    args = parser.parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        sys.exit(run(args, args.dir))
    with tempfile.TemporaryDirectory(prefix="mirror-clusters-") as work:
        sys.exit(run(args, Path(work)))


if __name__ == "__main__":
    main()
