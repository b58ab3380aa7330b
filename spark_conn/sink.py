"""Writing DataFrames to topics: the batch and streaming writers of the ``kbroker`` format.

The rows follow the columns of Spark's Kafka sink: ``value`` (required, string or binary),
``key`` (optional, string or binary), ``topic`` (required unless the ``topic`` option is
given, which then wins), ``partition`` (optional int) and ``headers`` (optional
``array<struct<key: string, value: binary>>``). Without a partition, a keyed record goes
where Kafka's default partitioner puts it (murmur2 of the key, so Java producers and this
sink agree), and records without a key stick to one partition per batch (KIP-480's sticky
idea).

Each task writes its rows through an idempotent producer (``kbroker.data_client``), batches
of up to ``BATCH_RECORDS`` records per partition. Like Spark's Kafka sink, this is
at-least-once: a task or micro-batch that Spark runs again writes its rows again.

With the ``kafka.transactional.id`` option (a prefix naming the query) the sink is
exactly-once instead, by a two-phase commit over Kafka transactions:

- each task of micro-batch B writes its rows inside a transaction of its own, with the
  transactional id ``<prefix>-<B>-<task partition>``, and leaves it open, returning its
  handle (``kbroker.transactional_producer``); InitProducerId first aborts whatever an
  earlier attempt of the same task left open;
- once every task has written, the driver commits all the transactions (EndTxn), or aborts
  them when Spark aborts the batch;
- a micro-batch that Spark runs again after a failure (its offsets were logged, its commit
  was not) finds, per task, whether that transaction was already committed (a commit the
  driver finished before it failed) and then writes nothing again.

Consumers read the topic with ``read_committed``. A transaction stays open from the task's
first write until the driver's commit, at most ``kafka.transaction.timeout.ms`` (default
60000; the broker's ``transaction.max.timeout.ms`` bounds it). Re-runs must give each task the
same rows (Spark does for a micro-batch over the same offsets, without speculation). Batch
writes (``df.write``) use one random id in place of the batch number: all tasks' records
become visible together, or none.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from kbroker.client_core.partitioner import partition_for_key
from kbroker.client_core.security import PLAINTEXT, SecurityConfig
from kbroker.data_client import DataClient
from kbroker.transactional_producer import (
    TransactionalProducer,
    TransactionHandle,
    end_transaction,
    transaction_state,
)
from spark_conn.avro_columns import AvroEncoder, RegistryLookup
from spark_conn.options import (
    OptionError,
    bootstrap_of,
    registry_of,
    security_of,
    value_format_of,
)
from wire.errors import KafkaError
from wire.records.record import Record

BATCH_RECORDS = 1000
BATCH_BYTES = 512 * 1024
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
# The local property Spark sets to the micro-batch being run (MicroBatchExecution).
BATCH_ID_PROPERTY = "streaming.sql.batchId"
# States in which a transaction's commit is decided: a re-run must not write it again.
_COMMITTED_STATES = ("PrepareCommit", "CompleteCommit")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SinkPlan:
    """What a write task needs: where to write and which row positions hold which column."""

    bootstrap: str
    topic: str | None
    columns: Mapping[str, int]
    # The exactly-once mode's prefix of transactional ids (None: at-least-once).
    transactional_id: str | None = None
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    security: SecurityConfig = PLAINTEXT
    # valueFormat=avro: the struct value column is encoded with this schema (the value
    # subject's latest version when the write was planned), framed with its id.
    value_encoder: AvroEncoder | None = None


@dataclass
class WriteSummary(WriterCommitMessage):
    """Sent back from each task: how many records it wrote to each topic, and in the
    exactly-once mode the transaction holding them, for the driver to end."""

    records: dict[str, int]
    transaction: TransactionHandle | None = None


def plan_sink(options: Mapping[str, str], schema: StructType) -> SinkPlan:
    """Check the DataFrame's columns against what the sink accepts (OptionError if not)."""
    lowered = {k.lower(): v for k, v in options.items() if v is not None}
    names = [f.name.lower() for f in schema.fields]
    types = {f.name.lower(): f.dataType for f in schema.fields}
    topic = lowered.get("topic") or None
    if "value" not in types:
        raise OptionError("the DataFrame to write needs a value column")
    if topic is None and "topic" not in types:
        raise OptionError("give the topic option or a topic column")
    encoder = None
    if value_format_of(lowered) == "avro":
        registry = registry_of(lowered)
        subject = lowered.get("valuesubject") or (f"{topic}-value" if topic else None)
        if subject is None:
            raise OptionError("valueFormat=avro without the topic option needs valueSubject")
        if not isinstance(types["value"], StructType):
            raise OptionError("valueFormat=avro writes a struct value column")
        lookup = RegistryLookup(registry.url, registry.user_info)
        schema_id, schema = lookup.latest(subject)
        encoder = AvroEncoder(schema_id, schema, types["value"])
    expected: dict[str, tuple[type, ...]] = {
        "value": (StructType,) if encoder is not None else (StringType, BinaryType),
        "key": (StringType, BinaryType),
        "topic": (StringType,),
        "partition": (IntegerType,),
        "headers": (ArrayType,),
    }
    for name, allowed in expected.items():
        if name in types and not isinstance(types[name], allowed):
            raise OptionError(f"column {name} cannot be {types[name].simpleString()}")
    columns = {name: names.index(name) for name in expected if name in types}
    transactional_id = (lowered.get("kafka.transactional.id") or "").strip() or None
    try:
        timeout_ms = int(
            lowered.get("kafka.transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
        )
    except ValueError as exc:
        raise OptionError("kafka.transaction.timeout.ms must be milliseconds") from exc
    if timeout_ms <= 0:
        raise OptionError("kafka.transaction.timeout.ms must be positive")
    return SinkPlan(
        bootstrap=bootstrap_of(lowered),
        topic=topic,
        columns=columns,
        transactional_id=transactional_id,
        transaction_timeout_ms=timeout_ms,
        security=security_of(lowered),
        value_encoder=encoder,
    )


def _bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class _TaskWriter:
    """Buffers one task's records per partition and produces them in batches."""

    def __init__(
        self, plan: SinkPlan, client: DataClient, producer: TransactionalProducer | None = None
    ) -> None:
        self._plan = plan
        self._client = client
        self._producer = producer
        self._partitions: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        self._buffers: dict[tuple[str, int], list[Record]] = {}
        self._sizes: dict[tuple[str, int], int] = {}
        self.written: dict[str, int] = {}

    def _count(self, topic: str) -> int:
        if topic not in self._partitions:
            found = self._client.metadata([topic])
            if topic not in found:
                raise OptionError(f"topic {topic!r} does not exist")
            self._partitions[topic] = len(found[topic])
        return self._partitions[topic]

    def add(self, row: Row) -> None:
        columns = self._plan.columns
        topic = self._plan.topic or row[columns["topic"]]
        if topic is None:
            raise ValueError("a row has a null topic and no topic option is set")
        key = _bytes(row[columns["key"]]) if "key" in columns else None
        encoder = self._plan.value_encoder
        raw = row[columns["value"]]
        value = _bytes(raw) if encoder is None else encoder.encode(raw)
        headers = []
        if "headers" in columns and row[columns["headers"]] is not None:
            headers = [(h[0], _bytes(h[1])) for h in row[columns["headers"]]]
        partition = row[columns["partition"]] if "partition" in columns else None
        count = self._count(topic)
        if partition is not None and not 0 <= partition < count:
            raise ValueError(f"topic {topic!r} has no partition {partition}")
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, count)
            else:
                partition = self._sticky.setdefault(topic, random.randrange(count))
        tp = (topic, int(partition))
        # CreateTime is when the row is written, as the Java producer stamps it.
        record = Record(
            offset=0, timestamp=int(time.time() * 1000), key=key, value=value, headers=headers
        )
        self._buffers.setdefault(tp, []).append(record)
        self._sizes[tp] = self._sizes.get(tp, 0) + len(key or b"") + len(value or b"")
        if len(self._buffers[tp]) >= BATCH_RECORDS or self._sizes[tp] >= BATCH_BYTES:
            self._flush(tp)

    def _flush(self, tp: tuple[str, int]) -> None:
        records = self._buffers.pop(tp, [])
        self._sizes.pop(tp, None)
        if not records:
            return
        if self._producer is not None:
            self._producer.produce(tp, records)
        else:
            self._client.produce(tp, records)
        self.written[tp[0]] = self.written.get(tp[0], 0) + len(records)
        if self._sticky.get(tp[0]) == tp[1]:
            # A full batch went out: later keyless records move to another partition.
            self._sticky[tp[0]] = random.randrange(self._count(tp[0]))

    def flush_all(self) -> None:
        for tp in list(self._buffers):
            self._flush(tp)


