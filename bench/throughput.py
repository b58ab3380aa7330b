"""Produce/consume throughput of a Kafka-compatible broker, measured with stock clients.

Creates a fresh topic, produces N fixed-size records (confluent-kafka or kcat), then reads
them all back from the beginning, and prints msgs/s and MB/s for each phase. Without
--bootstrap it starts its own kbroker on a temporary log directory and stops it afterwards;
with --bootstrap it measures whatever broker listens there, so brokers can be compared
side by side with the same command.

--json FILE writes the parameters and results as one JSON object:
{"bootstrap", "client", "records", "record_size", "producers", "partitions", "acks",
 "linger_ms", "batch_size", "compression", "produce": {"seconds", "msgs_per_s", "mb_per_s"},
 "consume": {...}} (MB = 10^6 bytes of record values).
"""

import argparse
import importlib.util
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
# Long enough for a broker holding 10,000 partitions to flush and close them all.
STOP_TIMEOUT = 300.0


@dataclass(frozen=True)
class Phase:
    seconds: float
    msgs_per_s: float
    mb_per_s: float

    @classmethod
    def measure(cls, records: int, record_size: int, seconds: float) -> "Phase":
        return cls(seconds, records / seconds, records * record_size / seconds / 1e6)


@dataclass(frozen=True)
class Settings:
    bootstrap: str
    topic: str
    records: int
    record_size: int
    producers: int
    partitions: int
    acks: str
    linger_ms: int
    batch_size: int
    compression: str
    # librdkafka client properties for a secured listener (security.protocol, ssl.*, sasl.*).
    security: tuple[tuple[str, str], ...] = ()
    # Further librdkafka producer properties (a partitioner, say).
    producer_properties: tuple[tuple[str, str], ...] = ()
    replication_factor: int = 1

    def client_config(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, **dict(self.security)}

    @property
    def admin_timeout(self) -> float:
        """Seconds to allow topic creation or deletion: brokers spend time per partition
        (Kafka writes each one's state to ZooKeeper), so 10,000 take minutes, not seconds."""
        return 30 + self.partitions / 50

    def producer_config(self) -> dict[str, Any]:
        return {
            **self.client_config(),
            "acks": self.acks,
            "linger.ms": self.linger_ms,
            "batch.size": self.batch_size,
            "compression.type": self.compression,
            "queue.buffering.max.messages": 1_000_000,
            # Only failures call back into Python: per-message callbacks would be the bottleneck.
            "delivery.report.only.error": True,
            **dict(self.producer_properties),
        }


@contextmanager
def own_broker(start_timeout: float = 30.0, **overrides: str) -> Iterator[Any]:
    """Start a kbroker on a temporary log directory, with these property overrides; yields
    its BrokerProcess."""
    # Run as a script, the repository root is not on sys.path; the launcher lives there.
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from compat_tests.broker_process import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="kbroker-bench-"))
    broker = BrokerProcess(work, overrides=overrides)
    try:
        broker.start(timeout=start_timeout)
        yield broker
    finally:
        broker.stop(STOP_TIMEOUT)
        shutil.rmtree(work, ignore_errors=True)


def create_topic(settings: Settings) -> None:
    admin = AdminClient(settings.client_config())
    topic = NewTopic(
        settings.topic,
        num_partitions=settings.partitions,
        replication_factor=settings.replication_factor,
    )
    timeout = settings.admin_timeout
    admin.create_topics([topic], request_timeout=timeout)[settings.topic].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic=settings.topic, timeout=10).topics.get(settings.topic)
        if meta is not None and meta.error is None and len(meta.partitions) == settings.partitions:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {settings.topic} has no leader after {timeout:.0f} s")
        time.sleep(0.1)


def delete_topic(settings: Settings) -> None:
    """Drop a measured topic, so a long run neither fills the disk nor leaves writeback
    behind for the next measurement."""
    admin = AdminClient(settings.client_config())
    timeout = settings.admin_timeout
    # With an operation timeout the broker answers once the topic is gone (Kafka otherwise
    # answers at once and deletes in the background, during the next measurement).
    futures = admin.delete_topics(
        [settings.topic], operation_timeout=timeout, request_timeout=timeout + 10
    )
    futures[settings.topic].result(timeout + 20)


