"""End-to-end latency, produce to consume, kbroker beside Apache Kafka 4.3 (issue 30 item 3).

Two clients, each the same for both brokers:
- paced: a confluent-kafka (librdkafka) producer sends `--size`-byte records at a steady rate
  (`--rates`) with `--acks` to a new one-partition topic, each stamped with its send time; a
  consumer in another process (fetch.wait.max.ms 10) records the time to receipt
  (suite.measure_latency). p50 / p99 / p99.9 over `--seconds` of records per run.
- Kafka's own tool, `kafka-e2e-latency.sh` from Kafka 4.3 (its Java producer and consumer):
  one record at a time, each sent once the previous one was consumed; its p50 / p99 / p99.9
  of `--tool-records` round trips.

Brokers alternate run by run (the order flips each repeat), one fresh broker per run, and the
median of `--repeat` runs is kept per cell, after an unmeasured paced warm-up on each fresh
broker (`--warmup-seconds`), with the machine's load average (1 min) at each run beside it:
on a shared machine the load moves the tail more than anything else.
`--segment-bytes` sets segment.bytes on the paced topic of both brokers, so segments roll
during the measurement (1 KB at 10,000 msgs/s fills 1 MB ten times a second). For kbroker, the
event-loop stalls the broker logged during the run (loop_stalls.py) are counted and kept.
`--three-brokers` runs each broker as a cluster of three instead (kbroker with ZooKeeper,
Kafka 4.3 as three KRaft nodes, replication_compare.py's clusters) with the topic's
replication factor 3 and min.insync.replicas 2 (kafka-e2e-latency.sh is left out there: it
creates its topic with the default replication factor, 1). With acks=all there, give the
paced producer a linger (`--linger-ms 5`, librdkafka's default): with 0 it sends a request
of a few records as soon as the previous one left, both brokers handle a connection's
requests one at a time, each waiting for replication, and at 10,000 records/s both fell
seconds behind (p50 3-4 s on kbroker, 13 s on Kafka 4.3).

    .venv/bin/python bench/e2e_latency.py
    .venv/bin/python bench/e2e_latency.py --rates 1000,10000 --segment-bytes 1048576
    .venv/bin/python bench/e2e_latency.py --three-brokers --acks 1 --rates 10000,50000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import brokers  # noqa: E402
import replication_compare  # noqa: E402
import suite  # noqa: E402

from compat_tests.kafka_process import KAFKA43_BIN  # noqa: E402

TOOL = KAFKA43_BIN / "kafka-e2e-latency.sh"
TOOL_PERCENTILES = re.compile(r"50th = ([\d.]+), 99th = ([\d.]+), 99\.9th = ([\d.]+)")
STALL_LINE = "event loop stalled"


def kafka_tool_latency(bootstrap: str, records: int, acks: str, size: int) -> dict[str, float]:
    """p50 / p99 / p99.9 in ms of kafka-e2e-latency.sh's one-at-a-time round trips."""
    topic = f"e2e-tool-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [
            str(TOOL),
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--producer-acks",
            acks,
            "--record-size",
            str(size),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = TOOL_PERCENTILES.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(
            f"kafka-e2e-latency.sh failed: {done.stdout[-1500:]}{done.stderr[-1500:]}"
        )
    p50, p99, p999 = (float(x) for x in found.groups())
    return {"p50_ms": p50, "p99_ms": p99, "p999_ms": p999}


def stalls_logged(broker: brokers.BrokerUnderTest) -> list[str] | None:
    """The event-loop stalls a kbroker logged so far, one line each (None for another
    broker)."""
    if broker.name != "kbroker" or broker.process is None:
        return None
    path = broker.process.stderr_path
    if not path.exists():
        return []
    return [line for line in path.read_text(errors="replace").splitlines() if STALL_LINE in line]


@contextmanager
def started(name: str, three_brokers: bool) -> Iterator[brokers.BrokerUnderTest]:
    """One broker, or a cluster of three seen through its bootstrap list."""
    if not three_brokers:
        with brokers.STARTERS[name]() as broker:
            yield broker
        return
    with replication_compare.CLUSTERS[name]() as cluster:
        yield brokers.BrokerUnderTest(name, cluster.bootstrap)


