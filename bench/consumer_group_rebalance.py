"""How long a group of 50 consumers on 1,000 partitions takes to settle after one member joins
and after one leaves: classic eager (range), classic cooperative-sticky and the consumer
protocol (KIP-848), on kbroker and on Apache Kafka 4.3 in one run; and how many records per
second the group consumes during each rebalance.

The members are confluent-kafka consumers, a thread each, in a few spawned processes (50 on a
2-core machine). Each reports every change of its assignment (from its assign, revoke and lost
callbacks, with the system-wide monotonic clock) and, every 0.25 s, the records its process
consumed. A producer process writes ``--rate`` records per second, round robin over the
partitions, throughout, so the group has work whenever it owns partitions.

*Settled* is the first moment, after the event, when the expected number of members (51
after the join, 50 after the leave) hold the partitions between them exactly once and evenly
(each one ``partitions // members`` or one more: every assignor here balances a single topic),
which for these assignors is the final assignment. The join's clock starts when the 51st member
subscribes, the leave's when that member starts to close (it leaves the group as it closes).
*During* is the records consumed from the event until settled, per second; *before* the same
over the ``--steady`` seconds before the event: the producer's rate when the group keeps up.

    .venv/bin/python bench/consumer_group_rebalance.py [--brokers kbroker,kafka43]
        [--protocols eager,cooperative,consumer] [--members 50] [--partitions 1000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.synchronize
import queue
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import throughput
from brokers import KAFKA_BENCH_HEAP, BrokerUnderTest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.kafka_process import KRaftKafkaProcess, kafka43_available
from compat_tests.zookeeper_process import java_available

RESULTS = Path(__file__).resolve().parent / "results"
TOPIC = "rebalance-bench"
REPORT_INTERVAL = 0.25
# Consecutive records the producer writes to one partition: batches of several records, as
# producers send them, rather than one record per partition and request.
PRODUCE_RUN = 20

# The group settings of each protocol, as a client selects them.
PROTOCOLS: dict[str, dict[str, str]] = {
    "eager": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
    "cooperative": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "cooperative-sticky",
    },
    "consumer": {"group.protocol": "consumer"},
}

# Messages from the member processes: (kind, member or process, monotonic time, payload).
Report = tuple[str, int, float, Any]


class BenchKafka43Process(KRaftKafkaProcess):
    """Apache Kafka 4.3 (KRaft, one node) with the benchmarks' heap."""

    def environment(self) -> dict[str, str]:
        return {**super().environment(), "KAFKA_HEAP_OPTS": KAFKA_BENCH_HEAP}


@contextmanager
def start_kbroker(overrides: dict[str, str]) -> Iterator[BrokerUnderTest]:
    with throughput.own_broker(**overrides) as broker:
        yield BrokerUnderTest("kbroker", broker.bootstrap, broker)


@contextmanager
def start_kafka43(overrides: dict[str, str]) -> Iterator[BrokerUnderTest]:
    if not (java_available() and kafka43_available()):
        raise SystemExit("Kafka 4.3 needs java and ../shared/kafka-4.3")
    work = Path(tempfile.mkdtemp(prefix="kafka43-bench-"))
    kafka = BenchKafka43Process(work, overrides=overrides)
    try:
        kafka.start(timeout=120)
        yield BrokerUnderTest("kafka43", kafka.bootstrap, kafka)
    finally:
        kafka.stop(throughput.STOP_TIMEOUT)
        shutil.rmtree(work, ignore_errors=True)


STARTERS: dict[str, Callable[[dict[str, str]], AbstractContextManager[BrokerUnderTest]]] = {
    "kbroker": start_kbroker,
    "kafka43": start_kafka43,
}


# --- the member processes -------------------------------------------------------------------


def run_members(
    bootstrap: str,
    group: str,
    protocol: str,
    settings: dict[str, str],
    members: list[int],
    reports: multiprocessing.Queue[Report],
    stop: multiprocessing.synchronize.Event,
) -> None:
    """One process: a consumer thread per member (``settings`` added to its configuration);
    assignment changes and consumed counts go to ``reports``. A set ``stop`` closes every
    consumer (each leaves the group)."""
    consumed = [0]
    lock = threading.Lock()

    def member(index: int) -> None:
        held: set[int] = set()
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": f"member-{index}",
                "auto.offset.reset": "latest",
                "queued.min.messages": 2000,
                **PROTOCOLS[protocol],
                **settings,
            }
        )

        def changed(partitions: list[Any], added: bool) -> None:
            for tp in partitions:
                (held.add if added else held.discard)(tp.partition)
            reports.put(("assignment", index, time.monotonic(), sorted(held)))

        consumer.subscribe(
            [TOPIC],
            on_assign=lambda _, tps: changed(tps, True),
            on_revoke=lambda _, tps: changed(tps, False),
            on_lost=lambda _, tps: changed(tps, False),
        )
        reports.put(("subscribed", index, time.monotonic(), None))
        while not stop.is_set():
            records = consumer.consume(500, 0.1)
            with lock:
                consumed[0] += len(records)
        reports.put(("closing", index, time.monotonic(), None))
        consumer.close()
        reports.put(("closed", index, time.monotonic(), sorted(held)))

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in members]
    for thread in threads:
        thread.start()
    while not stop.wait(REPORT_INTERVAL):
        with lock:
            count, consumed[0] = consumed[0], 0
        reports.put(("consumed", members[0], time.monotonic(), count))
    for thread in threads:
        thread.join(60)


