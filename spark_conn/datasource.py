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
from spark_conn.avro_columns import RegistryLookup, spark_type
from spark_conn.options import OptionError, parse_source_options, value_format_of
from spark_conn.sink import BatchWriter, StreamWriter, plan_sink
from spark_conn.source import BatchReader, StreamReader, source_schema, with_reader_schema


class KbrokerDataSource(DataSource):
    """Format ``kbroker``: Spark's Kafka source and sink options, over kbroker's client."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("kbroker")``."""
        return FORMAT

    def schema(self) -> StructType:
        """The columns of Spark's Kafka source, ``headers`` last with includeHeaders=true;
        with valueFormat=avro, ``value`` typed from the value subject's latest schema."""
        lowered = {k.lower(): v for k, v in self.options.items()}
        include = str(lowered.get("includeheaders", "false")).strip().lower() == "true"
        value_type = None
        if value_format_of(lowered) == "avro":
            options = with_reader_schema(parse_source_options(self.options, streaming=True))
            assert options.registry is not None and options.reader_schema_id is not None
            lookup = RegistryLookup(options.registry.url, options.registry.user_info)
            value_type = spark_type(lookup.by_id(options.reader_schema_id))
        return source_schema(include, value_type)

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader; options are checked here, on the driver."""
        return BatchReader(with_reader_schema(parse_source_options(self.options, streaming=False)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The streaming reader; options are checked here, on the driver."""
        return StreamReader(with_reader_schema(parse_source_options(self.options, streaming=True)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch writer (append only); the columns are checked here."""
        if overwrite:
            raise OptionError("a topic cannot be overwritten; use mode append")
        return BatchWriter(plan_sink(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The streaming writer; the columns are checked here."""
        return StreamWriter(plan_sink(self.options, schema))
