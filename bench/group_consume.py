"""A consumer group reading a topic of 1, 64 or 1,000 partitions (100 B and 1 KB records),
kbroker beside Kafka 4.3 (KRaft), with librdkafka's rdkafka_performance as the load
generator (issue 30).

Each run starts one broker, and for every cell creates a topic, fills it with
rdkafka_performance -P, then reads it back with a high-level consumer (-G, a group of one,
auto.offset.reset earliest) until it has every record. A cell's figure is the consumer's own
msgs/s (its last statistics row); beside it the broker's CPU seconds per GB read, and the
generator's CPU in cores while it consumed, so a cell where the client was the bottleneck
(close to one core) shows as such. Brokers alternate run by run; medians of `--repeat`;
the load average at each cell is kept, since the machine may be shared.

rdkafka_performance is librdkafka's examples/rdkafka_performance.c; build it against any
librdkafka 2.x (`gcc -O2 -I SRC rdkafka_performance.c -L LIB -lrdkafka -lpthread -lm`) and
pass `--perf PATH` (with `--lib DIR` when the library is not installed).

    .venv/bin/python bench/group_consume.py --perf /tmp/rdkafka_performance --lib /tmp/lib
    .venv/bin/python bench/group_consume.py --perf ... --brokers kbroker --cells 1000:100
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import brokers  # noqa: E402

CELLS = "1:100,1:1000,64:100,64:1000,1000:100,1000:1000"
RECORDS = {100: 2_000_000, 1000: 500_000}
STARTERS = {"kbroker": brokers.start_kbroker, "kafka43": brokers.start_kafka43}


def run_generator(command: list[str], env: dict[str, str]) -> tuple[str, float]:
    """The generator's output and the CPU seconds it used."""
    before = os.times()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    after = os.times()
    if done.returncode != 0:
        raise RuntimeError(f"{command[:2]} failed: {done.stderr[-2000:]}")
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return done.stdout, cpu


def last_statistics(output: str) -> list[str]:
    """The last row of rdkafka_performance -u's table: elapsed ms, msgs, bytes, rtt, dr,
    msgs/s, MB/s, ..."""
    rows = [
        [cell.strip() for cell in line.split("|")[1:]]
        for line in output.splitlines()
        if line.startswith("|") and line.split("|")[1].strip().isdigit()
    ]
    if not rows:
        raise RuntimeError(f"no statistics in rdkafka_performance's output: {output[-2000:]}")
    return rows[-1]


def one_run(name: str, cells: list[tuple[int, int]], args: argparse.Namespace) -> list[dict]:
    env = dict(os.environ)
    if args.lib:
        env["LD_LIBRARY_PATH"] = args.lib
    results = []
    with STARTERS[name]() as broker:
        if name != "kbroker":
            brokers.create_offsets_topic(broker.bootstrap)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for partitions, size in cells:
            count = RECORDS[size] if args.records is None else args.records
            topic = f"group-consume-{partitions}-{size}-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(120)
            common = ["-t", topic, "-b", broker.bootstrap, "-c", str(count), "-u"]
            produce = ["-P", "-s", str(size), "-X", "linger.ms=5", "-X", "batch.num.messages=10000"]
            run_generator([args.perf, *produce, *common], env)
            cpu_before = broker.cpu_seconds() or 0.0
            group = [
                "-G",
                f"bench-{uuid.uuid4().hex[:8]}",
                "-e",
                "-X",
                "auto.offset.reset=earliest",
            ]
            output, generator_cpu = run_generator([args.perf, *group, *common], env)
            broker_cpu = (broker.cpu_seconds() or 0.0) - cpu_before
            row = last_statistics(output)
            elapsed_s, consumed, rate = int(row[0]) / 1000, int(row[1]), int(row[4])
            if consumed != count:
                raise RuntimeError(f"{name} {topic}: consumed {consumed} of {count}")
            results.append(
                {
                    "broker": name,
                    "partitions": partitions,
                    "size": size,
                    "msgs_per_s": rate,
                    "broker_cpu_s_per_gb": broker_cpu / (count * size / 1e9),
                    # CPU over its whole life (group join included) per second consuming: an
                    # upper bound.
                    "generator_cores": generator_cpu / elapsed_s if elapsed_s else None,
                    "load": os.getloadavg()[0],
                }
            )
            print(json.dumps(results[-1]), flush=True)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--perf", required=True, help="rdkafka_performance binary")
    parser.add_argument("--lib", help="directory of the librdkafka it links (LD_LIBRARY_PATH)")
    parser.add_argument("--brokers", default="kbroker,kafka43")
    parser.add_argument("--cells", default=CELLS, help="PARTITIONS:SIZE,... (default: all six)")
    parser.add_argument(
        "--records", type=int, help="records per cell (default 2M at 100 B, 500k at 1 KB)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args(argv)
    cells = [tuple(int(x) for x in cell.split(":")) for cell in args.cells.split(",")]
    names = args.brokers.split(",")
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeat):
        # Alternate which broker goes first, so neither always meets the same background.
        order = names if repeat % 2 == 0 else names[::-1]
        for name in order:
            runs += one_run(name, cells, args)  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps({"runs": runs}, indent=1))
    print(
        "| partitions | size | "
        + " | ".join(f"{n} msgs/s (CPU s/GB, gen cores)" for n in names)
        + " | load |"
    )
    print("| --- " * (3 + len(names)) + "|")
    for partitions, size in cells:
        line = f"| {partitions} | {size} B |"
        loads = []
        for name in names:
            mine = [
                r
                for r in runs
                if r["broker"] == name and (r["partitions"], r["size"]) == (partitions, size)
            ]
            rate = statistics.median(r["msgs_per_s"] for r in mine)
            cpu = statistics.median(r["broker_cpu_s_per_gb"] for r in mine)
            cores = statistics.median(r["generator_cores"] or 0 for r in mine)
            loads += [r["load"] for r in mine]
            line += f" {rate:,.0f} ({cpu:.2f}, {cores:.2f}) |"
        print(f"{line} {min(loads):.1f}-{max(loads):.1f} |")


if __name__ == "__main__":
    main()
