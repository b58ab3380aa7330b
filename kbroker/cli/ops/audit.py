"""Reading a cluster's ``__audit`` topic (or a reader's counts topic in the same format): the
latest count per topic, partition and window."""

from __future__ import annotations

from kbroker.audit.counter import WindowCount
from kbroker.audit.records import AUDIT_TOPIC, WindowKey, decode_value, sum_by_window
from kbroker.cli.ops.admin import OpsError, fetch, leaders
from kbroker.client import KafkaClient
from wire.errors import ErrorCode


async def read_audit(
    client: KafkaClient, topic: str = AUDIT_TOPIC
) -> tuple[dict[WindowKey, WindowCount], int | None]:
    """Every window's latest count (tombstones remove it; the counts of a window's offset
    ranges, kbroker/audit/records.py, are summed), and the window length they were counted
    with (None when the topic holds none; an error when they disagree)."""
    try:
        partition_leaders = await leaders(client, topic)
    except OpsError as exc:
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return {}, None
        raise
    latest: dict[bytes, tuple[WindowCount, int]] = {}
    for partition, leader in sorted(partition_leaders.items()):
        offset = 0
        while True:
            found = (await fetch(client, topic, leader, {partition: offset}, max_wait_ms=0))[
                partition
            ]
            offset = max(offset, found.log_start_offset)
            for record in found.records:
                offset = record.offset + 1
                if record.key is None:
                    continue
                if record.value is None:
                    latest.pop(bytes(record.key), None)
                else:
                    latest[bytes(record.key)] = decode_value(record.value)
            if offset >= found.high_watermark or not found.records:
                break
    window_lengths = {window_ms for _, window_ms in latest.values()}
    if len(window_lengths) > 1:
        raise OpsError(f"{topic} holds counts of several window lengths: {window_lengths}")
    counts = sum_by_window({raw: count for raw, (count, _) in latest.items()})
    return counts, next(iter(window_lengths), None)
