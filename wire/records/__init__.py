"""Kafka record formats, sans-IO: RecordBatch v2 (batch.py, record.py), legacy message sets
magic 0/1 (legacy.py) and the batch compression codecs (compression.py)."""

from wire.records.batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    compute_crc,
    iter_batches,
    peek_magic,
    read_header,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
    validate_batch,
    validate_produce_records,
)
from wire.records.legacy import (
    LegacyMessage,
    build_message_set,
    decode_message_set,
    from_v2_batches,
    iter_messages,
    to_v2_batches,
)
from wire.records.record import Record, build_batch, decode_batch, decode_records, iter_entries

__all__ = [
    "BATCH_HEADER_SIZE",
    "BatchHeader",
    "LegacyMessage",
    "Record",
    "build_batch",
    "build_message_set",
    "compute_crc",
    "decode_batch",
    "decode_message_set",
    "decode_records",
    "from_v2_batches",
    "iter_batches",
    "iter_entries",
    "iter_messages",
    "peek_magic",
    "read_header",
    "set_base_offset",
    "set_max_timestamp_log_append",
    "set_partition_leader_epoch",
    "to_v2_batches",
    "validate_batch",
    "validate_produce_records",
]
