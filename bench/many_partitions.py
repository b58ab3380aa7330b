"""One broker with many partitions (issue 17): start-up time after a clean shutdown and after
kill -9, resident memory, open file descriptors, and Metadata latency for every topic.

The partitions are created empty (CreateTopics), then each gets a few records so every log
has a segment on disk; the broker is stopped (SIGTERM) and started again, then killed
(SIGKILL) and started again. Start-up is the time from the process's start until ApiVersions
answers and a Metadata request lists every partition with a leader. A broker whose topics do
not survive a restart (Tansu on memory storage) is timed to an empty broker instead.

    .venv/bin/python bench/many_partitions.py [--topics 100] [--partitions 100] [--metadata 200]
    .venv/bin/python bench/many_partitions.py --brokers kbroker,tansu,kafka
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import struct
import time

# brokers, imported before kbroker and wire, puts the repository root on sys.path.
from brokers import (
    STARTERS,
    BrokerUnderTest,
    broker_names,
    open_files,
    raise_open_files_limit,
    rss_mb,
)
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.client import KafkaClient
from wire.api_keys import ApiKey
from wire.frame import encode_request
from wire.messages.metadata_request import MetadataRequest
from wire.messages.request_header import RequestHeader


def topic_names(topics: int) -> list[str]:
    return [f"t{i:04d}" for i in range(topics)]


def admin_timeout(partitions: int) -> float:
    """Seconds to allow for work proportional to the partition count (creation, leadership
    after a start): Kafka writes each partition's state to ZooKeeper and, after kill -9,
    recovers each log."""
    return 120 + partitions / 10


def create_topics(bootstrap: str, names: list[str], partitions: int) -> float:
    """Create the topics, ten per CreateTopics request; returns the seconds it took."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    timeout = admin_timeout(len(names) * partitions)
    started = time.monotonic()
    for first in range(0, len(names), 10):
        batch = [NewTopic(n, partitions, 1) for n in names[first : first + 10]]
        for f in admin.create_topics(batch, request_timeout=timeout).values():
            f.result(timeout)
    return time.monotonic() - started


