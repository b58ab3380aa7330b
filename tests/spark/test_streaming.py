"""Streaming reads and writes of the ``kbroker`` format, checkpoints and crash recovery."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import REPO_ROOT
from tests.spark.helpers import make_topic, produce_values

pytestmark = pytest.mark.slow


def _stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("kbroker")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _copy_to_parquet(
    spark: Any, bootstrap: str, topic: str, out: Path, ckpt: Path, **opts: str
) -> list[dict[str, Any]]:
    """Run the copy query over everything available now; returns its progress reports."""
    query = (
        _stream(spark, bootstrap, topic, **opts)
        .select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    return query.recentProgress


def _copied(spark: Any, out: Path) -> list[tuple[int, int, bytes]]:
    rows = spark.read.parquet(str(out)).collect()
    return sorted((r.partition, r.offset, bytes(r.value)) for r in rows)


def test_restart_from_checkpoint_reads_only_new_data(
    spark: Any, broker: Any, unique: str, tmp_path: Path
) -> None:
    make_topic(broker.bootstrap, unique, 2)
    first = produce_values(broker.bootstrap, unique, 2, 12)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    progress = _copy_to_parquet(
        spark, broker.bootstrap, unique, out, ckpt, maxOffsetsPerTrigger="10"
    )
    # maxOffsetsPerTrigger: 24 records in micro-batches of at most 10.
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sizes == [10, 10, 4]
    assert _copied(spark, out) == sorted((p, o, v) for (p, o), v in first.items())

    second = produce_values(broker.bootstrap, unique, 2, 5, first=12)
    progress = _copy_to_parquet(spark, broker.bootstrap, unique, out, ckpt)
    assert sum(p["numInputRows"] for p in progress) == 10
    assert _copied(spark, out) == sorted((p, o, v) for (p, o), v in {**first, **second}.items())


def _batch_in_flight(ckpt: Path) -> bool:
    """A micro-batch after the first has its offsets logged but is not committed yet."""
    offsets = {int(p.name) for p in (ckpt / "offsets").glob("[0-9]*")}
    commits = {int(p.name) for p in (ckpt / "commits").glob("[0-9]*")}
    return bool(commits) and any(n not in commits and n > min(commits) for n in offsets)


def test_query_killed_mid_batch_restarts_without_duplicates_or_gaps(
    spark: Any, broker: Any, unique: str, tmp_path: Path
) -> None:
    make_topic(broker.bootstrap, unique, 2)
    produced = produce_values(broker.bootstrap, unique, 2, 30)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    log = tmp_path / "worker.log"
    with open(log, "wb") as stderr:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.spark.stream_worker",
                broker.bootstrap,
                unique,
                str(out),
                str(ckpt),
            ],
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": REPO_ROOT},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            # Its own process group: the JVM and Python workers die with it.
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 150
        while not _batch_in_flight(ckpt):
            assert worker.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the worker never got to a second micro-batch"
            time.sleep(0.05)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    assert _batch_in_flight(ckpt)
    before = _copied(spark, out)
    assert 0 < len(before) < len(produced)

    _copy_to_parquet(spark, broker.bootstrap, unique, out, ckpt, maxOffsetsPerTrigger="15")
    after = _copied(spark, out)
    assert len(after) == len(set(after)) == len(produced)
    assert after == sorted((p, o, v) for (p, o), v in produced.items())


def test_streaming_write_to_a_topic(spark: Any, broker: Any, unique: str, tmp_path: Path) -> None:
    source, sink = unique, unique + "-out"
    make_topic(broker.bootstrap, source, 2)
    make_topic(broker.bootstrap, sink, 1)
    produced = produce_values(broker.bootstrap, source, 2, 6)
    query = (
        _stream(spark, broker.bootstrap, source)
        .selectExpr("key", "upper(cast(value as string)) as value")
        .writeStream.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    back = (
        spark.read.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", sink)
        .load()
        .collect()
    )
    assert sorted(bytes(r.value) for r in back) == sorted(v.upper() for v in produced.values())
