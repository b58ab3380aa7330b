"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10 4.0.0) against
kbroker, unchanged.

The connector needs PySpark 4.0.x: these tests are marked ``stock_connector`` and run in
.venv-spark40 (`make test`); see conftest.py for how they are selected and where the jars
come from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kbroker.data_client import DataClient
from spark_conn.session import has_kafka_connector
from tests.spark.helpers import BASE_TS, make_topic, produce_values

pytestmark = [pytest.mark.slow, pytest.mark.stock_connector]


@pytest.fixture
def kafka(spark: Any) -> Any:
    assert has_kafka_connector(spark), "Spark's Kafka connector did not load"
    return spark


def read_kafka(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def stream_from_earliest(spark: Any, bootstrap: str, topic: str) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def by_offset(rows: list[Any]) -> dict[tuple[int, int], bytes]:
    return {(r.partition, r.offset): bytes(r.value) for r in rows}


def test_stock_source_batch_read_equals_produced(kafka: Any, broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 3)
    produced = produce_values(broker.bootstrap, unique, 3, 15)
    rows = read_kafka(kafka, broker.bootstrap, unique, includeHeaders="true").collect()
    assert by_offset(rows) == produced and len(rows) == len(produced)
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("n", r.key[1:])] for r in rows)


def test_stock_source_min_partitions_splits_offset_ranges(
    kafka: Any, broker: Any, unique: str
) -> None:
    make_topic(broker.bootstrap, unique, 2)
    produced = produce_values(broker.bootstrap, unique, 2, 30)
    df = read_kafka(kafka, broker.bootstrap, unique, minPartitions="6")
    assert df.rdd.getNumPartitions() >= 6
    rows = df.collect()
    assert by_offset(rows) == produced and len(rows) == len(produced)


def test_stock_source_starting_offsets_by_timestamp(kafka: Any, broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 2)
    produced = produce_values(broker.bootstrap, unique, 2, 20)
    # Record n has CreateTime BASE_TS + n: the first offset at or after each timestamp.
    starts = {unique: {"0": BASE_TS + 5, "1": BASE_TS + 15}}
    rows = read_kafka(
        kafka, broker.bootstrap, unique, startingOffsetsByTimestamp=json.dumps(starts)
    ).collect()
    expected = {k: v for k, v in produced.items() if k[1] >= (5 if k[0] == 0 else 15)}
    assert by_offset(rows) == expected and len(rows) == len(expected)


def test_stock_source_several_segments_and_moved_log_start(
    kafka: Any, broker: Any, unique: str
) -> None:
    make_topic(broker.bootstrap, unique, 1, {"segment.bytes": "2048"})
    produced = produce_values(broker.bootstrap, unique, 1, 150)
    segments = list((broker.log_dir / f"{unique}-0").glob("*.log"))
    assert len(segments) >= 3, segments
    with DataClient(broker.bootstrap) as client:
        assert client.delete_records((unique, 0), 100) == 100
    expected = {k: v for k, v in produced.items() if k[1] >= 100}
    rows = read_kafka(kafka, broker.bootstrap, unique).collect()
    assert by_offset(rows) == expected and len(rows) == len(expected)
    # Offsets below the log start are gone: with failOnDataLoss=false Spark reads from it.
    below = json.dumps({unique: {"0": 10}})
    rows = read_kafka(
        kafka, broker.bootstrap, unique, startingOffsets=below, failOnDataLoss="false"
    ).collect()
    assert by_offset(rows) == expected and len(rows) == len(expected)


def test_stock_sink_write_then_read_back(kafka: Any, broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 2)
    df = kafka.createDataFrame([(f"k{i}", f"v{i}") for i in range(25)], "key string, value string")
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", unique)
        .save()
    )
    back = read_kafka(kafka, broker.bootstrap, unique).collect()
    assert sorted((bytes(r.key).decode(), bytes(r.value).decode()) for r in back) == sorted(
        (f"k{i}", f"v{i}") for i in range(25)
    )


def test_stock_streaming_restart_reads_only_new_data(
    kafka: Any, broker: Any, unique: str, tmp_path: Path
) -> None:
    make_topic(broker.bootstrap, unique, 2)
    first = produce_values(broker.bootstrap, unique, 2, 10)

    def run() -> int:
        query = (
            stream_from_earliest(kafka, broker.bootstrap, unique)
            .select("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        return sum(p["numInputRows"] for p in query.recentProgress)

    assert run() == len(first)
    second = produce_values(broker.bootstrap, unique, 2, 4, first=10)
    assert run() == len(second)
    rows = kafka.read.parquet(str(tmp_path / "out")).collect()
    assert by_offset(rows) == {**first, **second}


def test_stock_streaming_aggregation_to_kafka_restarts_from_checkpoint(
    kafka: Any, broker: Any, unique: str, tmp_path: Path
) -> None:
    counts_topic = f"{unique}-counts"
    make_topic(broker.bootstrap, unique, 2)
    make_topic(broker.bootstrap, counts_topic, 1)
    produce_values(broker.bootstrap, unique, 2, 10)  # keys k0..k9, once in each partition

    def run() -> None:
        query = (
            stream_from_earliest(kafka, broker.bootstrap, unique)
            .groupBy("key")
            .count()
            .selectExpr("key", "cast(count as string) as value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", counts_topic)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .outputMode("update")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None

    def emitted(after: int) -> list[tuple[str, int]]:
        rows = read_kafka(kafka, broker.bootstrap, counts_topic).collect()
        rows.sort(key=lambda r: r.offset)
        return [(bytes(r.key).decode(), int(bytes(r.value))) for r in rows if r.offset >= after]

    run()
    first = emitted(0)
    assert sorted(first) == [(f"k{n}", 2) for n in sorted(range(10), key=str)]
    produce_values(broker.bootstrap, unique, 2, 3, first=0)  # k0..k2 once more per partition
    run()
    # The restarted query keeps its state and offsets: only the keys that changed come out,
    # with counts over both runs.
    assert sorted(emitted(len(first))) == [("k0", 4), ("k1", 4), ("k2", 4)]
