"""kbroker and PySpark: the ``kbroker`` data source and the page-view pipeline.

``register(spark)`` makes ``spark.read.format("kbroker")``, ``spark.readStream``,
``df.write`` and ``df.writeStream`` with that format available in a session, with no jar:
it is a Python data source (Spark 4) speaking to the broker through
``kbroker.data_client``. Its options and schema are those of Spark's Kafka source and sink
(see ``spark_conn.options``), so a pipeline moves between ``format("kbroker")`` and
``format("kafka")`` by changing one word.
"""

from pyspark.sql import SparkSession

from spark_conn.datasource import KbrokerDataSource

FORMAT = KbrokerDataSource.name()


def register(spark: SparkSession) -> None:
    """Register the ``kbroker`` format in ``spark`` (idempotent)."""
    spark.dataSource.register(KbrokerDataSource)


__all__ = ["FORMAT", "KbrokerDataSource", "register"]
