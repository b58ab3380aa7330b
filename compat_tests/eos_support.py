"""What the exactly-once tests share (compat_tests/test_transactions.py and the cluster's
tests/cluster/test_txn_failover.py): reading a topic at an isolation level, the source topic's
committed positions, and starting compat_tests/eos_worker.py as its own process."""

from __future__ import annotations

import subprocess
import sys
import time

from confluent_kafka import Consumer, TopicPartition

from compat_tests.broker_process import REPO_ROOT

PARTITION_EOF = -191


def read_values(
    bootstrap: str, topic: str, partitions: int, isolation: str, expect: int
) -> list[bytes]:
    """Every record of `topic` visible at `isolation`, reading until `expect` arrived and the
    consumer is at the end of every partition (or 60 s pass)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (len(values) >= expect and len(at_end) == partitions):
        for m in consumer.consume(1000, timeout=0.5):
            if m.error() is None:
                values.append(m.value())
                at_end.discard(m.partition())
            elif m.error().code() == PARTITION_EOF:
                at_end.add(m.partition())
    consumer.close()
    return values


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets of `topic` (-1001 where there is none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    consumer.close()
    return [tp.offset for tp in offsets]


def end_offsets(total: int, partitions: int) -> list[int]:
    """Where each partition ends when `total` records were spread round-robin."""
    return [total // partitions + (1 if p < total % partitions else 0) for p in range(partitions)]


def start_worker(bootstrap: str, source: str, sink: str, total: int) -> subprocess.Popen[bytes]:
    """The exactly-once loop over `source` (group SOURCE-group, transactional id SOURCE-eos)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "compat_tests.eos_worker",
            bootstrap,
            source,
            sink,
            f"{source}-group",
            f"{source}-eos",
            str(total),
        ],
        cwd=REPO_ROOT,
    )
