"""Reading topics into Spark: the batch and streaming readers of the ``kbroker`` format.

The rows have the schema of Spark's Kafka source (``SOURCE_SCHEMA``; with
``includeHeaders=true`` a ``headers`` column follows; with ``valueFormat=avro`` the ``value``
column is a struct decoded through the schema registry, spark_conn/avro_columns.py). Planning
happens on the driver: one input partition per topic partition, holding the half-open offset
range [start, end) it reads. Each task reads its range through ``kbroker.data_client`` and
stops exactly at the end offset, so a micro-batch replayed after a crash reads exactly the same
records again (and, with ``auditTopic``, writes the same counts of them). The streaming
reader's offsets (the JSON of ``spark_conn.offsets``) are what Spark writes to the
checkpoint's ``offsets/`` log before a micro-batch runs and marks done in ``commits/`` after
it, which is how a restarted query continues where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kbroker.audit.counter import WindowCount, window_start
from kbroker.audit.records import WindowKey, encode_range_key, encode_value
from kbroker.data_client import (
    EARLIEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    DataClient,
    FetchedRecord,
)
from spark_conn.avro_columns import AvroDecoder, RegistryLookup
from spark_conn.offsets import DataLossError, OffsetReader, Offsets, from_json, rate_limit, to_json
from spark_conn.options import SourceOptions
from wire.errors import ErrorCode, KafkaError
from wire.records.record import Record

SOURCE_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
HEADERS_FIELD = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# How long one Fetch may wait at the broker for data that is not there yet.
_FETCH_WAIT_MS = 500


def source_schema(include_headers: bool, value_type: DataType | None = None) -> StructType:
    """The source's columns, with or without ``headers``; ``value`` typed ``value_type``
    (decoded Avro) instead of binary when given."""
    fields = list(SOURCE_SCHEMA.fields)
    if value_type is not None:
        fields[1] = StructField("value", value_type)
    if include_headers:
        fields.append(HEADERS_FIELD)
    return StructType(fields)


def with_reader_schema(options: SourceOptions) -> SourceOptions:
    """valueFormat=avro: the options with the reader schema (the value subject's latest
    version now) fixed, so every task decodes to the columns the query was planned with."""
    if options.registry is None or options.value_subject is None:
        return options
    lookup = RegistryLookup(options.registry.url, options.registry.user_info)
    schema_id, _ = lookup.latest(options.value_subject)
    return replace(options, reader_schema_id=schema_id)


def decoder_for(options: SourceOptions) -> AvroDecoder | None:
    if options.registry is None or options.reader_schema_id is None:
        return None
    lookup = RegistryLookup(options.registry.url, options.registry.user_info)
    return AvroDecoder(lookup, lookup.by_id(options.reader_schema_id))


@dataclass
class OffsetRange(InputPartition):
    """One topic partition's records [start, end) for one task."""

    topic: str
    partition: int
    start: int
    end: int


def _row(
    topic: str, partition: int, r: FetchedRecord, headers: bool, decoder: AvroDecoder | None
) -> tuple[Any, ...]:
    row: tuple[Any, ...] = (
        r.key,
        r.value if decoder is None else decoder.decode(r.value),
        topic,
        partition,
        r.offset,
        _EPOCH + timedelta(milliseconds=r.timestamp),
        r.timestamp_type,
    )
    if headers:
        row += ([(k, v) for k, v in r.headers],)
    return row


def read_range(options: SourceOptions, rng: OffsetRange) -> Iterator[tuple[Any, ...]]:
    """The rows of one range, in offset order. With ``auditTopic``, once the whole range was
    read, the counts of its records per window go to that topic (``RangeCounts``)."""
    decoder = decoder_for(options)
    with DataClient(
        options.bootstrap, client_id="kbroker-spark-reader", security=options.security
    ) as client:
        counts = None if options.audit_topic is None else RangeCounts(options.audit_window_ms)
        for record in _range_records(options, rng, client):
            if counts is not None:
                counts.add(record.offset, record.timestamp)
            yield _row(rng.topic, rng.partition, record, options.include_headers, decoder)
        if options.audit_topic is not None and counts is not None:
            records = counts.records(rng.topic, rng.partition, rng.start, rng.end)
            if records:
                client.produce((options.audit_topic, 0), records)


def _range_records(
    options: SourceOptions, rng: OffsetRange, client: DataClient
) -> Iterator[FetchedRecord]:
    """The records of one range. Records deleted from the log are a DataLossError unless
    failOnDataLoss=false, which skips them."""
    tp = (rng.topic, rng.partition)
    offset = rng.start
    timeout = options.poll_timeout_ms / 1000
    isolation = READ_COMMITTED if options.read_committed else READ_UNCOMMITTED
    deadline = time.monotonic() + timeout
    while offset < rng.end:
        try:
            result = client.fetch(tp, offset, max_wait_ms=_FETCH_WAIT_MS, isolation_level=isolation)
        except KafkaError as exc:
            if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise
            earliest = client.list_offsets([tp], EARLIEST)[tp]
            if options.fail_on_data_loss or earliest <= offset:
                raise DataLossError(
                    f"{rng.topic}-{rng.partition}: offset {offset} is no longer in the log "
                    f"(it starts at {earliest}); set failOnDataLoss=false to skip"
                ) from exc
            offset = earliest
            continue
        for record in result.records:
            if record.offset >= rng.end:
                return
            yield record
        if result.next_offset > offset:
            offset = result.next_offset
            deadline = time.monotonic() + timeout
        elif time.monotonic() > deadline:
            raise TimeoutError(
                f"{rng.topic}-{rng.partition}: no records at offset {offset} within "
                f"{options.poll_timeout_ms} ms though the range ends at {rng.end}"
            )


