"""Reading a cluster's ``__audit`` topic: the latest count per topic, partition and window."""

from __future__ import annotations

from kbroker.audit.counter import WindowCount
from kbroker.audit.records import AUDIT_TOPIC, WindowKey, decode_key, decode_value
from kbroker.cli.ops.admin import OpsError, fetch, leaders
from kbroker.client import KafkaClient
from wire.errors import ErrorCode


async def read_audit(client: KafkaClient) -> tuple[dict[WindowKey, WindowCount], int | None]:
    """Every window's latest count (tombstones remove it), and the window length they were
    counted with (None when the topic holds none; an error when they disagree)."""
    try:
        partition_leaders = await leaders(client, AUDIT_TOPIC)
    except OpsError as exc:
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return {}, None
        raise
    counts: dict[WindowKey, WindowCount] = {}
    window_lengths: set[int] = set()
    for partition, leader in sorted(partition_leaders.items()):
        offset = 0
        while True:
            found = (await fetch(client, AUDIT_TOPIC, leader, {partition: offset}, max_wait_ms=0))[
                partition
            ]
            offset = max(offset, found.log_start_offset)
            for record in found.records:
                offset = record.offset + 1
                if record.key is None:
                    continue
                key = decode_key(record.key)
                if record.value is None:
                    counts.pop(key, None)
                    continue
                count, window_ms = decode_value(record.value)
                counts[key] = count
                window_lengths.add(window_ms)
            if offset >= found.high_watermark or not found.records:
                break
    if len(window_lengths) > 1:
        raise OpsError(f"{AUDIT_TOPIC} holds counts of several window lengths: {window_lengths}")
    return counts, next(iter(window_lengths), None)
