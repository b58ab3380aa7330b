"""kbroker beside Tansu and Apache Kafka: throughput, end-to-end latency, CPU per GB and peak RSS.

Runs a matrix of configurations (record size, acks, partitions, compression)
with librdkafka (kcat) as the load generator, against each broker in turn,
alternating brokers run by run so all see the same machine conditions, and
keeps the median of --repeat runs (a run of 1M records lasts about a second, so
single runs are noisy); each topic is deleted once measured. Then measures
end-to-end latency at fixed rates with a paced confluent-kafka producer and a
consumer in another process, --repeat times per broker and rate, keeping the run
with the median p99. Broker CPU seconds and peak RSS come from /proc for brokers
this script starts.

Writes bench/results/suite-<time>.json and, when matplotlib is installed, PNG
plots beside it (throughput by configuration, latency percentiles by rate).
Benchmarks print figures; they are not tests.

    .venv/bin/python bench/suite.py                 # kbroker and Tansu, the full matrix
    .venv/bin/python bench/suite.py --brokers kbroker,tansu,kafka  # and Apache Kafka 3.9
    .venv/bin/python bench/suite.py --quick         # a few configurations, smaller counts
    .venv/bin/python bench/suite.py --brokers "" --running other=HOST:PORT  # any running broker
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import throughput
from brokers import STARTERS, BrokerUnderTest, broker_names
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

T = TypeVar("T")
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Config:
    record_size: int
    acks: str
    partitions: int
    compression: str

    @property
    def label(self) -> str:
        return f"{self.record_size}B acks={self.acks} p={self.partitions} {self.compression}"


def matrix(quick: bool) -> list[Config]:
    if quick:
        return [Config(100, "1", 1, "none"), Config(1000, "all", 6, "lz4")]
    return [
        Config(size, acks, partitions, compression)
        for size in (100, 1000)
        for acks in ("1", "all")
        for partitions in (1, 6)
        for compression in ("none", "lz4")
    ]


def measure_throughput(
    broker: BrokerUnderTest,
    config: Config,
    records: int,
    client: str,
    producer_properties: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    settings = throughput.Settings(
        bootstrap=broker.bootstrap,
        topic=f"suite-{uuid.uuid4().hex[:12]}",
        records=records,
        record_size=config.record_size,
        producers=1,
        partitions=config.partitions,
        acks=config.acks,
        linger_ms=5,
        batch_size=1_000_000,
        compression=config.compression,
        producer_properties=producer_properties,
    )
    cpu_before = broker.cpu_seconds()
    phases = throughput.run(settings, client)
    cpu_after = broker.cpu_seconds()
    throughput.delete_topic(settings)
    gigabytes = records * config.record_size / 1e9
    result: dict[str, Any] = {name: asdict(phase) for name, phase in phases.items()}
    if cpu_before is not None and cpu_after is not None:
        # Produce and consume together: both phases' CPU over the data moved twice.
        result["cpu_seconds_per_gb"] = (cpu_after - cpu_before) / (2 * gigabytes)
    result["peak_rss_mb"] = broker.peak_rss_mb()
    return result


def alternating(
    brokers: list[BrokerUnderTest], repeat: int, measure: Callable[[BrokerUnderTest], T]
) -> dict[str, list[T]]:
    """``repeat`` measurements per broker, alternating brokers run by run so that all see
    the same machine conditions."""
    runs: dict[str, list[T]] = {broker.name: [] for broker in brokers}
    for _ in range(repeat):
        for broker in brokers:
            runs[broker.name].append(measure(broker))
    return runs


def median_run(runs: list[dict[str, Any]], figure: str) -> dict[str, Any]:
    """The run with the median ``figure``, whole (its other figures belong with it)."""
    ordered = sorted(runs, key=lambda run: run[figure])
    return ordered[(len(ordered) - 1) // 2]


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One figure per phase from repeated runs: the run with the median rate (so MB/s and
    seconds stay those of a real run), the median CPU per GB, the highest RSS."""
    result: dict[str, Any] = {
        phase: median_run([run[phase] for run in runs], "msgs_per_s")
        for phase in ("produce", "consume")
    }
    cpu = [run["cpu_seconds_per_gb"] for run in runs if "cpu_seconds_per_gb" in run]
    if cpu:
        result["cpu_seconds_per_gb"] = statistics.median(cpu)
    rss = [run["peak_rss_mb"] for run in runs if run["peak_rss_mb"] is not None]
    result["peak_rss_mb"] = max(rss) if rss else None
    result["runs"] = runs
    return result


