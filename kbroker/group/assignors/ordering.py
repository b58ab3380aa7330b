"""The orders Kafka's group coordinator sorts by, so that our tie-breaks are Kafka's.

Java compares strings by UTF-16 code units (which differs from Python's code point order for
characters above U+FFFF), and Kafka's Uuid.compareTo compares the two 64-bit halves as signed
longs (so ids with the top bit set sort first).
"""

from __future__ import annotations

import uuid


def java_string_key(text: str) -> bytes:
    """Sorts like java.lang.String.compareTo: big-endian UTF-16 bytes compare as code units."""
    return text.encode("utf-16-be", "surrogatepass")


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def kafka_uuid_key(topic_id: uuid.UUID) -> tuple[int, int]:
    """Sorts like org.apache.kafka.common.Uuid.compareTo."""
    value = topic_id.int
    return _signed64(value >> 64), _signed64(value & ((1 << 64) - 1))
