"""Records per second acknowledged by Java share consumers (KIP-932), kbroker beside Kafka 4.3.

The brokers (`--brokers`, default kbroker and kafka43) all run for the whole benchmark. For
each partition count (`--partitions`, one topic each) and each number of consumers
(`--consumers`), alternating the brokers run by run, a new share group of that many Java
KafkaShareConsumers (kafka-clients 4.3, one JVM each,
compat_tests/jvm_share/ShareWorker.java in quiet mode: explicit ACCEPT of every record, one
commitSync per poll) subscribes to the topic. Once every consumer has subscribed, one warm-up
record per partition has been acknowledged (the share partitions are initialized) and the
group has settled (bench/share_warmup.py: no more partitions moving between consumers, no
warm-up record left unacknowledged), a
confluent-kafka producer sends `--records` records of 100 bytes, round-robin over the
partitions; the figure is those records divided by the time from the first send to the last
acknowledgement (each consumer reports the wall-clock time it reached its count). Prints the
table (median of `--repeat` runs) and writes it as JSON.

    PYTHONPATH=. .venv/bin/python bench/share_consumers.py
    PYTHONPATH=. .venv/bin/python bench/share_consumers.py --records 20000 --consumers 1,4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from brokers import STARTERS, broker_names  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from share_warmup import WarmUp  # noqa: E402

from compat_tests.share_workers import ShareWorkers, Worker  # noqa: E402
from kbroker.cli.ops.admin import parse_bootstrap  # noqa: E402
from kbroker.cli.ops.share_groups import share_offsets  # noqa: E402
from kbroker.client import KafkaClient  # noqa: E402

VALUE = b"x" * 100
# The consumers' JVMs: the client's default JIT and collector (this measures throughput,
# unlike the tests' fast-starting JVMs), a heap small enough for 8 of them beside a broker.
BENCH_JVM_OPTIONS = ("-Xmx256m",)
PRODUCER_SETTINGS = {"linger.ms": 5, "batch.size": 65_536, "acks": "1"}


def create_topic(bootstrap: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"share-bench-{partitions}-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[
        name
    ].result(30)
    deadline = time.monotonic() + 60
    while True:
        meta = admin.list_topics(topic=name, timeout=10).topics.get(name)
        if meta is not None and len(meta.partitions) == partitions:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return name
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} has no leaders after 60 s")
        time.sleep(0.2)


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=VALUE, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def share_group_lag(bootstrap: str, group: str) -> int | None:
    """The group's records not yet acknowledged or archived, summed over its partitions
    (DescribeShareGroupOffsets v1, KIP-1226); None while a partition's lag is not known."""

    async def ask() -> int | None:
        async with KafkaClient(parse_bootstrap(bootstrap)) as client:
            rows = await share_offsets(client, group)
        if not rows or any(r.lag is None for r in rows):
            return None
        return sum(r.lag for r in rows if r.lag is not None)

    return asyncio.run(ask())


def total_acked(workers: list[Worker]) -> int:
    return sum(w.acked_progress()[0] for w in workers)


def one_run(
    share: ShareWorkers, topic: str, partitions: int, consumers: int, records: int
) -> float:
    """Records/s acknowledged by `consumers` share consumers of a new group."""
    group = f"share-bench-{uuid.uuid4().hex[:8]}"
    share.configure(group, {"share.auto.offset.reset": "latest"})
    workers = [share.start(f"{group}-c{i}", group, topic, quiet="true") for i in range(consumers)]
    try:
        share.wait_until(
            lambda: all(w.has_line(f"ready {w.name}") for w in workers), 300, "subscriptions"
        )
        # One record per partition, a round every 2 s until the group has settled
        # (bench/share_warmup.py: no partition moves between consumers while measuring): the
        # share partitions start at the latest offset only once the group has fetched from
        # them, so a round produced before that is never delivered.
        warm_up = WarmUp(partitions)
        deadline = time.monotonic() + 300
        while not warm_up.settled(
            [w.acked_progress()[0] for w in workers],
            time.monotonic(),
            share_group_lag(share.bootstrap, group),
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the group did not settle: warm-up records not acknowledged")
            produce(share.bootstrap, topic, partitions, partitions)
            time.sleep(2.0)
        before = total_acked(workers)
        started_ms = time.time() * 1000
        produce(share.bootstrap, topic, partitions, records)
        share.wait_until(
            lambda: total_acked(workers) >= before + records, 600, f"{records} acknowledged"
        )
        finished_ms = max(w.acked_progress()[1] for w in workers)
        failed = sum(len(w.failures()) for w in workers)
        if failed:
            print(f"{group}: {failed} failed acknowledgements (partitions)", flush=True)
    finally:
        share.stop_all()
    return records / ((finished_ms - started_ms) / 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=broker_names, default=["kbroker", "kafka43"])
    parser.add_argument("--partitions", default="1,8")
    parser.add_argument("--consumers", default="1,2,4,8")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path, default=REPO_ROOT / "bench/results/share.json")
    args = parser.parse_args()
    partition_counts = [int(p) for p in args.partitions.split(",")]
    consumer_counts = [int(c) for c in args.consumers.split(",")]
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="share-bench-") as scratch, ExitStack() as stack:
        # Every broker runs for the whole benchmark and the cells alternate between them, so
        # that a change in the machine's load hits each broker's figures alike.
        workers: dict[str, ShareWorkers] = {}
        for name in args.brokers:
            broker = stack.enter_context(STARTERS[name]())
            workers[name] = ShareWorkers.compile(
                Path(scratch) / f"jvm-{name}",
                broker.bootstrap,
                Path(scratch) / f"workers-{name}",
                BENCH_JVM_OPTIONS,
            )
        for partitions in partition_counts:
            topics = {name: create_topic(w.bootstrap, partitions) for name, w in workers.items()}
            for consumers in consumer_counts:
                key = f"{partitions}p x {consumers}c"
                for _ in range(args.repeat):
                    for name, share in workers.items():
                        rate = one_run(share, topics[name], partitions, consumers, args.records)
                        results.setdefault(name, {}).setdefault(key, []).append(rate)
                        print(f"{name} {key}: {rate:,.0f} records/s", flush=True)
    print_table(results, args.brokers, partition_counts, consumer_counts)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"records": args.records, "runs": results}, indent=2))


def print_table(
    results: dict[str, dict[str, list[float]]],
    brokers: list[str],
    partition_counts: list[int],
    consumer_counts: list[int],
) -> None:
    header = "| partitions | consumers | " + " | ".join(f"{b} records/s" for b in brokers)
    if len(brokers) == 2:
        header += f" | {brokers[0]}/{brokers[1]}"
    print(header + " |")
    print("|" + " --- |" * header.count("|"))
    for partitions in partition_counts:
        for consumers in consumer_counts:
            key = f"{partitions}p x {consumers}c"
            medians = [statistics.median(results[b][key]) for b in brokers]
            cells = [f"{m:,.0f}" for m in medians]
            if len(brokers) == 2:
                cells.append(f"{medians[0] / medians[1]:.2f}")
            print(f"| {partitions} | {consumers} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