def write_one_record_each(bootstrap: str, names: list[str], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for name in names:
        for p in range(partitions):
            producer.produce(name, b"v" * 100, partition=p)
        producer.poll(0)
    if producer.flush(admin_timeout(len(names) * partitions)):
        raise RuntimeError("records left undelivered")


async def led_partitions(host: str, port: int, names: set[str]) -> int:
    """Partitions of these topics with a leader in an all-topics Metadata answer."""
    async with KafkaClient([(host, port)], timeout=60) as client:
        response = await client.metadata(None)
    return sum(
        1 for t in response.topics if t.name in names for p in t.partitions if p.leader_id >= 0
    )


def wait_all_led(broker: BrokerUnderTest, names: set[str], wanted: int) -> None:
    timeout = admin_timeout(wanted)
    deadline = time.monotonic() + timeout
    while True:
        led = asyncio.run(led_partitions(broker.host, broker.port, names))
        if led >= wanted:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{broker.name}: {led} of {wanted} partitions led after {timeout} s")
        time.sleep(0.1)


def metadata_latencies(host: str, port: int, samples: int) -> tuple[int, list[float]]:
    """The broker's time to answer an all-topics Metadata v12 request (ms), each from the
    request's first byte sent to the answer's last byte read, the answer not decoded (a
    Python client spends longer decoding 10,000 partitions than the broker encoding them);
    and the answer's size."""
    header = RequestHeader(
        request_api_key=ApiKey.METADATA, request_api_version=12, correlation_id=1
    )
    frame = encode_request(header, MetadataRequest(topics=None), 12)
    latencies: list[float] = []
    size = 0
    with socket.create_connection((host, port), timeout=60) as sock:
        for _ in range(samples):
            started = time.perf_counter()
            sock.sendall(frame)
            size = struct.unpack(">i", _exact(sock, 4))[0]
            _exact(sock, size)
            latencies.append((time.perf_counter() - started) * 1000)
    return size, latencies


def _exact(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def percentile(ordered: list[float], p: float) -> float:
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def timed_stop(broker: BrokerUnderTest, partitions: int) -> float:
    """SIGTERM and the seconds until the process exits; an error if it had to be killed
    (the next start would then not follow a clean shutdown)."""
    started = time.monotonic()
    code = broker.restartable().stop(admin_timeout(partitions))
    if code == -9:
        raise RuntimeError(f"{broker.name} did not stop on SIGTERM")
    return time.monotonic() - started


def timed_start(broker: BrokerUnderTest, names: set[str], wanted: int) -> dict[str, float]:
    """Start the stopped broker; seconds until every partition has a leader, then RSS and
    open files."""
    started = time.monotonic()
    broker.restartable().start(timeout=admin_timeout(wanted))
    wait_all_led(broker, names, wanted)
    seconds = time.monotonic() - started
    pid = broker.pid or 0
    return {"s": seconds, "rss_mb": rss_mb(pid), "open_files": open_files(pid)}


def measure(
    broker: BrokerUnderTest, topics: int, partitions: int, samples: int
) -> dict[str, float]:
    """Every figure of one broker with topics x partitions partitions, ending with the broker
    running again after kill -9."""
    names = topic_names(topics)
    total = topics * partitions
    pid = broker.pid or 0
    figures: dict[str, float] = {"empty_rss_mb": rss_mb(pid)}
    figures["create_s"] = create_topics(broker.bootstrap, names, partitions)
    write_one_record_each(broker.bootstrap, names, partitions)
    wait_all_led(broker, set(names), total)
    figures["rss_mb"] = rss_mb(pid)
    figures["open_files"] = open_files(pid)
    size, latencies = metadata_latencies(broker.host, broker.port, samples)
    latencies.sort()
    figures["metadata_kb"] = size / 1000
    figures["metadata_p50_ms"] = statistics.median(latencies)
    figures["metadata_p99_ms"] = percentile(latencies, 99)
    figures["stop_s"] = timed_stop(broker, total)
    # Without durable topics the restarted broker is empty: time it to an empty answer.
    wanted = total if broker.durable else 0
    for name, value in timed_start(broker, set(names), wanted).items():
        figures[f"clean_start_{name}"] = value
    broker.restartable().kill()
    for name, value in timed_start(broker, set(names), wanted).items():
        figures[f"kill9_start_{name}"] = value
    return figures


def report(broker: BrokerUnderTest, topics: int, partitions: int, f: dict[str, float]) -> None:
    restarted = "" if broker.durable else " (empty: topics do not survive a restart)"
    print(
        f"{broker.name}: {topics * partitions:,} partitions in {topics} topics, "
        f"created in {f['create_s']:.1f} s\n"
        f"  running: RSS {f['rss_mb']:.0f} MB (empty broker {f['empty_rss_mb']:.0f} MB), "
        f"{f['open_files']:.0f} open files\n"
        f"  Metadata v12, all topics ({f['metadata_kb']:,.0f} KB): median "
        f"{f['metadata_p50_ms']:.1f} ms, p99 {f['metadata_p99_ms']:.1f} ms\n"
        f"  SIGTERM to exit: {f['stop_s']:.1f} s\n"
        f"  start after a clean shutdown{restarted}: {f['clean_start_s']:.1f} s, "
        f"RSS {f['clean_start_rss_mb']:.0f} MB, {f['clean_start_open_files']:.0f} open files\n"
        f"  start after kill -9{restarted}: {f['kill9_start_s']:.1f} s, "
        f"RSS {f['kill9_start_rss_mb']:.0f} MB, {f['kill9_start_open_files']:.0f} open files",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=broker_names, default="kbroker")
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--metadata", type=int, default=200, help="Metadata requests timed")
    args = parser.parse_args(argv)
    raise_open_files_limit(args.topics * args.partitions * 2)
    for name in args.brokers:
        with STARTERS[name]() as broker:
            figures = measure(broker, args.topics, args.partitions, args.metadata)
            report(broker, args.topics, args.partitions, figures)


if __name__ == "__main__":
    main()
