"""Mirror topics against a consumer and producer pair: throughput, and lag at a steady rate.

Two copiers, alternating in one run between two kbroker brokers: a kbroker mirror topic
(``kbroker mirrors create``, the fetcher inside the destination broker) and a confluent-kafka
consumer and producer pair in a process of its own, copying the same kind of topic (the usual
answer without cluster links, and what MirrorMaker 2 does inside Kafka Connect, which
../shared/kafka-4.3 does not ship).

Throughput (``--mode throughput``): for each record size and partition count the source
topic is filled with ``--records`` records (a quarter of them above 100 B), then each copier
runs until the destination holds all of them; records/s and MB/s of record payload. The
mirror's time includes starting ``kbroker mirrors create`` (a Python process, about a
second), so short runs understate it.

Lag (``--mode lag``): a producer process writes ``--rate`` records/s of 100 B for
``--seconds`` to a fresh source topic while the copier runs; every 50 ms the source's and the
destination's end offsets are read (ListOffsets). Records lag: source end minus destination
end at each sample. Time lag: for each sample, how long until the destination's end reached
the source's end of that sample (resolution: the 50 ms sampling). p50, p99 and max over the
samples after the first ``--warmup`` seconds, the producer's achieved rate, and the time the
copier needed to catch up after the producer stopped.

Every row carries the load average (the machine may be shared).

    python bench/mirror.py [--mode both|throughput|lag] [--records 200000] [--sizes 100,1024]
        [--partitions 1,64] [--rate 50000] [--seconds 20] [--lag-partitions 1] [--rounds 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from kbroker.data_client import LATEST, DataClient  # noqa: E402
from tests.integration.mirror_support import end_offsets, mirrors  # noqa: E402

SAMPLE_SECONDS = 0.05
# New processes, not forks of this one and its librdkafka threads.
SPAWN = multiprocessing.get_context("spawn")
LAG_RECORD_BYTES = 100


def fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1}
    )
    value = os.urandom(size)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def wait_total(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    while sum(end_offsets(bootstrap, topic, partitions).values()) < records:
        time.sleep(0.05)


def mirror_copy(source: str, destination: str, topic: str, partitions: int, records: int) -> float:
    started = time.monotonic()
    created = mirrors(
        "create", "--bootstrap-server", destination, "--source-bootstrap", source, "--topic", topic
    )
    assert created.returncode == 0, created.stderr
    wait_total(destination, topic, partitions, records)
    return time.monotonic() - started


def pair_copy(source: str, destination: str, topic: str, partitions: int, records: int) -> float:
    target = f"{topic}-copy"
    admin = AdminClient({"bootstrap.servers": destination})
    admin.create_topics([NewTopic(target, partitions, 1)])[target].result(timeout=60)
    started = time.monotonic()
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": f"copy-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer(
        {"bootstrap.servers": destination, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1}
    )
    consumer.subscribe([topic])
    copied = 0
    while copied < records:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is not None:
                continue
            while True:
                try:
                    producer.produce(
                        target, message.value(), message.key(), partition=message.partition()
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            copied += 1
        producer.poll(0)
    producer.flush(120)
    consumer.close()
    return time.monotonic() - started


def steady_producer(
    bootstrap: str, topic: str, partitions: int, rate: int, seconds: float, report: Connection
) -> None:
    """Produce ``rate`` records/s for ``seconds`` (a process of its own: the bench's sampling
    must not slow it down); sends its first and last produce times (time.monotonic, one clock
    for every process) to ``report``."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    value = os.urandom(LAG_RECORD_BYTES)
    started = time.monotonic()
    sent = 0
    total = int(seconds * rate)
    while sent < total:
        due = min(int((time.monotonic() - started) * rate), total)
        while sent < due:
            try:
                producer.produce(topic, value, partition=sent % partitions)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(0.001)
    report.send((started, time.monotonic()))
    producer.flush(120)
    report.close()


def pair_process(source: str, destination: str, topic: str, target: str) -> None:
    """The consumer and producer pair, copying until terminated."""
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": f"copy-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": destination, "linger.ms": 5, "acks": "all"})
    consumer.subscribe([topic])
    while True:
        for message in consumer.consume(10_000, 0.1):
            if message.error() is not None:
                continue
            while True:
                try:
                    producer.produce(target, message.value(), partition=message.partition())
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.poll(0)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def time_lags(samples: list[tuple[float, int, int]]) -> list[float | None]:
    """Per sample (time, source end, destination end): seconds until a sample saw the
    destination's end at the source's end of that sample (None: never)."""
    lags: list[float | None] = []
    reached = 0
    for i, (at, source_end, _) in enumerate(samples):
        reached = max(reached, i)
        while reached < len(samples) and samples[reached][2] < source_end:
            reached += 1
        lags.append(samples[reached][0] - at if reached < len(samples) else None)
    return lags


