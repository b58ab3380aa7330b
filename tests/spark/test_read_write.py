"""Batch reads and writes of the ``kbroker`` format with a real SparkSession."""

from __future__ import annotations

from typing import Any

import pytest

from kbroker.data_client import DataClient
from tests.spark.helpers import BASE_TS, make_topic, produce_values

pytestmark = pytest.mark.slow


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kbroker").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_batch_read_equals_what_was_produced(spark: Any, broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 3)
    produced = produce_values(broker.bootstrap, unique, 3, 20)
    df = _read(spark, broker.bootstrap, subscribe=unique, includeHeaders="true")
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    # One input partition per topic partition.
    assert df.rdd.getNumPartitions() == 3
    rows = df.collect()
    assert {(r.partition, r.offset): bytes(r.value) for r in rows} == produced
    assert len(rows) == len(produced)
    first = next(r for r in rows if r.partition == 1 and r.offset == 0)
    assert (first.topic, bytes(first.key), first.timestampType) == (unique, b"k0", 0)
    assert int(first.timestamp.timestamp() * 1000) == BASE_TS
    assert [(h.key, bytes(h.value)) for h in first.headers] == [("n", b"0")]


def test_offset_bounds_timestamps_patterns_and_assign(spark: Any, broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 2)
    produce_values(broker.bootstrap, unique, 2, 10)

    def offsets(**options: str) -> list[tuple[int, int]]:
        df = _read(spark, broker.bootstrap, **options)
        return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())

    bounded = offsets(
        subscribe=unique,
        startingOffsets=f'{{"{unique}": {{"0": 3, "1": -2}}}}',
        endingOffsets=f'{{"{unique}": {{"0": 5, "1": -1}}}}',
    )
    assert bounded == [(0, 3), (0, 4)] + [(1, n) for n in range(10)]
    # Timestamps are BASE_TS + n: the first offset at or after BASE_TS + 7 is 7.
    assert offsets(subscribePattern=unique[:-1] + ".", startingTimestamp=str(BASE_TS + 7)) == [
        (p, n) for p in (0, 1) for n in (7, 8, 9)
    ]
    assert offsets(assign=f'{{"{unique}": [1]}}', endingOffsets="latest") == [
        (1, n) for n in range(10)
    ]
    with pytest.raises(Exception, match="no record at or after"):
        offsets(subscribe=unique, startingTimestamp=str(BASE_TS + 10_000))


def test_write_then_read_back(spark: Any, broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 3)
    rows = [(f"user{i}", f"view {i}", None if i % 5 else 2) for i in range(40)]
    df = spark.createDataFrame(rows, "key string, value string, partition int")
    df = df.selectExpr(
        "key",
        "value",
        "partition",
        "array(named_struct('key', 'src', 'value', binary(key))) as headers",
    )
    (
        df.write.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", unique)
        .mode("append")
        .save()
    )
    back = _read(spark, broker.bootstrap, subscribe=unique, includeHeaders="true").collect()
    assert sorted((bytes(r.key).decode(), bytes(r.value).decode()) for r in back) == sorted(
        (k, v) for k, v, _ in rows
    )
    from kbroker.client_core.partitioner import partition_for_key

    for r in back:
        key = bytes(r.key)
        number = int(key.decode()[4:])
        expected = 2 if number % 5 == 0 else partition_for_key(key, 3)
        assert r.partition == expected
        assert [(h.key, bytes(h.value)) for h in r.headers] == [("src", key)]
    # The topic column is used when there is no topic option.
    other = spark.createDataFrame([(unique, "via column")], "topic string, value string")
    other.write.format("kbroker").option("kafka.bootstrap.servers", broker.bootstrap).mode(
        "append"
    ).save()
    with DataClient(broker.bootstrap) as client:
        latest = client.list_offsets([(unique, p) for p in range(3)], -1)
    assert sum(latest.values()) == 41


def test_the_session_fetches_nothing_unless_asked(spark: Any) -> None:
    import os

    from spark_conn.session import JARS_ENV, has_kafka_connector

    assert spark.conf.get("spark.jars.packages", None) is None
    if not os.environ.get(JARS_ENV):
        assert not has_kafka_connector(spark)


def test_a_topic_that_does_not_exist_reads_as_empty(spark: Any, broker: Any, unique: str) -> None:
    assert _read(spark, broker.bootstrap, subscribe=unique + "-none").count() == 0


def test_writing_to_a_partition_that_does_not_exist_fails(
    spark: Any, broker: Any, unique: str
) -> None:
    make_topic(broker.bootstrap, unique, 2)
    df = spark.createDataFrame([("v", 2)], "value string, partition int")
    with pytest.raises(Exception, match="has no partition 2"):
        (
            df.write.format("kbroker")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", unique)
            .mode("append")
            .save()
        )


def test_read_committed_leaves_out_aborted_and_open_transactions(
    spark: Any, broker: Any, unique: str
) -> None:
    from confluent_kafka import Producer

    make_topic(broker.bootstrap, unique, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique})
    producer.init_transactions(30)
    for n, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(unique, value=b"%d-%d" % (n, i), partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    # A transaction left open: read_committed stops before it (the last stable offset).
    producer.begin_transaction()
    producer.produce(unique, value=b"open", partition=0)
    producer.flush(30)

    def values(**options: str) -> list[bytes]:
        df = _read(spark, broker.bootstrap, subscribe=unique, **options)
        return [bytes(r.value) for r in df.orderBy("offset").collect()]

    committed = values(**{"kafka.isolation.level": "read_committed"})
    assert committed == [b"0-0", b"0-1", b"0-2", b"2-0", b"2-1", b"2-2"]
    everything = values()
    assert everything == committed[:3] + [b"1-0", b"1-1", b"1-2"] + committed[3:] + [b"open"]
    producer.abort_transaction(30)
    with pytest.raises(Exception, match="kafka.isolation.level"):
        values(**{"kafka.isolation.level": "serializable"})


def test_transactional_batch_write(spark: Any, broker: Any, unique: str) -> None:
    """df.write with kafka.transactional.id: every task's records in a transaction the
    driver commits once all tasks wrote; nothing is left open or aborted."""
    make_topic(broker.bootstrap, unique, 2)
    rows = [(f"k{i}", f"v{i}") for i in range(40)]
    df = spark.createDataFrame(rows, ["key", "value"]).repartition(4)
    (
        df.write.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", unique)
        .option("kafka.transactional.id", unique)
        .mode("append")
        .save()
    )
    committed = _read(
        spark, broker.bootstrap, subscribe=unique, **{"kafka.isolation.level": "read_committed"}
    )
    assert sorted(bytes(r.value).decode() for r in committed.collect()) == sorted(
        v for _, v in rows
    )
    with DataClient(broker.bootstrap) as client:
        tps = [(unique, 0), (unique, 1)]
        # Each partition ends with commit markers: the last stable offset is the end.
        assert client.list_offsets(tps, -1, isolation_level=1) == client.list_offsets(tps, -1)
    with pytest.raises(Exception, match="kafka.transaction.timeout.ms"):
        (
            df.write.format("kbroker")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", unique)
            .option("kafka.transaction.timeout.ms", "soon")
            .mode("append")
            .save()
        )
