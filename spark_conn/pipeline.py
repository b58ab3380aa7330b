"""The page-view pipeline: views per page in event-time windows, from a topic to a topic and
Parquet, continuing from its checkpoint.

Input records (topic ``source_topic``): key = user, value = JSON
``{"user": str, "page": str, "ts": event time in ms}``.

The streaming query parses them, sets a watermark on the event time and counts views per
page per tumbling window. In append mode a window's count is emitted once, in the first
micro-batch after the watermark (latest event time seen minus ``watermark``) passes the
window's end; events older than the watermark are dropped. Each micro-batch's counts go to:

- Parquet under ``output_dir/batch_id=<n>/`` with columns window_start, window_end, page,
  views. A micro-batch that Spark runs again after a crash overwrites its own directory, so
  the files hold each window exactly once.
- The topic ``result_topic``: key ``<page>|<window start ISO>``, value the same row as
  JSON. A replayed micro-batch writes the same keys and values again (the Kafka sink is
  at-least-once), so consumers read the topic as a table keyed by window and page.

With ``audit_topic`` the source also writes how many records it read per topic, partition
and window of record timestamps there, the Spark tier of ``kbroker audit`` (kbroker/audit/).

Which source offsets each micro-batch covered, and the window state, live in the checkpoint
(``checkpoint_dir``): stopping the query and starting it again reads only what is new.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

from kbroker.audit.counter import DEFAULT_WINDOW_MS
from spark_conn import FORMAT

EVENT_SCHEMA = StructType(
    [
        StructField("user", StringType()),
        StructField("page", StringType()),
        StructField("ts", LongType()),
    ]
)
QUERY_NAME = "page_view_counts"


@dataclass(frozen=True)
class PipelineConfig:
    """Where the pipeline reads and writes, and its window and watermark."""

    bootstrap: str
    output_dir: str
    checkpoint_dir: str
    source_topic: str = "page-views"
    result_topic: str = "page-view-counts"
    # "kbroker" (the Python data source) or "kafka" (Spark's connector jar).
    source_format: str = "kbroker"
    sink_format: str = "kbroker"
    window: str = "1 minute"
    watermark: str = "30 seconds"
    max_offsets_per_trigger: int | None = None
    # Where the source writes how many records it read per topic, partition and window, for
    # `kbroker audit` (the kbroker format's auditTopic option; Spark's connector has none).
    audit_topic: str | None = None
    audit_window_ms: int = DEFAULT_WINDOW_MS

    def __post_init__(self) -> None:
        if self.audit_topic is not None and self.source_format != FORMAT:
            raise ValueError(f"audit_topic needs the {FORMAT} source, not {self.source_format}")


def page_views(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """The source topic as a stream of (user, page, event_time)."""
    reader = (
        spark.readStream.format(config.source_format)
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("subscribe", config.source_topic)
        .option("startingOffsets", "earliest")
    )
    if config.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    if config.audit_topic is not None:
        reader = reader.option("auditTopic", config.audit_topic).option(
            "auditWindowMs", str(config.audit_window_ms)
        )
    events = reader.load().select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event")
    )
    return events.select(
        F.col("event.user").alias("user"),
        F.col("event.page").alias("page"),
        F.timestamp_millis(F.col("event.ts")).alias("event_time"),
    ).where(F.col("page").isNotNull() & F.col("event_time").isNotNull())


def windowed_counts(views: DataFrame, config: PipelineConfig) -> DataFrame:
    """Views per page per event-time window, final once the watermark passes the window."""
    return (
        views.withWatermark("event_time", config.watermark)
        .groupBy(F.window("event_time", config.window), "page")
        .count()
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            F.col("count").alias("views"),
        )
    )


def batch_writer(config: PipelineConfig) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function: one micro-batch's counts to Parquet and to the topic."""

    def write(counts: DataFrame, batch_id: int) -> None:
        if counts.isEmpty():
            return
        counts.persist()
        try:
            target = Path(config.output_dir) / f"batch_id={batch_id}"
            counts.write.mode("overwrite").parquet(str(target))
            records = counts.select(
                F.concat_ws(
                    "|", "page", F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
                ).alias("key"),
                F.to_json(F.struct("window_start", "window_end", "page", "views")).alias("value"),
            )
            (
                records.write.format(config.sink_format)
                .option("kafka.bootstrap.servers", config.bootstrap)
                .option("topic", config.result_topic)
                .mode("append")
                .save()
            )
        finally:
            counts.unpersist()

    return write


def start(
    spark: SparkSession, config: PipelineConfig, *, available_now: bool = True
) -> StreamingQuery:
    """Start the query: with ``available_now`` it processes what the topic holds now and
    stops; otherwise it keeps running, a micro-batch every few seconds."""
    writer = (
        windowed_counts(page_views(spark, config), config)
        .writeStream.queryName(QUERY_NAME)
        .outputMode("append")
        .option("checkpointLocation", config.checkpoint_dir)
        .foreachBatch(batch_writer(config))
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="5 seconds")
    return writer.start()


def read_counts(spark: SparkSession, output_dir: str) -> DataFrame | None:
    """Every window count written so far (with its batch_id), or None before the first."""
    if not any(Path(output_dir).glob("batch_id=*/*.parquet")):
        return None
    return spark.read.parquet(output_dir)
