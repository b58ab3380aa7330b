"""The ``kbroker`` Python data source: ties the options to the readers and writers."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spark_conn import FORMAT
from spark_conn.options import OptionError, parse_source_options
from spark_conn.sink import BatchWriter, StreamWriter, plan_sink
from spark_conn.source import BatchReader, StreamReader, source_schema


class KbrokerDataSource(DataSource):
    """Format ``kbroker``: Spark's Kafka source and sink options, over kbroker's client."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("kbroker")``."""
        return FORMAT

    def schema(self) -> StructType:
        """The columns of Spark's Kafka source, ``headers`` last with includeHeaders=true."""
        include = str(
            {k.lower(): v for k, v in self.options.items()}.get("includeheaders", "false")
        )
        return source_schema(include.strip().lower() == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader; options are checked here, on the driver."""
        return BatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The streaming reader; options are checked here, on the driver."""
        return StreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch writer (append only); the columns are checked here."""
        if overwrite:
            raise OptionError("a topic cannot be overwritten; use mode append")
        return BatchWriter(plan_sink(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The streaming writer; the columns are checked here."""
        return StreamWriter(plan_sink(self.options, schema))
