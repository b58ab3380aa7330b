"""The readers' planning and task code against a real broker, called directly (no Spark)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kbroker.data_client import DataClient
from spark_conn.offsets import DataLossError
from spark_conn.options import OptionError, parse_source_options
from spark_conn.source import BatchReader, OffsetRange, StreamReader, read_range
from tests.spark.helpers import BASE_TS, make_topic, produce_values


def _options(broker: Any, streaming: bool, **options: str) -> Any:
    return parse_source_options(
        {"kafka.bootstrap.servers": broker.bootstrap, **options}, streaming=streaming
    )


def test_stream_reader_offsets_limits_and_new_topics(broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique + "-a", 2)
    produce_values(broker.bootstrap, unique + "-a", 2, 5)
    reader = StreamReader(_options(broker, True, subscribePattern=unique + "-.*"))
    start = reader.initialOffset()
    # startingOffsets defaults to latest in a streaming query.
    assert start == {unique + "-a": {"0": 5, "1": 5}}
    assert reader.latestOffset(start, ReadAllAvailable()) == start

    produce_values(broker.bootstrap, unique + "-a", 2, 4, first=5)
    make_topic(broker.bootstrap, unique + "-b", 1)
    produce_values(broker.bootstrap, unique + "-b", 1, 3)
    # A topic that appears later under the pattern is read from its beginning.
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {unique + "-a": {"0": 9, "1": 9}, unique + "-b": {"0": 3}}
    limited = reader.latestOffset(start, ReadMaxRows(5))
    taken = sum(limited[unique + "-a"][p] - start[unique + "-a"][p] for p in ("0", "1"))
    assert taken + limited[unique + "-b"]["0"] == 5
    ranges = reader.partitions(start, end)
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [
        (unique + "-a", 0, 5, 9),
        (unique + "-a", 1, 5, 9),
        (unique + "-b", 0, 0, 3),
    ]
    rows = list(reader.read(ranges[2]))
    assert [(r[2], r[3], r[4], r[1]) for r in rows] == [
        (unique + "-b", 0, n, f"p0-{n}".encode()) for n in range(3)
    ]

    # Trigger.AvailableNow: what arrives after the query started is left for later.
    reader.prepareForTriggerAvailableNow()
    produce_values(broker.bootstrap, unique + "-b", 1, 2, first=3)
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    reader.stop()


def test_data_loss_fails_or_skips(broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 1)
    produce_values(broker.bootstrap, unique, 1, 10)
    with DataClient(broker.bootstrap) as client:
        assert client.delete_records((unique, 0), 4) == 4
    rng = OffsetRange(unique, 0, 0, 10)
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        list(read_range(_options(broker, False, subscribe=unique), rng))
    lenient = _options(broker, False, subscribe=unique, failOnDataLoss="false")
    assert [r[4] for r in read_range(lenient, rng)] == list(range(4, 10))


def test_a_range_past_the_log_times_out(broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 1)
    produce_values(broker.bootstrap, unique, 1, 2)
    options = _options(broker, False, subscribe=unique, **{"kafkaConsumer.pollTimeoutMs": "300"})
    with pytest.raises(TimeoutError):
        list(read_range(options, OffsetRange(unique, 0, 0, 5)))


def test_starting_timestamp_strategies(broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 2)
    produce_values(broker.bootstrap, unique, 2, 6)
    late = str(BASE_TS + 100)
    with pytest.raises(OptionError, match="no record at or after"):
        BatchReader(_options(broker, False, subscribe=unique, startingTimestamp=late)).partitions()
    reader = BatchReader(
        _options(
            broker,
            False,
            subscribe=unique,
            startingTimestamp=late,
            startingOffsetsByTimestampStrategy="latest",
        )
    )
    assert [(r.start, r.end) for r in reader.partitions()] == [(6, 6), (6, 6)]
    by_partition = BatchReader(
        _options(
            broker,
            False,
            subscribe=unique,
            startingOffsetsByTimestamp=f'{{"{unique}": {{"0": {BASE_TS + 2}, "1": {BASE_TS}}}}}',
        )
    )
    assert [(r.start, r.end) for r in by_partition.partitions()] == [(2, 6), (0, 6)]
    with pytest.raises(OptionError, match="every partition"):
        BatchReader(
            _options(broker, False, subscribe=unique, startingOffsets=f'{{"{unique}": {{"0": 1}}}}')
        ).partitions()