def _latency_consumer(bootstrap: str, topic: str, count: int, out: Any, ready: Any) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"latency-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
            "fetch.min.bytes": 1,
        }
    )
    # Ready once it has read the producer's warm-up record, so it is fetching at the end of
    # the log however long its metadata took (a topic just created on a cluster of three),
    # rather than after a fixed second.
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 120
    while not ready.is_set() and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=1, timeout=0.1):
            if msg.error() is None and msg.value()[:8] == bytes(8):
                ready.set()
    latencies: list[float] = []
    while len(latencies) < count and time.monotonic() < deadline:
        # consume() waits for the whole batch or the timeout: keep the wait short.
        for msg in consumer.consume(num_messages=10_000, timeout=0.001):
            sent = int.from_bytes(msg.value()[:8], "big") if msg.error() is None else 0
            if sent:  # 0 marks the producer's warm-up record
                latencies.append((time.time_ns() - sent) / 1e6)
    consumer.close()
    out.put(latencies)


def measure_latency(
    broker: BrokerUnderTest,
    rate: int,
    seconds: float,
    *,
    acks: str = "1",
    size: int = 100,
    topic_config: dict[str, str] | None = None,
    replication_factor: int = 1,
    linger_ms: int = 0,
) -> dict[str, float]:
    """End-to-end latency (produce call to consumer receipt) at a fixed rate, in ms, of
    records of `size` bytes produced with `acks` to a new one-partition topic (with
    `topic_config` set on it)."""
    topic = f"latency-{uuid.uuid4().hex[:12]}"
    settings = throughput.Settings(
        broker.bootstrap,
        topic,
        0,
        size,
        1,
        1,
        acks,
        0,
        1,
        "none",
        replication_factor=replication_factor,
    )
    throughput.create_topic(settings)
    if topic_config:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=topic_config)
        # Held until the answer: a client destroyed meanwhile fails the future.
        admin = AdminClient(settings.client_config())
        admin.alter_configs([resource])[resource].result(30)
    count = int(rate * seconds)
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[list[float]] = ctx.Queue()
    ready = ctx.Event()
    consumer = ctx.Process(
        target=_latency_consumer, args=(broker.bootstrap, topic, count, out, ready)
    )
    consumer.start()
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": linger_ms}
    )
    padding = b"x" * (size - 8)
    # Connections and metadata first, the consumer's too: the clients' start-up is not the
    # broker's latency.
    producer.produce(topic, bytes(8) + padding)
    producer.flush(30)
    if not ready.wait(120):
        raise RuntimeError("the latency consumer did not read the warm-up record")
    start = time.perf_counter()
    for i in range(count):
        # Pace by schedule, not by sleep per record: late records are sent at once.
        delay = start + i / rate - time.perf_counter()
        if delay > 0.0005:
            time.sleep(delay)
        while True:
            try:
                producer.produce(topic, time.time_ns().to_bytes(8, "big") + padding)
                break
            except BufferError:
                producer.poll(0.001)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    latencies = sorted(out.get(timeout=180))
    consumer.join(30)
    if len(latencies) < count:
        raise RuntimeError(f"latency run received {len(latencies)} of {count} records")

    def percentile(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))]

    return {
        "rate": rate,
        "p50_ms": percentile(50),
        "p99_ms": percentile(99),
        "p999_ms": percentile(99.9),
        "mean_ms": statistics.fmean(latencies),
    }


