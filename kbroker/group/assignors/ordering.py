"""The orders Kafka's group coordinator sorts by, so that our tie-breaks are Kafka's.

Java compares strings by UTF-16 code units (which differs from Python's code point order for
characters above U+FFFF), and Kafka's Uuid.compareTo compares the two 64-bit halves as signed
longs (so ids with the top bit set sort first).
"""

from __future__ import annotations

import uuid


def java_string_key(text: str) -> str:
    """Sorts like java.lang.String.compareTo, which compares UTF-16 code units: the same as
    Python's order unless the text has characters above U+FFFF, which then become their
    surrogate pairs."""
    if text.isascii() or max(text) <= "\uffff":
        return text
    units = text.encode("utf-16-be", "surrogatepass")
    return "".join(chr(int.from_bytes(units[i : i + 2], "big")) for i in range(0, len(units), 2))


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def kafka_uuid_key(topic_id: uuid.UUID) -> tuple[int, int]:
    """Sorts like org.apache.kafka.common.Uuid.compareTo."""
    value = topic_id.int
    return _signed64(value >> 64), _signed64(value & ((1 << 64) - 1))
