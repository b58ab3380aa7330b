"""Partition log storage in Kafka's on-disk layout (see the modules' docstrings)."""

from kbroker.log.file_region import FileRegion
from kbroker.log.log_config import LogConfig
from kbroker.log.log_manager import LogManager
from kbroker.log.partition_log import AppendResult, PartitionLog

__all__ = ["AppendResult", "FileRegion", "LogConfig", "LogManager", "PartitionLog"]