def write_rows(plan: SinkPlan, rows: Iterator[Row], batch: str | None = None) -> WriteSummary:
    """Write every row of one task; returns once the broker acknowledged all of them. In the
    exactly-once mode (`batch` names the micro-batch or the batch write) the records stay in
    an open transaction, ended by the driver."""
    with DataClient(
        plan.bootstrap, client_id="kbroker-spark-writer", security=plan.security
    ) as client:
        if plan.transactional_id is None or batch is None:
            writer = _TaskWriter(plan, client)
            for row in rows:
                writer.add(row)
            writer.flush_all()
            return WriteSummary(records=writer.written)
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        transactional_id = f"{plan.transactional_id}-{batch}-{partition}"
        if transaction_state(client, transactional_id) in _COMMITTED_STATES:
            # A re-run of a batch whose commit the driver finished before it failed.
            return WriteSummary(records={})
        producer = TransactionalProducer(client, transactional_id, plan.transaction_timeout_ms)
        producer.init()
        writer = _TaskWriter(plan, client, producer)
        for row in rows:
            writer.add(row)
        writer.flush_all()
        handle = producer.handle if producer.partitions else None
        return WriteSummary(records=writer.written, transaction=handle)


def end_transactions(
    plan: SinkPlan, messages: list[WriterCommitMessage | None], commit: bool
) -> None:
    """The driver's half of the exactly-once mode: end every task's transaction. An abort
    is best effort (what it cannot reach, the transaction timeout aborts)."""
    handles = [m.transaction for m in messages if isinstance(m, WriteSummary) and m.transaction]
    if not handles:
        return
    with DataClient(plan.bootstrap, client_id="kbroker-spark-committer") as client:
        for handle in handles:
            try:
                end_transaction(client, handle, commit)
            except (KafkaError, OSError) as exc:
                if commit:
                    raise
                log.warning("could not abort %s: %s", handle.transactional_id, exc)


