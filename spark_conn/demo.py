"""``python -m spark_conn.demo``: generate page views, run the windowed count, print a summary.

Each run appends ``--events`` page views to the source topic, continuing the simulated
clock from the newest event already there (one event every 500 ms of event time, a few
seconds out of order, about one in a hundred minutes late so that the watermark drops it),
then runs the pipeline (``spark_conn.pipeline``) over everything not yet processed
according to its checkpoint, and prints what this run did and the counts so far.

Files under ``--work-dir`` (default ``.spark-demo``): ``checkpoint/`` (Spark's offsets,
commits and window state) and ``counts/`` (the Parquet output). Delete the directory to
start over; the topics keep their records.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kbroker.client_core.partitioner import partition_for_key
from kbroker.data_client import LATEST, DataClient
from spark_conn.pipeline import PipelineConfig, read_counts, start
from wire.records.record import Record

PAGES = ["/home", "/search", "/product", "/cart", "/checkout", "/help"]
# How often each page is viewed, roughly: most visits start at home and few end in checkout.
PAGE_WEIGHTS = [40, 25, 18, 9, 5, 3]
USERS = [f"user{n:02d}" for n in range(20)]
EVENT_SPACING_MS = 500
MAX_DISORDER_MS = 5_000
LATE_EVENT_MS = 120_000
LATE_EVERY = 97
SHOWN_WINDOWS = 5


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def last_event_time(client: DataClient, topic: str) -> tuple[int | None, int]:
    """The newest event time among the last record of each partition, and how many
    records the topic holds."""
    partitions = client.metadata([topic]).get(topic, [])
    ends = client.list_offsets([(topic, p) for p in partitions], LATEST) if partitions else {}
    newest: int | None = None
    for tp, end in ends.items():
        if end == 0:
            continue
        for record in client.fetch(tp, end - 1).records:
            newest = record.timestamp if newest is None else max(newest, record.timestamp)
    return newest, sum(ends.values())


def generate(client: DataClient, topic: str, partitions: int, count: int) -> tuple[int, int]:
    """Produce ``count`` page views keyed by user; returns the event-time span (ms)."""
    newest, existing = last_event_time(client, topic)
    if newest is None:
        now = datetime.now(UTC).timestamp() * 1000
        first = int(now // 60_000 * 60_000)
    else:
        first = newest + EVENT_SPACING_MS
    rng = random.Random(existing)
    by_partition: dict[int, list[Record]] = {}
    for i in range(count):
        ts = first + i * EVENT_SPACING_MS - rng.randrange(MAX_DISORDER_MS)
        if i % LATE_EVERY == LATE_EVERY - 1:
            ts -= LATE_EVENT_MS
        user = rng.choice(USERS)
        page = rng.choices(PAGES, PAGE_WEIGHTS)[0]
        value = json.dumps({"user": user, "page": page, "ts": ts}).encode()
        key = user.encode()
        record = Record(offset=0, timestamp=ts, key=key, value=value)
        by_partition.setdefault(partition_for_key(key, partitions), []).append(record)
    for partition, records in sorted(by_partition.items()):
        client.produce((topic, partition), records)
    return first, first + (count - 1) * EVENT_SPACING_MS


def summarize(progress: list[dict[str, Any]], counts: Any, config: PipelineConfig) -> list[str]:
    """The lines printed after a run: this run's micro-batches and the counts so far."""
    lines: list[str] = []
    batches = [p for p in progress if p.get("batchId") is not None]
    read = sum(int(p.get("numInputRows", 0)) for p in batches)
    dropped = sum(
        int(op.get("numRowsDroppedByWatermark", 0))
        for p in batches
        for op in p.get("stateOperators", [])
    )
    if batches:
        ids = sorted({int(p["batchId"]) for p in batches})
        end = batches[-1]["sources"][0]["endOffset"]
        # Progress reports carry a source's offsets as the JSON text it gave Spark.
        end = json.loads(end) if isinstance(end, str) else end
        lines.append(
            f"micro-batches this run: {len(ids)} (ids {ids[0]}..{ids[-1]}), events read: {read}, "
            f"dropped as late by the watermark: {dropped}"
        )
        lines.append(f"checkpointed source offsets: {json.dumps(end, sort_keys=True)}")
        watermark = batches[-1].get("eventTime", {}).get("watermark")
        if watermark:
            lines.append(f"watermark now: {watermark}")
    else:
        lines.append("micro-batches this run: 0 (nothing new in the topic)")
    if counts is None:
        lines.append("no window is final yet")
        return lines
    rows = counts.orderBy("window_start", "page").collect()
    newest_batch = max(int(r.batch_id) for r in rows)
    this_run = {int(p["batchId"]) for p in batches}
    fresh = [r for r in rows if int(r.batch_id) in this_run]
    windows = sorted({r.window_start for r in rows})
    lines.append(
        f"final windows: {len(windows)} in {config.output_dir} (latest micro-batch "
        f"{newest_batch}); window counts written this run: {len(fresh)}"
    )
    if len(windows) > SHOWN_WINDOWS:
        lines.append(f"  (the last {SHOWN_WINDOWS} of them)")
    by_window: dict[Any, list[Any]] = {}
    for r in rows:
        by_window.setdefault((r.window_start, r.window_end), []).append(r)
    for (begin, end), window_rows in sorted(by_window.items())[-SHOWN_WINDOWS:]:
        views = "  ".join(
            f"{r.page} {r.views}" for r in sorted(window_rows, key=lambda r: -int(r.views))
        )
        lines.append(f"  {begin:%H:%M}-{end:%H:%M}  {views}")
    totals: dict[str, int] = {}
    for r in rows:
        totals[r.page] = totals.get(r.page, 0) + int(r.views)
    top = sorted(totals.items(), key=lambda kv: -kv[1])
    lines.append("views per page over final windows: " + ", ".join(f"{p} {n}" for p, n in top))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Generate, run the pipeline once over what is new, print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KBROKER_BOOTSTRAP", "127.0.0.1:9092")
    )
    parser.add_argument("--events", type=int, default=600)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--work-dir", default=".spark-demo")
    parser.add_argument("--source-topic", default="page-views")
    parser.add_argument("--result-topic", default="page-view-counts")
    parser.add_argument(
        "--format",
        choices=["kbroker", "kafka"],
        default="kbroker",
        help="kafka needs Spark's connector ($KBROKER_SPARK_KAFKA_JARS or --packages)",
    )
    parser.add_argument(
        "--packages",
        action="store_true",
        help="let Spark fetch its Kafka connector from Maven (spark.jars.packages)",
    )
    args = parser.parse_args(argv)

    work = Path(args.work_dir).resolve()
    config = PipelineConfig(
        bootstrap=args.bootstrap,
        output_dir=str(work / "counts"),
        checkpoint_dir=str(work / "checkpoint"),
        source_topic=args.source_topic,
        result_topic=args.result_topic,
        source_format=args.format,
        sink_format=args.format,
    )
    with DataClient(args.bootstrap, client_id="kbroker-spark-demo") as client:
        client.create_topics({args.source_topic: args.partitions, args.result_topic: 1})
        partitions = len(client.metadata([args.source_topic])[args.source_topic])
        first, last = generate(client, args.source_topic, partitions, args.events)
    print(f"kbroker spark demo: broker {args.bootstrap}, format {args.format}, work dir {work}")
    print(
        f"generated {args.events} page views on {args.source_topic} "
        f"(event time {_iso(first)} .. {_iso(last)} UTC)"
    )
    sys.stdout.flush()

    import spark_conn
    from spark_conn.session import JARS_ENV, build_session, has_kafka_connector

    spark = build_session("kbroker-spark-demo", packages=args.packages)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if args.format == "kafka" and not has_kafka_connector(spark):
            print(
                f"format kafka needs Spark's Kafka connector: set {JARS_ENV} to its jars or "
                "pass --packages",
                file=sys.stderr,
            )
            return 2
        spark_conn.register(spark)
        query = start(spark, config)
        query.awaitTermination()
        if query.exception() is not None:
            print(f"query failed: {query.exception()}", file=sys.stderr)
            return 1
        for line in summarize(query.recentProgress, read_counts(spark, config.output_dir), config):
            print(line)
        with DataClient(args.bootstrap, client_id="kbroker-spark-demo") as client:
            ends = client.list_offsets([(args.result_topic, 0)], LATEST)
        print(f"records on {args.result_topic}: {sum(ends.values())}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
