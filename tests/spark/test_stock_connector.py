"""Spark's own Kafka connector (``format("kafka")``) against kbroker, unchanged.

The connector jar is not part of PySpark and comes from Maven, which these machines cannot
reach, so these tests run only when $KBROKER_SPARK_KAFKA_JARS names the connector's jars
(spark-sql-kafka-0-10, kafka-clients, spark-token-provider-kafka, commons-pool2); the
session fixture then loads them through ``spark.jars``. Without it they are skipped with a
reason that says so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from spark_conn.session import JARS_ENV, has_kafka_connector, kafka_package
from tests.spark.helpers import make_topic, produce_values

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get(JARS_ENV),
        reason=(
            f"NOT RUN: {JARS_ENV} is not set, so Spark's Kafka connector "
            f"({kafka_package()}) is unavailable here (Maven cannot be reached); set it to the "
            "connector's jar files to run the stock-connector tests"
        ),
    ),
]


@pytest.fixture
def kafka(spark: Any) -> Any:
    assert has_kafka_connector(spark), f"{JARS_ENV} is set but the connector did not load"
    return spark


def test_stock_source_batch_read_equals_produced(kafka: Any, broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 3)
    produced = produce_values(broker.bootstrap, unique, 3, 15)
    df = (
        kafka.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique)
        .option("includeHeaders", "true")
        .load()
    )
    rows = df.collect()
    assert len(rows) == len(produced)
    assert {(r.partition, r.offset): bytes(r.value) for r in rows} == produced
    assert all([(h.key, bytes(h.value)) for h in r.headers] for r in rows)


def test_stock_sink_write_then_read_back(kafka: Any, broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 2)
    df = kafka.createDataFrame([(f"k{i}", f"v{i}") for i in range(25)], "key string, value string")
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", unique)
        .save()
    )
    back = (
        kafka.read.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique)
        .load()
        .collect()
    )
    assert sorted(bytes(r.value).decode() for r in back) == sorted(f"v{i}" for i in range(25))


def test_stock_streaming_restart_reads_only_new_data(
    kafka: Any, broker: Any, unique: str, tmp_path: Path
) -> None:
    make_topic(broker.bootstrap, unique, 2)
    first = produce_values(broker.bootstrap, unique, 2, 10)

    def run() -> int:
        query = (
            kafka.readStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", unique)
            .option("startingOffsets", "earliest")
            .load()
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
    assert {(r.partition, r.offset): bytes(r.value) for r in rows} == {**first, **second}
