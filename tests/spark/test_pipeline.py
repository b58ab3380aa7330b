"""The page-view pipeline end to end: windows, watermark, both outputs, restart, and what
its source read per window (the Spark tier of ``kbroker audit``)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kbroker.cli.ops.admin import parse_bootstrap
from kbroker.cli.ops.audit import read_audit
from kbroker.client import KafkaClient
from kbroker.data_client import DataClient
from spark_conn.pipeline import PipelineConfig, read_counts, start
from tests.spark.helpers import make_topic
from wire.records.record import Record

pytestmark = pytest.mark.slow

MINUTE = 60_000
BASE = 1_800_000_000_000 // MINUTE * MINUTE
PAGES = ["/a", "/b", "/c"]


def _views(bootstrap: str, topic: str, seconds: range) -> list[tuple[int, str]]:
    """One view every 3 s of event time, in two partitions; returns (ts, page)."""
    events = [(BASE + s * 1000, PAGES[(s // 3) % 3 if s % 2 else 0]) for s in seconds[::3]]
    with DataClient(bootstrap) as client:
        for partition in (0, 1):
            records = [
                Record(0, ts, b"u", json.dumps({"user": "u", "page": p, "ts": ts}).encode())
                for i, (ts, p) in enumerate(events)
                if i % 2 == partition
            ]
            client.produce((topic, partition), records)
    return events


def _expected(events: list[tuple[int, str]], windows: range) -> Counter[tuple[int, str]]:
    return Counter(
        (ts // MINUTE * MINUTE, page) for ts, page in events if (ts - BASE) // MINUTE in windows
    )


def _per_window(events: list[tuple[int, str]]) -> Counter[tuple[int, int]]:
    """Events per (partition, minute), spread over the partitions as ``_views`` does."""
    return Counter((i % 2, ts // MINUTE * MINUTE) for i, (ts, _) in enumerate(events))


def _run(spark: Any, config: PipelineConfig) -> list[dict[str, Any]]:
    query = start(spark, config)
    query.awaitTermination(180)
    assert query.exception() is None
    return query.recentProgress


def test_windowed_counts_restart_from_checkpoint(
    spark: Any, broker: Any, unique: str, tmp_path: Path
) -> None:
    config = PipelineConfig(
        bootstrap=broker.bootstrap,
        output_dir=str(tmp_path / "counts"),
        checkpoint_dir=str(tmp_path / "checkpoint"),
        source_topic=unique,
        result_topic=unique + "-counts",
        audit_topic=unique + "-read",
        audit_window_ms=MINUTE,
    )
    make_topic(broker.bootstrap, config.source_topic, 2)
    make_topic(broker.bootstrap, config.result_topic, 1)
    make_topic(broker.bootstrap, config.audit_topic, 1, {"cleanup.policy": "compact"})

    first = _views(broker.bootstrap, unique, range(0, 180))
    progress = _run(spark, config)
    assert sum(p["numInputRows"] for p in progress) == len(first)

    def written() -> Counter[tuple[int, str]]:
        counts = read_counts(spark, config.output_dir)
        assert counts is not None
        found: Counter[tuple[int, str]] = Counter()
        for r in counts.collect():
            key = (int(r.window_start.timestamp() * 1000), r.page)
            assert key not in found, f"window {key} written twice"
            found[key] = int(r.views)
        return found

    # Newest event at 177 s, watermark 30 s: the windows ending by 147 s are final.
    assert written() == _expected(first, range(0, 2))

    second = _views(broker.bootstrap, unique, range(180, 300))
    progress = _run(spark, config)
    # Only the new events are read; the third window's state came from the checkpoint.
    assert sum(p["numInputRows"] for p in progress) == len(second)
    assert written() == _expected(first + second, range(0, 4))

    topic = (
        spark.read.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", config.result_topic)
        .load()
        .collect()
    )
    from_topic = {bytes(r.key).decode(): json.loads(bytes(r.value))["views"] for r in topic}
    assert len(topic) == len(from_topic) == sum(1 for _ in written())
    assert sorted(from_topic.values()) == sorted(written().values())

    # What the source read, per partition and minute, over both runs (kbroker audit's tier).
    async def read_per_window() -> dict[tuple[int, int], int]:
        async with KafkaClient(parse_bootstrap(broker.bootstrap)) as client:
            counts, window_ms = await read_audit(client, config.audit_topic)
        assert window_ms == MINUTE
        return {(k.partition, k.window_start_ms): c.count for k, c in counts.items()}

    assert asyncio.run(read_per_window()) == _per_window(first) + _per_window(second)
