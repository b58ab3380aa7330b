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


def _write_stream(
    spark: Any, broker: Any, source: str, sink: str, ckpt: Path, **sink_options: str
) -> None:
    """Copy `source` to `sink` in micro-batches of at most 10 records, everything available."""
    writer = (
        _stream(spark, broker.bootstrap, source, maxOffsetsPerTrigger="10")
        .selectExpr("key", "upper(cast(value as string)) as value")
        .writeStream.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(ckpt))
    )
    for name, value in sink_options.items():
        writer = writer.option(name, value)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination(180)
    assert query.exception() is None


def _sink_values(spark: Any, broker: Any, sink: str, isolation: str) -> list[bytes]:
    df = (
        spark.read.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", sink)
        .option("kafka.isolation.level", isolation)
        .load()
    )
    return sorted(bytes(r.value) for r in df.collect())


@pytest.mark.parametrize("exactly_once", [True, False], ids=["transactional", "at-least-once"])
def test_rerun_micro_batch_writes_once_with_transactions(
    spark: Any, broker: Any, unique: str, tmp_path: Path, exactly_once: bool
) -> None:
    """A micro-batch Spark runs again because its commit never reached the checkpoint (the
    driver died after the sink committed): the transactional sink finds its transactions
    committed and writes nothing again; the at-least-once sink duplicates the batch."""
    source, sink = unique, unique + "-out"
    make_topic(broker.bootstrap, source, 2)
    make_topic(broker.bootstrap, sink, 2)
    produced = produce_values(broker.bootstrap, source, 2, 10)
    expected = sorted(v.upper() for v in produced.values())
    ckpt = tmp_path / "ckpt"
    options = {"kafka.transactional.id": unique} if exactly_once else {}
    _write_stream(spark, broker, source, sink, ckpt, **options)
    assert _sink_values(spark, broker, sink, "read_committed") == expected
    # The second (last) micro-batch loses its commit: Spark runs it again.
    commits = ckpt / "commits"
    assert sorted(p.name for p in commits.iterdir() if p.name.isdigit()) == ["0", "1"]
    (commits / "1").unlink()
    (commits / ".1.crc").unlink(missing_ok=True)
    _write_stream(spark, broker, source, sink, ckpt, **options)
    assert sorted(p.name for p in commits.iterdir() if p.name.isdigit()) == ["0", "1"]
    again = _sink_values(spark, broker, sink, "read_committed")
    if exactly_once:
        assert again == expected
        assert _sink_values(spark, broker, sink, "read_uncommitted") == expected
    else:
        assert len(again) == len(expected) + 10