def one_run(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    topic_config = {"segment.bytes": str(args.segment_bytes)} if args.segment_bytes else {}
    replication = 3 if args.three_brokers else 1
    if args.three_brokers:
        topic_config["min.insync.replicas"] = "2"
    with started(name, args.three_brokers) as broker:
        if args.warmup_seconds:
            # A fresh JVM compiles its hot paths during its first seconds of traffic (Kafka's
            # first measured second at 1,000 msgs/s had a p50 of seconds): both brokers get
            # the same unmeasured run first.
            suite.measure_latency(
                broker,
                min(args.rates),
                args.warmup_seconds,
                size=args.size,
                replication_factor=replication,
            )
        for rate in args.rates:
            stalls_before = stalls_logged(broker)
            result = suite.measure_latency(
                broker,
                rate,
                args.seconds,
                acks=args.acks,
                size=args.size,
                topic_config=topic_config or None,
                replication_factor=replication,
                linger_ms=args.linger_ms,
            )
            stalls_after = stalls_logged(broker)
            stalls = (
                None
                if stalls_after is None or stalls_before is None
                else stalls_after[len(stalls_before) :]
            )
            rows.append(
                {
                    "broker": name,
                    "client": "paced",
                    "rate": rate,
                    **{k: result[k] for k in ("p50_ms", "p99_ms", "p999_ms")},
                    # Logged: the first of every 10 s and any longer one (loop_stalls.py).
                    "stalls": None if stalls is None else len(stalls),
                    "stall_lines": stalls,
                    "load": os.getloadavg()[0],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        # The tool creates its own topic with the cluster's default replication factor (1).
        if args.tool_records and not args.three_brokers:
            result = kafka_tool_latency(broker.bootstrap, args.tool_records, args.acks, args.size)
            rows.append(
                {
                    "broker": name,
                    "client": "kafka-e2e-latency.sh",
                    "rate": None,
                    **result,
                    "stalls": None,
                    "load": os.getloadavg()[0],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def table(runs: list[dict[str, Any]], names: list[str]) -> str:
    lines = [
        "| client | rate msgs/s | "
        + " | ".join(f"{n} p50 / p99 / p99.9 ms (runs' p99)" for n in names)
        + " | load |",
        "| --- " * (3 + len(names)) + "|",
    ]
    cells = sorted(
        {(r["client"], r["rate"] or 0) for r in runs}, key=lambda c: (c[0] != "paced", c[1])
    )
    for client, rate in cells:
        line = f"| {client} | {rate:,} |" if rate else f"| {client} | one at a time |"
        loads = []
        for name in names:
            mine = [
                r
                for r in runs
                if (r["broker"], r["client"], r["rate"] or 0) == (name, client, rate)
            ]
            medians = [
                statistics.median(r[k] for r in mine) for k in ("p50_ms", "p99_ms", "p999_ms")
            ]
            each = ", ".join(f"{r['p99_ms']:.1f}" for r in mine)
            line += f" {medians[0]:.2f} / {medians[1]:.2f} / {medians[2]:.2f} ({each}) |"
            loads += [r["load"] for r in mine]
        lines.append(f"{line} {min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=brokers.broker_names, default="kbroker,kafka43")
    parser.add_argument("--rates", default="1000,10000", help="paced rates, msgs/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="paced seconds per rate")
    parser.add_argument("--acks", default="all")
    parser.add_argument(
        "--linger-ms",
        type=int,
        default=0,
        help="the paced producer's linger.ms (0: every record sent at once)",
    )
    parser.add_argument("--size", type=int, default=1024, help="record bytes")
    parser.add_argument("--segment-bytes", type=int, help="segment.bytes of the paced topic")
    parser.add_argument(
        "--three-brokers", action="store_true", help="clusters of three, replication factor 3"
    )
    parser.add_argument(
        "--warmup-seconds", type=float, default=5.0, help="unmeasured paced run first (0: none)"
    )
    parser.add_argument(
        "--tool-records", type=int, default=2000, help="kafka-e2e-latency.sh records (0: skip)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args(argv)
    args.rates = [int(r) for r in args.rates.split(",")]
    names = args.brokers
    runs: list[dict[str, Any]] = []
    started = time.monotonic()
    for repeat in range(args.repeat):
        order = names if repeat % 2 == 0 else names[::-1]
        for name in order:
            runs += one_run(name, args)
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args), "runs": runs}, indent=1, default=str))
    shape = "three brokers, RF 3, min ISR 2" if args.three_brokers else "one broker"
    print(
        f"{args.size} B, acks={args.acks}, {shape}, medians of {args.repeat} alternating runs "
        f"({time.monotonic() - started:.0f} s)"
    )
    print(table(runs, names))


if __name__ == "__main__":
    main()
