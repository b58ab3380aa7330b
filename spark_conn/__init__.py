"""kbroker and PySpark: the ``kbroker`` data source and the page-view pipeline.

``register(spark)`` makes ``spark.read.format("kbroker")``, ``spark.readStream``,
``df.write`` and ``df.writeStream`` with that format available in a session, with no jar:
it is a Python data source (Spark 4) speaking to the broker through
``kbroker.data_client``. Its options and schema are those of Spark's Kafka source and sink
(see ``spark_conn.options``), so a pipeline moves between ``format("kbroker")`` and
``format("kafka")`` by changing one word.

The data source is imported when first used, not with this package: it needs the streaming
admission-control API of PySpark 4.2+, while ``spark_conn.session`` also serves Spark's own
connector on PySpark 4.0, the only Spark that connector's 4.0.0 build runs on.
"""

import os
import sys
from typing import Any

from pyspark.sql import SparkSession

FORMAT = "kbroker"


def register(spark: SparkSession) -> None:
    """Register the ``kbroker`` format in ``spark`` (idempotent). In a local session, make
    sure Spark's Python workers run an interpreter that has the data source (see
    spark_conn.worker_python); raises WorkerPythonError when the user's choice cannot."""
    from spark_conn import worker_python
    from spark_conn.datasource import KbrokerDataSource

    context = spark.sparkContext
    if context.master.startswith("local") and context.pythonExec != sys.executable:
        configured = worker_python.WorkerPython(
            context.pythonExec,
            chosen_by_user="PYSPARK_PYTHON" in os.environ
            or context.getConf().get("spark.pyspark.python") is not None,
        )
        importable = worker_python.can_import_data_source(configured.executable)
        # Read by PySpark when it wraps each Python function, the data source's included.
        context.pythonExec = worker_python.choose(configured, importable)
    spark.dataSource.register(KbrokerDataSource)


def __getattr__(name: str) -> Any:
    if name == "KbrokerDataSource":
        from spark_conn.datasource import KbrokerDataSource

        return KbrokerDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FORMAT", "KbrokerDataSource", "register"]