def pyplot() -> Any | None:
    """matplotlib's pyplot drawing to files only, or None (said once) when it is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install -e '.[bench]')")
        return None
    return plt


def save(fig: Any, stem: Path, name: str) -> Path:
    """Write a figure as <stem>-<name>.png."""
    fig.tight_layout()
    path = stem.with_name(f"{stem.name}-{name}.png")
    fig.savefig(path)
    return path


def plot(doc: dict[str, Any], stem: Path) -> list[Path]:
    plt = pyplot()
    if plt is None:
        return []
    written: list[Path] = []
    labels = [row["config"] for row in doc["throughput"]]
    brokers = doc["brokers"]
    fig, axes = plt.subplots(1, 2, figsize=(14, 6))
    for axis, phase in zip(axes, ("produce", "consume"), strict=True):
        width = 0.8 / len(brokers)
        for i, name in enumerate(brokers):
            values = [row[name][phase]["msgs_per_s"] / 1e3 for row in doc["throughput"]]
            axis.barh([y + i * width for y in range(len(labels))], values, width, label=name)
        axis.set_yticks([y + 0.4 - width / 2 for y in range(len(labels))], labels, fontsize=8)
        axis.set_xlabel("thousand msgs/s")
        axis.set_title(phase)
        axis.legend()
    written.append(save(fig, stem, "throughput"))
    fig, axis = plt.subplots(figsize=(8, 5))
    for name in brokers:
        rows = [row for row in doc["latency"] if row["broker"] == name]
        for key in ("p50_ms", "p99_ms", "p999_ms"):
            axis.plot(
                [r["rate"] for r in rows],
                [r[key] for r in rows],
                marker="o",
                label=f"{name} {key[:-3]}",
            )
    axis.set_xlabel("msgs/s")
    axis.set_ylabel("end-to-end latency (ms)")
    axis.set_yscale("log")
    axis.legend()
    written.append(save(fig, stem, "latency"))
    return written


def ratio(mine: float, theirs: float) -> str:
    return f"{mine / theirs:.2f}x" if theirs else "n/a"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--brokers",
        type=broker_names,
        default="kbroker,tansu",
        help=f"brokers this script starts, of {','.join(STARTERS)}",
    )
    parser.add_argument(
        "--running",
        action="append",
        default=[],
        metavar="NAME=HOST:PORT",
        help="also measure a broker that is already running (no CPU or RSS figures)",
    )
    parser.add_argument("--quick", action="store_true", help="a few configurations, fewer records")
    parser.add_argument("--records", type=int, help="records per throughput run")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs per broker, for each configuration and latency rate (the median is kept)",
    )
    parser.add_argument("--rates", default="10000,50000", help="latency rates, msgs/s")
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument(
        "--client",
        default="kcat",
        choices=["confluent", "kcat"],
        # kcat keeps records in C; the confluent-kafka client hands each one to Python and
        # is slower than either broker at 100-byte records.
        help="load generator (default kcat, on confluent-kafka's librdkafka)",
    )
    args = parser.parse_args(argv)
    names = args.brokers
    running: list[BrokerUnderTest] = []
    for spec in args.running:
        name, sep, address = spec.partition("=")
        if not sep or not name or name in names or ":" not in address:
            parser.error(f"--running takes NAME=HOST:PORT with a new name, not {spec!r}")
        running.append(BrokerUnderTest(name, address))
    if not names and not running:
        parser.error("nothing to measure")
    if args.repeat < 1:
        parser.error("--repeat takes a count of at least 1")
    names += [broker.name for broker in running]
    records = args.records or (200_000 if args.quick else 1_000_000)
    rates = [int(r) for r in args.rates.split(",")]
    doc: dict[str, Any] = {"brokers": names, "records": records, "throughput": [], "latency": []}
    with ExitStack() as stack:
        brokers = [stack.enter_context(STARTERS[name]()) for name in names if name in STARTERS]
        brokers += running
        for config in matrix(args.quick):
            row: dict[str, Any] = {"config": config.label, **asdict(config)}
            measure = partial(
                measure_throughput, config=config, records=records, client=args.client
            )
            runs = alternating(brokers, args.repeat, measure)
            for name, broker_runs in runs.items():
                row[name] = median_of(broker_runs)
            doc["throughput"].append(row)
            line = f"{config.label:<32}"
            for broker in brokers:
                result = row[broker.name]
                line += (
                    f" | {broker.name}: produce {result['produce']['msgs_per_s']:>10,.0f}"
                    f" consume {result['consume']['msgs_per_s']:>10,.0f} msgs/s"
                )
            for other in ("tansu", "kafka"):
                if other not in row or "kbroker" not in row:
                    continue
                for phase in ("produce", "consume"):
                    mine = row["kbroker"][phase]["msgs_per_s"]
                    theirs = row[other][phase]["msgs_per_s"]
                    line += f" | {phase} kbroker/{other} {ratio(mine, theirs)}"
            print(line, flush=True)
        for rate in rates:
            measure_rate = partial(measure_latency, rate=rate, seconds=args.latency_seconds)
            tries = alternating(brokers, args.repeat, measure_rate)
            for broker in brokers:
                result = median_run(tries[broker.name], "p99_ms")
                doc["latency"].append({"broker": broker.name, **result, "runs": tries[broker.name]})
                print(
                    f"latency {broker.name:<8} at {rate:>7,} msgs/s: p50 {result['p50_ms']:.2f} ms"
                    f"  p99 {result['p99_ms']:.2f} ms  p99.9 {result['p999_ms']:.2f} ms",
                    flush=True,
                )
        for broker in brokers:
            rss = broker.peak_rss_mb()
            if rss is not None:
                print(f"peak RSS {broker.name}: {rss:.1f} MB")
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"suite-{time.strftime('%Y%m%d-%H%M%S')}"
    json_path = stem.with_suffix(".json")
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"results: {json_path}")
    for path in plot(doc, stem):
        print(f"plot: {path}")


if __name__ == "__main__":
    main()