class RangeCounts:
    """The records one task read of its range, per window of record timestamps (the shape of
    the brokers' ``__audit`` counts, kbroker/audit/records.py)."""

    def __init__(self, window_ms: int) -> None:
        self._window_ms = window_ms
        self._windows: dict[int, WindowCount] = {}

    def add(self, offset: int, timestamp: int) -> None:
        window = window_start(timestamp, self._window_ms)
        one = WindowCount(1, offset, offset)
        known = self._windows.get(window)
        self._windows[window] = one if known is None else known.plus(one)

    def records(self, topic: str, partition: int, start: int, end: int) -> list[Record]:
        """One record per window, keyed by window and range [start, end): a task that reads
        the range again writes the same keys and values."""
        return [
            Record(
                0,
                -1,
                encode_range_key(WindowKey(topic, partition, window), start, end),
                encode_value(count, self._window_ms),
            )
            for window, count in sorted(self._windows.items())
        ]


def _ranges(start: Offsets, end: Offsets) -> list[OffsetRange]:
    return [OffsetRange(tp[0], tp[1], start[tp], end[tp]) for tp in sorted(end)]


class BatchReader(DataSourceReader):
    """``spark.read.format("kbroker")``: fixed bounds resolved when the query is planned."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options

    def partitions(self) -> Sequence[InputPartition]:
        """One OffsetRange per topic partition, bounds resolved now."""
        with DataClient(
            self._options.bootstrap,
            client_id="kbroker-spark-driver",
            security=self._options.security,
        ) as client:
            reader = OffsetReader(self._options, client)
            tps = reader.partitions()
            start = reader.resolve(self._options.starting, tps, "startingOffsets")
            end = reader.resolve(self._options.ending, tps, "endingOffsets")
        backwards = [tp for tp in tps if start[tp] > end[tp]]
        if backwards:
            raise ValueError(f"starting offsets are past the ending offsets in {backwards}")
        return _ranges(start, end)

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """The rows of one range (runs on an executor)."""
        if not isinstance(partition, OffsetRange):
            # No partition to read (no topic matched): Spark still runs one task, with an
            # InputPartition(None) of its own.
            return iter(())
        return read_range(self._options, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kbroker")``: offsets per partition, checkpointed by Spark."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._client: DataClient | None = None
        # Trigger.AvailableNow: the latest offsets when the query started; never read past.
        self._target: Offsets | None = None

    def _reader(self) -> OffsetReader:
        if self._client is None:
            self._client = DataClient(
                self._options.bootstrap,
                client_id="kbroker-spark-driver",
                security=self._options.security,
            )
        return OffsetReader(self._options, self._client)

    def _guarded(self, action: Any) -> Any:
        """Run ``action(reader)``; a failure drops the connection so the next call starts
        afresh (this object lives as long as the query)."""
        try:
            return action(self._reader())
        except BaseException:
            self.stop()
            raise

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: startingOffsets (or the timestamp options) resolved now."""

        def initial(reader: OffsetReader) -> Offsets:
            tps = reader.partitions()
            return reader.resolve(self._options.starting, tps, "startingOffsets")

        return to_json(self._guarded(initial))

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxOffsetsPerTrigger as Spark's read limit, or no limit."""
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the offsets that a Trigger.AvailableNow query reads up to."""
        self._target = self._guarded(lambda reader: reader.latest(reader.partitions()))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: latest offsets, capped by the limits."""

        def latest(reader: OffsetReader) -> Offsets:
            tps = reader.partitions()
            begun = from_json(start)
            # Partitions that appeared since (new topics of a pattern, added partitions) are
            # read from their beginning, as Spark's Kafka source does.
            base = {tp: begun[tp] for tp in tps if tp in begun}
            base.update(reader.earliest([tp for tp in tps if tp not in begun]))
            end = reader.latest(tps)
            if self._target is not None:
                end = {tp: min(end[tp], self._target.get(tp, base[tp])) for tp in tps}
            if isinstance(limit, ReadMaxRows):
                end = rate_limit(base, end, limit.max_rows)
            return end

        return to_json(self._guarded(latest))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One OffsetRange per topic partition of the micro-batch [start, end)."""
        begun, until = from_json(start), from_json(end)
        new = [tp for tp in until if tp not in begun]
        if new:
            begun.update(self._guarded(lambda reader: reader.earliest(new)))
        for tp, offset in until.items():
            if offset < begun[tp]:
                # The log ends before where the query got to: the topic was deleted and
                # created again, or its records were truncated.
                if self._options.fail_on_data_loss:
                    raise DataLossError(
                        f"{tp[0]}-{tp[1]}: the log ends at {offset}, before offset {begun[tp]} "
                        "the query already read; set failOnDataLoss=false to start it over"
                    )
                earliest = self._guarded(lambda reader, tp=tp: reader.earliest([tp]))[tp]
                begun[tp] = min(earliest, offset)
        return _ranges(begun, until)

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """The rows of one range (runs on an executor)."""
        assert isinstance(partition, OffsetRange)
        return read_range(self._options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in the broker."""

    def stop(self) -> None:
        """Close the driver's connection (the query ended)."""
        if self._client is not None:
            self._client.close()
            self._client = None