class BatchWriter(DataSourceWriter):
    """``df.write.format("kbroker")``: append-only; overwrite is refused by the caller."""

    def __init__(self, plan: SinkPlan) -> None:
        self._plan = plan
        # Names this write's transactions in the exactly-once mode (made on the driver).
        self._write_id = uuid.uuid4().hex[:12]

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        """Write one task's rows (runs on an executor)."""
        return write_rows(self._plan, iterator, self._write_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit the tasks' transactions (exactly-once mode); otherwise each task's records
        were acknowledged when it returned."""
        end_transactions(self._plan, messages, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Abort the tasks' transactions (exactly-once mode); otherwise records already
        acknowledged stay in the log (at-least-once, as Spark's sink)."""
        end_transactions(self._plan, messages, commit=False)


class StreamWriter(DataSourceStreamWriter):
    """``df.writeStream.format("kbroker")``: each micro-batch's rows appended to the topics."""

    def __init__(self, plan: SinkPlan) -> None:
        self._plan = plan

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        """Write one task's rows of a micro-batch (runs on an executor)."""
        context = TaskContext.get()
        batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
        return write_rows(self._plan, iterator, batch)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commit the micro-batch's transactions (exactly-once mode); otherwise each task's
        records were acknowledged when it returned."""
        end_transactions(self._plan, messages, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Abort the micro-batch's transactions (exactly-once mode); otherwise records
        already acknowledged stay in the log (at-least-once, as Spark's sink)."""
        end_transactions(self._plan, messages, commit=False)
