"""Produce, consume and group-consume throughput at 1, 64 and 1,000 partitions, 100 B and 1 KB
records, kbroker beside Kafka 4.3 (KRaft), Kafka 3.9 and Tansu, with librdkafka's
rdkafka_performance as the load generator (issue 30).

Each run starts one broker, and for every cell creates a topic of one replica and fills it
with rdkafka_performance -P (its msgs/s is the produce figure: records acknowledged per
second, librdkafka's default acks, linger.ms 5), then reads it all back twice: with the
simple consumer (-C, every partition, from the beginning) and with a high-level consumer
(-G, a group of one, auto.offset.reset earliest), each until it has every record. A figure
is the client's own msgs/s (its last statistics row); beside it the broker's CPU seconds per
GB and the generator's CPU in cores while it ran, so a cell where the client was the
bottleneck (close to one core: librdkafka's consumer hands records to one application
thread) is marked with `*` in the table. Brokers alternate run by run (the order rotates);
medians of `--repeat`; the load average at each cell is kept, since the machine may be
shared.

rdkafka_performance is librdkafka's examples/rdkafka_performance.c; build it against any
librdkafka 2.x (`gcc -O2 -I SRC rdkafka_performance.c -L LIB -lrdkafka -lpthread -lm`) and
pass `--perf PATH` (with `--lib DIR` when the library is not installed).

    .venv/bin/python bench/rdkafka_table.py --perf /tmp/rdkafka_performance --lib /tmp/lib
    .venv/bin/python bench/rdkafka_table.py --perf ... --brokers kbroker,kafka43 --modes group
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
MODES = ("produce", "consume", "group")
# Generator CPU above this many cores marks a figure as the client's limit.
CLIENT_BOUND_CORES = 0.9


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


def _measure(
    broker: brokers.BrokerUnderTest,
    command: list[str],
    env: dict[str, str],
    bytes_moved: int,
) -> dict[str, Any]:
    """Run the generator once: its msgs/s and count, the broker's CPU s/GB, its cores."""
    cpu_before = broker.cpu_seconds() or 0.0
    output, generator_cpu = run_generator(command, env)
    broker_cpu = (broker.cpu_seconds() or 0.0) - cpu_before
    row = last_statistics(output)
    elapsed_s = int(row[0]) / 1000
    producing = "-P" in command
    # Producer rows: elapsed, msgs, bytes, rtt, dr, dr_m/s, ...; consumer rows: elapsed,
    # msgs, bytes, rtt, m/s, ...
    count, rate = (int(row[4]), int(row[5])) if producing else (int(row[1]), int(row[4]))
    return {
        "count": count,
        "msgs_per_s": rate,
        "broker_cpu_s_per_gb": broker_cpu / (bytes_moved / 1e9),
        # CPU over its whole life (connecting, a group join) per second of its run: an upper
        # bound.
        "generator_cores": generator_cpu / elapsed_s if elapsed_s else None,
    }


def one_run(name: str, cells: list[tuple[int, int]], args: argparse.Namespace) -> list[dict]:
    env = dict(os.environ)
    if args.lib:
        env["LD_LIBRARY_PATH"] = args.lib
    results = []
    with brokers.STARTERS[name]() as broker:
        if name in ("kafka", "kafka43"):
            brokers.create_offsets_topic(broker.bootstrap)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for partitions, size in cells:
            count = RECORDS[size] if args.records is None else args.records
            topic = f"table-{partitions}-{size}-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(300)
            common = ["-t", topic, "-b", broker.bootstrap, "-c", str(count), "-u"]
            commands = {
                "produce": [
                    "-P",
                    "-s",
                    str(size),
                    "-X",
                    "linger.ms=5",
                    "-X",
                    "batch.num.messages=10000",
                ],
                "consume": ["-C", "-o", "beginning", "-e"]
                + [arg for p in range(partitions) for arg in ("-p", str(p))],
                "group": [
                    "-G",
                    f"bench-{uuid.uuid4().hex[:8]}",
                    "-e",
                    "-X",
                    "auto.offset.reset=earliest",
                ],
            }
            for mode in MODES:
                if mode != "produce" and mode not in args.modes:
                    continue
                measured = _measure(
                    broker, [args.perf, *commands[mode], *common], env, count * size
                )
                if measured["count"] != count:
                    raise RuntimeError(f"{name} {topic} {mode}: {measured['count']} of {count}")
                results.append(
                    {
                        "broker": name,
                        "mode": mode,
                        "partitions": partitions,
                        "size": size,
                        **measured,
                        "load": os.getloadavg()[0],
                    }
                )
                print(json.dumps(results[-1]), flush=True)
    return results