def lag_run(
    copier: str, source: str, destination: str, args: argparse.Namespace, round_: int
) -> str:
    """One copier at a steady rate; the row to print."""
    topic = f"steady-{'mirror' if copier == 'mirror topic' else 'pair'}-{round_}"
    partitions = args.lag_partitions
    admin = AdminClient({"bootstrap.servers": source})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    target = topic
    pair = None
    if copier == "mirror topic":
        created = mirrors(
            *("create", "--bootstrap-server", destination),
            *("--source-bootstrap", source, "--topic", topic),
        )
        assert created.returncode == 0, created.stderr
    else:
        target = f"{topic}-copy"
        admin = AdminClient({"bootstrap.servers": destination})
        admin.create_topics([NewTopic(target, partitions, 1)])[target].result(timeout=60)
        pair = SPAWN.Process(target=pair_process, args=(source, destination, topic, target))
        pair.start()
    times, report = SPAWN.Pipe(duplex=False)
    producer = SPAWN.Process(
        target=steady_producer, args=(source, topic, partitions, args.rate, args.seconds, report)
    )
    total = int(args.seconds * args.rate)
    # (time.monotonic(), source end, destination end) every SAMPLE_SECONDS.
    samples: list[tuple[float, int, int]] = []
    try:
        with DataClient(source) as source_client, DataClient(destination) as destination_client:
            source_tps = [(topic, p) for p in range(partitions)]
            target_tps = [(target, p) for p in range(partitions)]
            producer.start()
            deadline = time.monotonic() + args.seconds + 180
            while not samples or samples[-1][2] < total:
                from_source = source_client.list_offsets(source_tps, LATEST)
                from_destination = destination_client.list_offsets(target_tps, LATEST)
                samples.append(
                    (time.monotonic(), sum(from_source.values()), sum(from_destination.values()))
                )
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{copier}: {samples[-1][2]} of {total} copied")
                time.sleep(SAMPLE_SECONDS)
            started, stopped = times.recv()
    finally:
        producer.join(60)
        if pair is not None:
            pair.terminate()
            pair.join(30)
    steady = [
        (float(source_end - destination_end), lag)
        for (at, source_end, destination_end), lag in zip(samples, time_lags(samples), strict=True)
        if started + args.warmup <= at <= stopped
    ]
    records = [behind for behind, _ in steady]
    seconds = [lag for _, lag in steady if lag is not None]
    return (
        f"{copier:<13} {round_:>5} {total / (stopped - started):>9,.0f} "
        f"{percentile(records, 0.5):>7,.0f} {percentile(records, 0.99):>7,.0f} "
        f"{max(records):>7,.0f} {percentile(seconds, 0.5) * 1000:>7,.0f} "
        f"{percentile(seconds, 0.99) * 1000:>7,.0f} {max(seconds) * 1000:>7,.0f} "
        f"{samples[-1][0] - stopped:>7.2f} {len(steady):>7}  {os.getloadavg()[0]:.1f}"
    )


def throughput(source: str, destination: str, args: argparse.Namespace) -> None:
    print("size  partitions  copier        records/s    MB/s  seconds  load")
    copiers: tuple[tuple[str, Callable[[str, str, str, int, int], float]], ...] = (
        ("mirror topic", mirror_copy),
        ("consumer+prod", pair_copy),
    )
    for size in (int(s) for s in args.sizes.split(",")):
        records = args.records if size <= 100 else args.records // 4
        for partitions in (int(p) for p in args.partitions.split(",")):
            topic = f"bench-{size}-{partitions}"
            fill(source, topic, partitions, records, size)
            for name, copier in copiers:
                seconds = copier(source, destination, topic, partitions, records)
                rate = records / seconds
                print(
                    f"{size:>4}  {partitions:>10}  {name:<12} {rate:>10,.0f} "
                    f"{rate * size / 1e6:>7.1f}  {seconds:>7.2f}  {os.getloadavg()[0]:.1f}",
                    flush=True,
                )


def lag(source: str, destination: str, args: argparse.Namespace) -> None:
    print(
        f"lag at {args.rate:,} records/s of {LAG_RECORD_BYTES} B for {args.seconds:g} s, "
        f"{args.lag_partitions} partition(s); percentiles after {args.warmup:g} s; "
        "records lag and time lag (ms)"
    )
    print(
        "copier        round  produced  rec p50 rec p99 rec max  ms p50  ms p99  ms max "
        "catchup samples  load"
    )
    for round_ in range(args.rounds):
        for copier in ("mirror topic", "consumer+prod"):
            print(lag_run(copier, source, destination, args, round_), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("both", "throughput", "lag"), default="both")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", default="1,64")
    parser.add_argument("--rate", type=int, default=50_000, help="lag: records/s produced")
    parser.add_argument("--seconds", type=float, default=20.0, help="lag: seconds produced")
    parser.add_argument("--warmup", type=float, default=2.0, help="lag: seconds left out")
    parser.add_argument("--lag-partitions", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="lag: runs of each copier")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mirror-bench-") as work:
        source = BrokerProcess(Path(work) / "source")
        destination = BrokerProcess(Path(work) / "destination")
        source.start()
        destination.start()
        try:
            if args.mode in ("both", "throughput"):
                throughput(source.bootstrap, destination.bootstrap, args)
            if args.mode in ("both", "lag"):
                lag(source.bootstrap, destination.bootstrap, args)
        finally:
            source.stop()
            destination.stop()


if __name__ == "__main__":
    main()