def produce_share(settings: Settings, count: int) -> int:
    """Produce `count` records with one confluent-kafka producer; returns the failures."""
    failures = 0

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        nonlocal failures
        if err is not None:
            failures += 1

    producer = Producer({**settings.producer_config(), "on_delivery": on_delivery})
    value = b"x" * settings.record_size
    sent = 0
    while sent < count:
        try:
            producer.produce(settings.topic, value)
        except BufferError:
            producer.poll(0.01)
            continue
        sent += 1
        if sent % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(300)
    return failures + remaining


def _producer_worker(
    settings: Settings, count: int, go: Any, results: "multiprocessing.Queue[int]"
) -> None:
    go.wait()
    results.put(produce_share(settings, count))


def shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def produce_confluent(settings: Settings) -> float:
    if settings.producers == 1:
        start = time.perf_counter()
        failures = produce_share(settings, settings.records)
        elapsed = time.perf_counter() - start
    else:
        # Separate processes (spawned: librdkafka handles do not survive fork), released
        # together once they have all started, so process start-up is not measured.
        ctx = multiprocessing.get_context("spawn")
        go = ctx.Event()
        results: multiprocessing.Queue[int] = ctx.Queue()
        procs = [
            ctx.Process(target=_producer_worker, args=(settings, n, go, results))
            for n in shares(settings.records, settings.producers)
        ]
        for p in procs:
            p.start()
        time.sleep(2.0)
        start = time.perf_counter()
        go.set()
        failures = sum(results.get() for _ in procs)
        elapsed = time.perf_counter() - start
        for p in procs:
            p.join()
    if failures:
        raise RuntimeError(f"{failures} records were not delivered")
    return elapsed


def consume_confluent(settings: Settings) -> float:
    consumer = Consumer(
        {
            **settings.client_config(),
            "group.id": f"bench-unjoined-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # librdkafka postpones the next fetch by this much (default 1000 ms) whenever its
            # prefetch queue holds more than queued.min.messages: with the default, a run of
            # 1M records measured those pauses rather than the broker.
            "fetch.queue.backoff.ms": 10,
        }
    )
    try:
        start = time.perf_counter()
        consumer.assign(
            [
                TopicPartition(settings.topic, p, OFFSET_BEGINNING)
                for p in range(settings.partitions)
            ]
        )
        seen = 0
        while seen < settings.records:
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                if msg.error() is not None:
                    raise RuntimeError(f"consumer error: {msg.error()}")
                seen += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def kcat_command() -> tuple[str, dict[str, str]]:
    """kcat, and an environment that links it with confluent-kafka's bundled librdkafka.

    Debian's kcat comes with Debian's librdkafka 2.0, which cannot negotiate ApiVersions with
    Tansu 0.6; librdkafka keeps its ABI stable, so the same kcat runs on the newer library
    the confluent-kafka wheel ships, and both brokers face the same load generator.
    """
    kcat = shutil.which("kcat")
    if kcat is None:
        raise SystemExit("kcat is not installed (make install installs it)")
    spec = importlib.util.find_spec("confluent_kafka")
    assert spec is not None and spec.origin is not None
    bundled = sorted(Path(spec.origin).parents[1].glob("confluent_kafka.libs/librdkafka-*.so*"))
    if not bundled:
        return kcat, dict(os.environ)
    shim = REPO_ROOT / ".venv" / "kcat-librdkafka"
    shim.mkdir(parents=True, exist_ok=True)
    link = shim / "librdkafka.so.1"
    if not link.exists() or link.resolve() != bundled[-1].resolve():
        link.unlink(missing_ok=True)
        link.symlink_to(bundled[-1])
    return kcat, {**os.environ, "LD_LIBRARY_PATH": str(shim)}


def kcat_properties(settings: Settings) -> list[str]:
    props = {
        "acks": settings.acks,
        "linger.ms": settings.linger_ms,
        "batch.size": settings.batch_size,
        "compression.type": settings.compression,
        "queue.buffering.max.messages": 1_000_000,
        **dict(settings.producer_properties),
    }
    return security_properties(settings) + [
        arg for key, value in props.items() for arg in ("-X", f"{key}={value}")
    ]


def security_properties(settings: Settings) -> list[str]:
    return [arg for key, value in settings.security for arg in ("-X", f"{key}={value}")]


