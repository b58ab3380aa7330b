"""Replicated produce throughput: a 3-broker kbroker cluster (ZooKeeper from Debian's package).

Starts a local cluster (tests/cluster/local_cluster.py) in a temporary directory unless
--bootstrap names a running one, creates one topic per case, and produces N fixed-size
records with a librdkafka (confluent-kafka) producer, measuring from the first send to the
last delivery report. Cases: replication factor 3 with acks=all (idempotent, min.insync=2),
replication factor 3 with acks=1, and replication factor 1 with acks=1 as the baseline.
Prints one line per case; --json FILE writes them as a list of objects
{"case", "replication_factor", "acks", "records", "record_size", "seconds", "msgs_per_s",
"mb_per_s"} (MB = 10^6 bytes of record values).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "cluster"))
sys.path.insert(0, str(REPO_ROOT))

from local_cluster import LocalCluster  # noqa: E402

CASES = [
    ("rf3-acks-all", 3, "all", True),
    ("rf3-acks-1", 3, "1", False),
    ("rf1-acks-1", 1, "1", False),
]


def create_topic(bootstrap: str, name: str, partitions: int, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, replication, config={"min.insync.replicas": "2"})]
    )
    futures[name].result(60)
    time.sleep(2)  # let followers join before measuring


def produce(
    bootstrap: str, topic: str, records: int, size: int, acks: str, idempotent: bool
) -> float:
    failures = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal failures
        failures += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "enable.idempotence": idempotent,
            "linger.ms": 5,
            "batch.size": 256 * 1024,
            "queue.buffering.max.messages": 200000,
            # Only failures call back into Python: a callback per record made this process,
            # not the brokers, the bottleneck (it used a whole core at ~350k records/s).
            "delivery.report.only.error": True,
            "on_delivery": delivered,
        }
    )
    value = b"x" * size
    start = time.perf_counter()
    sent = 0
    while sent < records:
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.01)
            continue
        sent += 1
        if sent % 10_000 == 0:
            producer.poll(0)
    undelivered = producer.flush(300)
    seconds = time.perf_counter() - start
    if failures or undelivered:
        raise RuntimeError(f"{failures} deliveries failed, {undelivered} never delivered")
    return seconds


def run(bootstrap: str, records: int, size: int, partitions: int) -> list[dict[str, Any]]:
    results = []
    for case, replication, acks, idempotent in CASES:
        topic = f"bench-{case}-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, partitions, replication)
        seconds = produce(bootstrap, topic, records, size, acks, idempotent)
        result = {
            "case": case,
            "replication_factor": replication,
            "acks": acks,
            "records": records,
            "record_size": size,
            "seconds": round(seconds, 3),
            "msgs_per_s": round(records / seconds),
            "mb_per_s": round(records * size / seconds / 1e6, 2),
        }
        print(
            f"{case:14} {result['msgs_per_s']:>9} msgs/s {result['mb_per_s']:>7} MB/s "
            f"({records} x {size} B in {seconds:.2f} s)",
            flush=True,
        )
        results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a running cluster (default: start one)")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.bootstrap:
        results = run(args.bootstrap, args.records, args.record_size, args.partitions)
    else:
        with tempfile.TemporaryDirectory(prefix="kbroker-bench-") as work:
            cluster = LocalCluster(Path(work), 3)
            cluster.start()
            try:
                results = run(cluster.bootstrap, args.records, args.record_size, args.partitions)
            finally:
                cluster.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
