"""One broker with many partitions (issue 17): start-up time after a clean shutdown and after
kill -9, resident memory, open file descriptors, and Metadata latency for every topic.

The partitions are created empty (CreateTopics), then each gets a few records so every log
has a segment on disk; the broker is stopped (SIGTERM) and started again, then killed
(SIGKILL) and started again. Start-up is the time until ApiVersions answers and a Metadata
request lists every partition with a leader.

    .venv/bin/python bench/many_partitions.py [--topics 100] [--partitions 100] [--metadata 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from kbroker.client import KafkaClient  # noqa: E402
from wire.api_keys import ApiKey  # noqa: E402
from wire.frame import encode_request  # noqa: E402
from wire.messages.metadata_request import MetadataRequest  # noqa: E402
from wire.messages.request_header import RequestHeader  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def led_partitions(host: str, port: int) -> int:
    """Partitions with a leader in an all-topics Metadata answer."""
    async with KafkaClient([(host, port)], timeout=60) as client:
        response = await client.metadata(None)
    return sum(1 for t in response.topics for p in t.partitions if p.leader_id >= 0)


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


def wait_all_led(broker: BrokerProcess, wanted: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        led = asyncio.run(led_partitions(broker.host, broker.port))
        if led >= wanted:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{led} of {wanted} partitions led after {timeout} s")
        time.sleep(0.1)


def timed_start(broker: BrokerProcess, wanted: int) -> float:
    started = time.monotonic()
    broker.start(timeout=300)
    wait_all_led(broker, wanted)
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--metadata", type=int, default=200, help="Metadata requests timed")
    args = parser.parse_args(argv)
    total = args.topics * args.partitions
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-partitions-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={"offsets.topic.num.partitions": "50"})
        broker.start()
        empty_rss = rss_mb(broker.pid or 0)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        names = [f"t{i:04d}" for i in range(args.topics)]
        started = time.monotonic()
        for first in range(0, len(names), 10):
            batch = [NewTopic(n, args.partitions, 1) for n in names[first : first + 10]]
            for f in admin.create_topics(batch, request_timeout=300).values():
                f.result(300)
        created = time.monotonic() - started
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
        for name in names:
            for p in range(args.partitions):
                producer.produce(name, b"v" * 100, partition=p)
            producer.poll(0)
        producer.flush(300)
        wanted = total + 50  # and __consumer_offsets
        wait_all_led(broker, wanted)
        pid = broker.pid or 0
        print(f"{total:,} partitions in {args.topics} topics: created in {created:.1f} s")
        print(
            f"running: RSS {rss_mb(pid):.0f} MB (empty broker {empty_rss:.0f} MB), "
            f"{open_files(pid)} open files"
        )
        size, latencies = metadata_latencies(broker.host, broker.port, args.metadata)
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        print(
            f"Metadata v12, all topics ({wanted:,} partitions, {size / 1000:,.0f} KB): median "
            f"{statistics.median(latencies):.1f} ms, p99 {p99:.1f} ms"
        )
        broker.stop(timeout=120)
        clean = timed_start(broker, wanted)
        print(
            f"start after a clean shutdown: {clean:.1f} s, RSS {rss_mb(broker.pid or 0):.0f} MB, "
            f"{open_files(broker.pid or 0)} open files"
        )
        broker.kill()
        crashed = timed_start(broker, wanted)
        print(
            f"start after kill -9: {crashed:.1f} s, RSS {rss_mb(broker.pid or 0):.0f} MB, "
            f"{open_files(broker.pid or 0)} open files"
        )
        broker.stop(timeout=120)


if __name__ == "__main__":
    main()
