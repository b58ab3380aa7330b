"""The records of ``__audit``: key ``topic/partition/window start`` (UTF-8), value a JSON
object ``{"count", "first_offset", "last_offset", "window_ms"}``; a tombstone (null value) for
a window whose records are no longer in the log. The topic is compacted, so the latest value
per key is the window's count so far.

A reader that counts what it read (the Spark source, spark_conn/source.py) cannot know the
totals of earlier reads, so it writes the counts of each offset range it read under a key of
its own, ``topic/partition/window start/first-end`` (the range [first, end)): a range read
again (a task retried, a micro-batch replayed) replaces its own counts, and different ranges
of one window add up (``read_audit`` sums them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
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


def encode_range_key(key: WindowKey, start: int, end: int) -> bytes:
    """The key of a window's records read within the offset range [start, end)."""
    return encode_key(key) + f"/{start}-{end}".encode()


def decode_key(raw: bytes) -> WindowKey:
    """The window of a key, with or without an offset range."""
    # Topic names cannot hold '/', so the fields split cleanly.
    topic, partition, start = raw.decode().split("/")[:3]
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


def sum_by_window(latest: Mapping[bytes, WindowCount]) -> dict[WindowKey, WindowCount]:
    """The counts per window from the latest count per key: a window's offset ranges summed."""
    counts: dict[WindowKey, WindowCount] = {}
    for raw, count in latest.items():
        key = decode_key(raw)
        known = counts.get(key)
        counts[key] = count if known is None else known.plus(count)
    return counts
