"""SparkSessions for kbroker pipelines, with or without Spark's own Kafka connector.

Spark's ``format("kafka")`` lives in the ``spark-sql-kafka-0-10`` jar (plus its
dependencies: kafka-clients, commons-pool2, spark-token-provider-kafka), which PySpark does
not ship. It is loaded the two ways Spark users load it:

- ``spark.jars.packages`` with ``KAFKA_PACKAGE`` (``kafka_package()``): Spark resolves it
  from Maven when the session starts. Only when asked (``packages=True``), never by default:
  nothing here downloads anything on its own.
- Local jar files named in ``KBROKER_SPARK_KAFKA_JARS``: paths separated by commas or the
  path separator; a directory stands for every ``.jar`` in it. They go to ``spark.jars``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

JARS_ENV = "KBROKER_SPARK_KAFKA_JARS"


def kafka_package(spark_version: str = pyspark.__version__) -> str:
    """Maven coordinates of Spark's Kafka connector for this Spark (Scala 2.13 builds)."""
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version}"


def kafka_jars(value: str | None = None) -> list[str]:
    """The connector's local jar files from ``value`` (default: $KBROKER_SPARK_KAFKA_JARS)."""
    text = os.environ.get(JARS_ENV, "") if value is None else value
    jars: list[str] = []
    for item in text.replace(os.pathsep, ",").split(","):
        item = item.strip()
        if not item:
            continue
        path = Path(item).expanduser()
        if path.is_dir():
            jars.extend(str(p) for p in sorted(path.glob("*.jar")))
        elif path.is_file():
            jars.append(str(path))
        else:
            raise FileNotFoundError(f"{JARS_ENV}: no such jar or directory: {item}")
    return jars


def build_session(
    app_name: str,
    *,
    master: str = "local[2]",
    packages: bool = False,
    jars: list[str] | None = None,
    shuffle_partitions: int = 2,
) -> SparkSession:
    """A session sized for one machine. ``jars`` (default: from $KBROKER_SPARK_KAFKA_JARS)
    and ``packages=True`` load Spark's Kafka connector; with neither, ``format("kafka")`` is
    unavailable and ``format("kbroker")`` is the way in."""
    # Python workers must run this interpreter (the one kbroker is installed in), not whatever
    # `python3` is first on the PATH, unless the user chose one; PySpark reads the variable
    # when the context starts and for every Python function it ships.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    local = kafka_jars() if jars is None else jars
    if local:
        builder = builder.config("spark.jars", ",".join(local))
    if packages:
        builder = builder.config("spark.jars.packages", kafka_package())
    return builder.getOrCreate()


def has_kafka_connector(spark: SparkSession) -> bool:
    """Whether ``format("kafka")`` resolves in this session (Spark's own format look-up)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark._jsparkSession.sessionState().conf()
    try:
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource("kafka", conf)
    except Exception:
        return False
    return True
