"""A streaming query run as its own process so that a test can kill it with SIGKILL.

``python -m tests.spark.stream_worker BOOTSTRAP TOPIC OUTPUT CHECKPOINT`` copies TOPIC to
Parquet files under OUTPUT, 15 records per micro-batch, each record slowed down so that
every micro-batch takes a while; it runs until it is killed.
"""

from __future__ import annotations

import sys
import time

from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

import spark_conn
from spark_conn.session import build_session

RECORDS_PER_BATCH = 15
SECONDS_PER_RECORD = 0.1


def _slow(value: bytes) -> bytes:
    time.sleep(SECONDS_PER_RECORD)
    return value


def main(bootstrap: str, topic: str, output: str, checkpoint: str) -> None:
    spark = build_session("kbroker-kill-test")
    spark.sparkContext.setLogLevel("ERROR")
    spark_conn.register(spark)
    slow = udf(_slow, BinaryType())
    (
        spark.readStream.format("kbroker")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(RECORDS_PER_BATCH))
        .load()
        .select("partition", "offset", slow("value").alias("value"))
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .start()
        .awaitTermination()
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
