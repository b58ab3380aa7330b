"""The records of ``__audit``: key ``topic/partition/window start`` (UTF-8), value a JSON
object ``{"count", "first_offset", "last_offset", "window_ms"}``; a tombstone (null value) for
a window whose records are no longer in the log. The topic is compacted, so the latest value
per key is the window's count so far."""

from __future__ import annotations

import json
from dataclasses import dataclass

from kbroker.audit.counter import WindowCount

AUDIT_TOPIC = "__audit"


@dataclass(frozen=True, slots=True, order=True)
class WindowKey:
    topic: str
    partition: int
    window_start_ms: int


def encode_key(key: WindowKey) -> bytes:
    return f"{key.topic}/{key.partition}/{key.window_start_ms}".encode()


def decode_key(raw: bytes) -> WindowKey:
    # Topic names cannot hold '/', so the last two fields are split off from the right.
    topic, partition, start = raw.decode().rsplit("/", 2)
    return WindowKey(topic, int(partition), int(start))


def encode_value(count: WindowCount, window_ms: int) -> bytes:
    return json.dumps(
        {
            "count": count.count,
            "first_offset": count.first_offset,
            "last_offset": count.last_offset,
            "window_ms": window_ms,
        },
        separators=(",", ":"),
    ).encode()


def decode_value(raw: bytes) -> tuple[WindowCount, int]:
    """The window's count and the window length it was counted with."""
    obj = json.loads(raw)
    return WindowCount(obj["count"], obj["first_offset"], obj["last_offset"]), obj["window_ms"]