def run_producer(
    bootstrap: str,
    partitions: int,
    rate: int,
    reports: multiprocessing.Queue[Report],
    stop: multiprocessing.synchronize.Event,
) -> None:
    """``rate`` 100-byte records per second, PRODUCE_RUN records to a partition and then on
    to the next; the records acknowledged go to ``reports`` every 0.25 s."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, "acks": "1"})
    value = b"x" * 100
    acked = [0]

    def delivered(err: object, _msg: object) -> None:
        if err is None:
            acked[0] += 1

    started = last_report = time.monotonic()
    sent = 0
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            partition = (sent // PRODUCE_RUN) % partitions
            try:
                producer.produce(TOPIC, value, partition=partition, on_delivery=delivered)
            except BufferError:
                break
            sent += 1
        producer.poll(0.01)
        if time.monotonic() - last_report >= REPORT_INTERVAL:
            last_report = time.monotonic()
            reports.put(("produced", -1, last_report, acked[0]))
            acked[0] = 0
    producer.flush(30)


# --- the measurement ------------------------------------------------------------------------


@dataclass
class Outcome:
    broker: str
    protocol: str
    event: str
    # From the event to the first assignment change of another member, and to settled.
    first_change_s: float | None
    settle_s: float | None
    during_rps: float | None
    before_rps: float
    produced_rps: float
    # The broker's CPU seconds per second (all cores) from the event until settled.
    broker_cpu: float | None
    # Assignment changes reported between the event and settling (all members).
    changes: int


class Group:
    """The parent's view of the group, from the members' reports."""

    def __init__(self, reports: multiprocessing.Queue[Report], partitions: int) -> None:
        self._reports = reports
        self.partitions = partitions
        self.held: dict[int, frozenset[int]] = {}
        self.consumed: list[tuple[float, int]] = []
        self.produced: list[tuple[float, int]] = []
        # (time, member) of each assignment change
        self.change_times: list[tuple[float, int]] = []
        self.marks: dict[tuple[str, int], float] = {}
        self.last_change = 0.0
        self.changes = 0

    def drain(self, wait: float) -> None:
        try:
            report = self._reports.get(timeout=wait)
        except queue.Empty:
            return
        while True:
            kind, who, at, payload = report
            if kind == "assignment":
                self.held[who] = frozenset(payload)
                self.last_change = at
                self.change_times.append((at, who))
                self.changes += 1
            elif kind == "closed":
                self.held.pop(who, None)
                self.last_change = at
            elif kind == "consumed":
                self.consumed.append((at, payload))
            elif kind == "produced":
                self.produced.append((at, payload))
            else:
                self.marks[(kind, who)] = at
            try:
                report = self._reports.get_nowait()
            except queue.Empty:
                return

    def run_for(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.drain(0.1)

    def wait_mark(self, kind: str, member: int, timeout: float = 120.0) -> float:
        deadline = time.monotonic() + timeout
        while (kind, member) not in self.marks:
            if time.monotonic() > deadline:
                raise RuntimeError(f"member {member} never reported {kind}")
            self.drain(0.1)
        return self.marks[(kind, member)]

    def state(self) -> str:
        """The members' holdings, for a group that does not settle."""
        owners = [p for p in self.held.values() if p]
        sizes = sorted(len(p) for p in owners)
        union = len(frozenset().union(*owners)) if owners else 0
        return (
            f"{len(owners)} members hold partitions ({sizes}), {sum(sizes)} in all, "
            f"{union} distinct; last change {time.monotonic() - self.last_change:.1f} s ago"
        )

    def balanced(self, members: int) -> bool:
        owners = [p for p in self.held.values() if p]
        if len(owners) != members:
            return False
        low = self.partitions // members
        sizes = [len(p) for p in owners]
        return (
            sum(sizes) == self.partitions
            and len(frozenset().union(*owners)) == self.partitions
            and min(sizes) >= low
            and max(sizes) <= low + 1
        )

    def wait_settled(self, members: int, timeout: float) -> float | None:
        """The monotonic time the group settled with ``members`` members, or None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.drain(0.1)
            if self.balanced(members):
                return self.last_change
        return None

    def first_change(self, after: float, member: int) -> float | None:
        """The first change after ``after`` of a member other than ``member``."""
        return min(
            (at for at, who in self.change_times if at > after and who != member), default=None
        )

    @staticmethod
    def rate(counts: list[tuple[float, int]], start: float, end: float) -> float:
        """Records per second between two moments, from 0.25 s reports."""
        total = sum(n for at, n in counts if start < at <= end + REPORT_INTERVAL)
        return total / (end - start + REPORT_INTERVAL)


def create_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)], request_timeout=120)[TOPIC].result(120)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic=TOPIC, timeout=10).topics.get(TOPIC)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return
        time.sleep(0.5)
    raise RuntimeError(f"{TOPIC} has no leaders after 120 s")


def measure(
    broker: BrokerUnderTest,
    protocol: str,
    reports: multiprocessing.Queue[Report],
    args: argparse.Namespace,
) -> list[Outcome]:
    """One group of ``args.members`` members; a member joins, then the same member leaves.
    ``reports`` also carries the producer's counts."""
    context = multiprocessing.get_context("spawn")
    group_id = f"rebalance-{protocol}-{uuid.uuid4().hex[:8]}"
    view = Group(reports, args.partitions)
    settings = client_settings(protocol, args)
    base_stop, joiner_stop = context.Event(), context.Event()
    per_process = -(-args.members // args.processes)
    processes = [
        context.Process(
            target=run_members,
            args=(
                broker.bootstrap,
                group_id,
                protocol,
                settings,
                list(range(start, min(start + per_process, args.members))),
                reports,
                base_stop,
            ),
        )
        for start in range(0, args.members, per_process)
    ]
    joiner = context.Process(
        target=run_members,
        args=(
            broker.bootstrap,
            group_id,
            protocol,
            settings,
            [args.members],
            reports,
            joiner_stop,
        ),
    )
    outcomes: list[Outcome] = []
    try:
        for process in processes:
            process.start()
        if view.wait_settled(args.members, args.timeout) is None:
            raise RuntimeError(
                f"{broker.name} {protocol}: the first {args.members} never settled: {view.state()}"
            )
        view.run_for(args.steady)
        before = Snapshot.take(view, broker)
        joiner.start()
        joined = view.wait_mark("subscribed", args.members)
        settled = view.wait_settled(args.members + 1, args.timeout)
        unsettled(broker, protocol, "join", view, settled)
        outcomes.append(outcome(broker, protocol, "join", view, joined, settled, before, args))

        view.run_for(args.steady)
        before = Snapshot.take(view, broker)
        joiner_stop.set()
        leaving = view.wait_mark("closing", args.members)
        settled = view.wait_settled(args.members, args.timeout)
        unsettled(broker, protocol, "leave", view, settled)
        outcomes.append(outcome(broker, protocol, "leave", view, leaving, settled, before, args))
    finally:
        base_stop.set()
        joiner_stop.set()
        for process in [*processes, joiner]:
            if process.pid is not None:
                process.join(90)
                if process.is_alive():
                    process.kill()
        # What the closing members still reported belongs to this group only.
        view.drain(1.0)
    return outcomes


def unsettled(
    broker: BrokerUnderTest, protocol: str, event: str, view: Group, settled: float | None
) -> None:
    """Say what the members hold when a group did not settle in time."""
    if settled is None:
        print(f"{broker.name:8} {protocol:12} {event:6} not settled: {view.state()}", flush=True)


@dataclass(frozen=True)
class Snapshot:
    """Counters taken just before an event."""

    changes: int
    at: float
    cpu_seconds: float | None

    @classmethod
    def take(cls, view: Group, broker: BrokerUnderTest) -> Snapshot:
        return cls(view.changes, time.monotonic(), broker.cpu_seconds())


def client_settings(protocol: str, args: argparse.Namespace) -> dict[str, str]:
    """With --heartbeat-ms the classic members heartbeat at that interval, as the broker then
    has the consumer protocol's members do."""
    if args.heartbeat_ms is None or PROTOCOLS[protocol]["group.protocol"] != "classic":
        return {}
    return {"heartbeat.interval.ms": str(args.heartbeat_ms)}


def broker_settings(args: argparse.Namespace) -> dict[str, str]:
    if args.heartbeat_ms is None:
        return {}
    interval = str(args.heartbeat_ms)
    return {
        "group.consumer.heartbeat.interval.ms": interval,
        "group.consumer.min.heartbeat.interval.ms": interval,
    }


def outcome(
    broker: BrokerUnderTest,
    protocol: str,
    event: str,
    view: Group,
    started: float,
    settled: float | None,
    before: Snapshot,
    args: argparse.Namespace,
) -> Outcome:
    first = view.first_change(started, args.members)
    cpu_now = broker.cpu_seconds()
    cpu = None
    if cpu_now is not None and before.cpu_seconds is not None:
        cpu = (cpu_now - before.cpu_seconds) / (time.monotonic() - before.at)
    result = Outcome(
        broker=broker.name,
        protocol=protocol,
        event=event,
        first_change_s=None if first is None else first - started,
        settle_s=None if settled is None else max(0.0, settled - started),
        during_rps=None if settled is None else view.rate(view.consumed, started, settled),
        before_rps=view.rate(view.consumed, started - args.steady, started),
        produced_rps=view.rate(view.produced, started - args.steady, started),
        broker_cpu=cpu,
        changes=view.changes - before.changes,
    )
    print(
        f"{broker.name:8} {protocol:12} {event:6} first change {seconds(result.first_change_s)}, "
        f"settled {seconds(result.settle_s)}; records/s {result.during_rps or 0:,.0f} during, "
        f"{result.before_rps:,.0f} before, {result.produced_rps:,.0f} produced; "
        f"{result.changes} assignment changes; broker CPU {percent(result.broker_cpu)}",
        flush=True,
    )
    return result


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| broker | protocol | event | first change (s) | settled (s) | records/s during "
        "| records/s before | produced/s | broker CPU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        during = "-" if o.during_rps is None else f"{o.during_rps:,.0f}"
        lines.append(
            f"| {o.broker} | {o.protocol} | {o.event} | {seconds(o.first_change_s)} "
            f"| {seconds(o.settle_s)} | {during} | {o.before_rps:,.0f} | {o.produced_rps:,.0f} "
            f"| {percent(o.broker_cpu)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="kbroker,kafka43")
    parser.add_argument("--protocols", default="eager,cooperative,consumer")
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=5, help="member processes")
    parser.add_argument("--rate", type=int, default=20_000, help="records/s produced")
    parser.add_argument("--steady", type=float, default=5.0, help="seconds before each event")
    parser.add_argument("--timeout", type=float, default=180.0, help="longest wait to settle")
    parser.add_argument("--repeat", type=int, default=1, help="runs per broker and protocol")
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        help="group.consumer.(min.)heartbeat.interval.ms of the brokers and heartbeat.interval.ms"
        " of the classic members (default: each one's default, 5,000 and 3,000)",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "consumer_group_rebalance.json")
    args = parser.parse_args()
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    unknown = (set(brokers) - set(STARTERS)) | (set(protocols) - set(PROTOCOLS))
    if unknown:
        parser.error(f"unknown: {sorted(unknown)}")

    outcomes: list[Outcome] = []
    context = multiprocessing.get_context("spawn")
    for name in brokers:
        with STARTERS[name](broker_settings(args)) as broker:
            create_topic(broker.bootstrap, args.partitions)
            reports: multiprocessing.Queue[Report] = context.Queue()
            stop = context.Event()
            producer = context.Process(
                target=run_producer,
                args=(broker.bootstrap, args.partitions, args.rate, reports, stop),
            )
            producer.start()
            try:
                for _ in range(args.repeat):
                    for protocol in protocols:
                        try:
                            outcomes.extend(measure(broker, protocol, reports, args))
                        except RuntimeError as exc:
                            # A group that never settles is a finding; the other runs go on.
                            print(f"{name:8} {protocol:12} failed: {exc}", flush=True)
            finally:
                stop.set()
                producer.join(60)
    summary = summarize(outcomes)
    print()
    print(table(summary))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: str(v) for k, v in vars(args).items()}
    runs = [asdict(o) for o in outcomes]
    args.json.write_text(json.dumps({"args": settings, "runs": runs}, indent=2))


def summarize(outcomes: list[Outcome]) -> list[Outcome]:
    """The median of the runs of each broker, protocol and event."""
    keyed: dict[tuple[str, str, str], list[Outcome]] = {}
    for o in outcomes:
        keyed.setdefault((o.broker, o.protocol, o.event), []).append(o)

    def median(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    return [
        Outcome(
            broker=broker,
            protocol=protocol,
            event=event,
            first_change_s=median([o.first_change_s for o in runs]),
            settle_s=median([o.settle_s for o in runs]),
            during_rps=median([o.during_rps for o in runs]),
            before_rps=statistics.median(o.before_rps for o in runs),
            produced_rps=statistics.median(o.produced_rps for o in runs),
            broker_cpu=median([o.broker_cpu for o in runs]),
            changes=int(statistics.median(o.changes for o in runs)),
        )
        for (broker, protocol, event), runs in keyed.items()
    ]


if __name__ == "__main__":
    main()