def table(runs: list[dict[str, Any]], names: list[str], modes: list[str]) -> str:
    heads = " | ".join(f"{n} msgs/s (CPU s/GB, gen cores)" for n in names)
    ratios = [n for n in names if n != "kbroker"] if "kbroker" in names else []
    lines = [
        f"| mode | partitions | size | {heads} |"
        + "".join(f" kbroker / {n} |" for n in ratios)
        + " load |",
        "| --- " * (4 + len(names) + len(ratios)) + "|",
    ]
    cells = sorted({(r["mode"], r["partitions"], r["size"]) for r in runs if r["mode"] in modes})
    cells.sort(key=lambda c: MODES.index(c[0]))
    for mode, partitions, size in cells:
        line = f"| {mode} | {partitions:,} | {size} B |"
        loads: list[float] = []
        rates: dict[str, float] = {}
        for name in names:
            mine = [
                r
                for r in runs
                if (r["broker"], r["mode"], r["partitions"], r["size"])
                == (name, mode, partitions, size)
            ]
            if not mine:
                line += " - |"
                continue
            rates[name] = statistics.median(r["msgs_per_s"] for r in mine)
            cpu = statistics.median(r["broker_cpu_s_per_gb"] for r in mine)
            cores = statistics.median(r["generator_cores"] or 0 for r in mine)
            mark = "*" if cores > CLIENT_BOUND_CORES else ""
            loads += [r["load"] for r in mine]
            line += f" {rates[name]:,.0f}{mark} ({cpu:.2f}, {cores:.2f}) |"
        for other in ratios:
            if "kbroker" in rates and rates.get(other):
                line += f" {rates['kbroker'] / rates[other]:.2f} |"
            else:
                line += " - |"
        lines.append(f"{line} {min(loads, default=0):.1f}-{max(loads, default=0):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--perf", required=True, help="rdkafka_performance binary")
    parser.add_argument("--lib", help="directory of the librdkafka it links (LD_LIBRARY_PATH)")
    parser.add_argument(
        "--brokers", type=brokers.broker_names, default="kbroker,kafka43,kafka,tansu"
    )
    parser.add_argument("--cells", default=CELLS, help="PARTITIONS:SIZE,... (default: all six)")
    parser.add_argument(
        "--modes", default=",".join(MODES), help="of produce,consume,group (produce always runs)"
    )
    parser.add_argument(
        "--records", type=int, help="records per cell (default 2M at 100 B, 500k at 1 KB)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args(argv)
    args.modes = args.modes.split(",")
    unknown = set(args.modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {', '.join(MODES)}")
    cells = [tuple(int(x) for x in cell.split(":")) for cell in args.cells.split(",")]
    names = args.brokers
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeat):
        # Rotate which broker goes first, so none always meets the same background.
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            runs += one_run(name, cells, args)  # type: ignore[arg-type]
            if args.json:
                args.json.write_text(json.dumps({"runs": runs}, indent=1))
    print(
        f"medians of {args.repeat} runs; * the generator used more than {CLIENT_BOUND_CORES} cores"
    )
    print(table(runs, names, ["produce", *args.modes]))


if __name__ == "__main__":
    main()
