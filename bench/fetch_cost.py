"""The broker's CPU per partition per Fetch request (issue 30): full fetches whose every
partition answers records, full fetches at the end of every partition (nothing new, what a
librdkafka consumer sends for its caught-up partitions: it has no incremental sessions),
and an incremental session (KIP-227) of idle partitions (the Java consumer's case).

One topic of N partitions, each holding `--records` records of `--size` bytes (one batch);
Fetch requests go over one socket with max_wait_ms 0 (no long poll hides the cost); the
broker's CPU time (utime + stime from /proc) over a pass is divided by the requests and
the partitions. Passes alternate the three kinds, `--repeat` times; medians are printed
with the load average, since other work on the machine inflates CPU time too.

    .venv/bin/python bench/fetch_cost.py [--partitions 1000] [--requests 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from fetch_sessions import call, per_request  # noqa: E402

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic  # noqa: E402

TOPIC = "fetch-cost"
KINDS = ("records", "nothing new", "idle session")


def full_fetch(partitions: int, offset: int, session_epoch: int = -1) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        session_epoch=session_epoch,
        topics=[
            FetchTopic(
                topic=TOPIC,
                partitions=[
                    FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20)
                    for p in range(partitions)
                ],
            )
        ],
    )


def fill(bootstrap: str, partitions: int, records: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
    value = b"x" * size
    for partition in range(partitions):
        for _ in range(records):
            producer.produce(TOPIC, value, partition=partition)
    if producer.flush(120) != 0:
        raise RuntimeError("records not acknowledged")


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """µs of broker CPU per request, per kind, one figure per pass."""
    figures: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-fetch-cost-") as tmp:
        broker = BrokerProcess(Path(tmp))
        broker.start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(120)
            time.sleep(1)
            fill(broker.bootstrap, args.partitions, args.records, args.size)
            pid = broker.pid or 0
            with socket.create_connection((broker.host, broker.port)) as sock:
                first = call(sock, full_fetch(args.partitions, args.records, session_epoch=0), 0)
                session_id = first.session_id  # type: ignore[attr-defined]
                epoch = 1
                for _ in range(args.repeat):
                    figures["records"].append(
                        per_request(pid, sock, [full_fetch(args.partitions, 0)] * args.requests)
                    )
                    figures["nothing new"].append(
                        per_request(
                            pid, sock, [full_fetch(args.partitions, args.records)] * args.requests
                        )
                    )
                    incremental = []
                    for _ in range(args.requests):
                        incremental.append(
                            FetchRequest(
                                max_wait_ms=0,
                                min_bytes=0,
                                session_id=session_id,
                                session_epoch=epoch,
                                topics=[],
                            )
                        )
                        epoch += 1
                    figures["idle session"].append(per_request(pid, sock, incremental))
        finally:
            broker.stop()
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    figures = measure(args)
    load = os.getloadavg()[0]
    print(
        f"{args.partitions} partitions of {args.records} x {args.size} B records, "
        f"{args.requests} Fetch requests a pass, {args.repeat} passes, load average {load:.1f}:"
    )
    for kind in KINDS:
        median = statistics.median(figures[kind])
        runs = ", ".join(f"{v:.0f}" for v in figures[kind])
        print(
            f"  {kind:13s} {median:9.0f} µs/request {median / args.partitions:7.2f} µs/partition"
            f"  (passes: {runs})"
        )


if __name__ == "__main__":
    main()
