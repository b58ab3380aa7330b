"""Event-loop stalls from storage work: partitions created and segments rolling (issue 30).

Starts one kbroker (this checkout's), creates a topic of `--partitions` partitions (each a new
directory, a segment, a leader-epoch checkpoint), then produces `--records` records of 1 KB
with kcat-like speed (confluent-kafka, acks=all) to a topic with segment.bytes `--segment-bytes`
(a roll every few milliseconds), and prints: the seconds CreateTopics took, the produce
throughput, and the event-loop stalls the broker logged (loop_stalls.py; the first of each
10 s and any longer one), split into those whose sampled place is storage code (fileio,
segment, partition_log, leader_epochs, producer_snapshot, checkpoints) and the others (mostly
the process waiting for a CPU on a shared machine). Run it from two checkouts to compare them;
the load average is printed beside the figures.

    .venv/bin/python bench/storage_stalls.py --partitions 300
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import brokers  # noqa: E402
import replicated  # noqa: E402

STALL = re.compile(r"event loop stalled (\d+) ms in (.*)")
STORAGE_PLACES = (
    "fileio.py",
    "segment.py",
    "partition_log.py",
    "leader_epochs.py",
    "producer_snapshot.py",
    "checkpoints.py",
    "log_manager.py",
)


def stalls(broker: brokers.BrokerUnderTest) -> list[tuple[int, str]]:
    assert broker.process is not None
    text = broker.process.stderr_path.read_text(errors="replace")
    return [(int(m.group(1)), m.group(2)) for m in STALL.finditer(text)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=300)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--segment-bytes", type=int, default=1 << 20)
    args = parser.parse_args(argv)
    with brokers.start_kbroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        many = f"many-{uuid.uuid4().hex[:8]}"
        started = time.monotonic()
        admin.create_topics([NewTopic(many, args.partitions, 1)])[many].result(600)
        created = time.monotonic() - started
        rolling = f"rolling-{uuid.uuid4().hex[:8]}"
        config = {"segment.bytes": str(args.segment_bytes)}
        admin.create_topics([NewTopic(rolling, 1, 1, config=config)])[rolling].result(60)
        seconds = replicated.produce(broker.bootstrap, rolling, args.records, 1024, "all", True)
        found = stalls(broker)
    storage = [(ms, where) for ms, where in found if any(p in where for p in STORAGE_PLACES)]
    result = {
        "kbroker": str(REPO_ROOT),
        "create_seconds": round(created, 2),
        "produce_msgs_per_s": round(args.records / seconds),
        "stalls_logged": len(found),
        "storage_stalls": len(storage),
        "longest_storage_stall_ms": max((ms for ms, _ in storage), default=0),
        "longest_stall_ms": max((ms for ms, _ in found), default=0),
        "storage_places": sorted({where.split(" < ")[0] for _, where in storage}),
        "load": os.getloadavg()[0],
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
