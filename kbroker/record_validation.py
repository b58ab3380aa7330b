"""Record-level checks Kafka's broker makes on produce, beyond batch headers and CRCs.

A compacted topic (cleanup.policy contains ``compact``) refuses records without a key:
compaction keeps the latest record per key, so a keyless one could never be cleaned. As
Kafka's LogValidator does, the whole batch is refused with INVALID_RECORD and the response
names each offending record by its index in the batch (ProduceResponse v8+
``record_errors``, KIP-467), so the producer fails exactly those records and can retry the
others. Records are decoded only here, for compacted topics, and decompression is capped
by the topic's max.message.bytes (wire.records.compression.decompression_cap).
"""

from __future__ import annotations

from dataclasses import dataclass

from wire.errors import ErrorCode, KafkaError
from wire.records.batch import iter_batches
from wire.records.record import decode_batch


@dataclass(frozen=True, slots=True)
class RecordError:
    batch_index: int
    message: str


class RecordValidationError(KafkaError):
    """INVALID_RECORD with the records that caused it."""

    def __init__(self, message: str, record_errors: list[RecordError]) -> None:
        super().__init__(ErrorCode.INVALID_RECORD, message)
        self.record_errors = record_errors


def check_keys_for_compaction(
    batches: bytes | bytearray | memoryview, topic: str, partition: int, max_message_bytes: int
) -> None:
    """Raise RecordValidationError if any record of `batches` (v2) has no key."""
    message = (
        f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}."
    )
    errors: list[RecordError] = []
    index = 0
    for pos, header in iter_batches(batches):
        if header.is_control:
            continue
        for record in decode_batch(batches, pos, max_message_bytes=max_message_bytes)[1]:
            if record.key is None:
                errors.append(RecordError(index, message))
            index += 1
    if errors:
        raise RecordValidationError(message, errors)