def produce_kcat(settings: Settings, kcat: str, env: dict[str, str], work: Path) -> float:
    """kcat -P processes, each reading its share of newline-separated records from a file."""
    value_line = b"x" * settings.record_size + b"\n"
    inputs: list[Path] = []
    for i, count in enumerate(shares(settings.records, settings.producers)):
        path = work / f"records-{i}.txt"
        path.write_bytes(value_line * count)
        inputs.append(path)
    cmd = [
        kcat,
        "-b",
        settings.bootstrap,
        "-P",
        "-q",
        "-t",
        settings.topic,
        *kcat_properties(settings),
    ]
    start = time.perf_counter()
    procs = [
        subprocess.Popen([*cmd, "-l", str(path)], stdin=subprocess.DEVNULL, env=env)
        for path in inputs
    ]
    codes = [p.wait() for p in procs]
    elapsed = time.perf_counter() - start
    if any(codes):
        raise RuntimeError(f"kcat -P exit codes {codes}")
    return elapsed


def consume_kcat(settings: Settings, kcat: str, env: dict[str, str]) -> float:
    # One output byte per record: counting them checks that everything arrived.
    cmd = [
        kcat, "-b", settings.bootstrap, "-C", "-q", "-t", settings.topic,
        "-o", "beginning", "-e", "-c", str(settings.records), "-f", ".",
        # As for the confluent consumer: compressed batches overfill librdkafka's queue at
        # once, and the default 1 s pause then dominated 1-partition lz4 runs.
        "-X", "fetch.queue.backoff.ms=10",
        *security_properties(settings),
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, check=True, env=env)
    elapsed = time.perf_counter() - start
    if len(proc.stdout) != settings.records:
        raise RuntimeError(f"kcat -C read {len(proc.stdout)} of {settings.records} records")
    return elapsed


def run(settings: Settings, client: str) -> dict[str, Phase]:
    create_topic(settings)
    if client == "kcat":
        kcat, env = kcat_command()
        with tempfile.TemporaryDirectory(prefix="kbroker-bench-input-") as work:
            produced = produce_kcat(settings, kcat, env, Path(work))
        consumed = consume_kcat(settings, kcat, env)
    else:
        produced = produce_confluent(settings)
        consumed = consume_confluent(settings)
    return {
        "produce": Phase.measure(settings.records, settings.record_size, produced),
        "consume": Phase.measure(settings.records, settings.record_size, consumed),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="host:port of a running broker (default: start one)")
    parser.add_argument("-n", "--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--producers", type=int, default=1, help="producer processes")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--acks", default="1", choices=["0", "1", "all"])
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument(
        "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    parser.add_argument("--client", default="confluent", choices=["confluent", "kcat"])
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.records < 1 or args.producers < 1 or args.partitions < 1:
        parser.error("--records, --producers and --partitions must be positive")
    return args


def report(settings: Settings, client: str, results: dict[str, Phase]) -> None:
    print(
        f"{settings.records:,} records x {settings.record_size} B, client {client}, "
        f"{settings.producers} producer(s), {settings.partitions} partition(s), "
        f"acks={settings.acks}, linger.ms={settings.linger_ms}, "
        f"compression={settings.compression}, broker {settings.bootstrap}"
    )
    for name, phase in results.items():
        print(
            f"{name:>8}: {phase.seconds:8.2f} s {phase.msgs_per_s:12,.0f} msgs/s "
            f"{phase.mb_per_s:8.2f} MB/s"
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)

    def settings_for(bootstrap: str) -> Settings:
        return Settings(
            bootstrap=bootstrap,
            topic=f"bench-{uuid.uuid4().hex[:12]}",
            records=args.records,
            record_size=args.record_size,
            producers=args.producers,
            partitions=args.partitions,
            acks=args.acks,
            linger_ms=args.linger_ms,
            batch_size=args.batch_size,
            compression=args.compression,
        )

    if args.bootstrap:
        settings = settings_for(args.bootstrap)
        results = run(settings, args.client)
    else:
        with own_broker() as broker:
            settings = settings_for(broker.bootstrap)
            results = run(settings, args.client)
    report(settings, args.client, results)
    if args.json:
        doc = {
            **{k: v for k, v in asdict(settings).items() if k != "topic"},
            "client": args.client,
            **{name: asdict(phase) for name, phase in results.items()},
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
