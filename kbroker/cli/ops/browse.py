"""Reading a few records of a topic for a person to look at: from an offset, from a time, or
the newest ones, never more than asked for (a browser must not pull a whole topic). Each
partition is read from its leader with Fetch (up to v12, names not ids), a bounded number of
rounds of bounded size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from kbroker.cli.ops.admin import OpsError, fetch, leaders
from kbroker.cli.ops.topic_state import log_offsets, offsets_at
from kbroker.client import KafkaClient

OLDEST = "oldest"
NEWEST = "newest"
OFFSET = "offset"
TIMESTAMP = "timestamp"
MODES = (NEWEST, OLDEST, OFFSET, TIMESTAMP)
MAX_LIMIT = 500
# Bytes asked of one partition in one fetch, and rounds of fetches before giving up on
# filling the page (a compacted or transactional log has gaps between offsets).
PARTITION_FETCH_BYTES = 256 * 1024
MAX_ROUNDS = 8


@dataclass(frozen=True)
class BrowsedRecord:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class BrowseResult:
    records: list[BrowsedRecord]
    # Partition -> (log start offset, log end offset) when the records were read.
    bounds: dict[int, tuple[int, int]]


def _starts(
    mode: str,
    bounds: dict[int, tuple[int, int]],
    offset: int | None,
    by_time: dict[int, int],
    limit: int,
) -> dict[int, int]:
    starts: dict[int, int] = {}
    for partition, (first, end) in bounds.items():
        if mode == NEWEST:
            start = max(first, end - limit)
        elif mode == OFFSET:
            start = min(max(offset or 0, first), end)
        elif mode == TIMESTAMP:
            found = by_time.get(partition, -1)
            start = end if found < 0 else max(found, first)
        else:
            start = first
        if start < end:
            starts[partition] = start
    return starts


async def browse(
    client: KafkaClient,
    topic: str,
    partitions: Sequence[int] | None,
    mode: str,
    *,
    limit: int = 50,
    offset: int | None = None,
    timestamp: int | None = None,
) -> BrowseResult:
    """Up to ``limit`` records of ``topic`` (of ``partitions``, all when None): ``newest``
    first, or in time order from the ``oldest``, from ``offset`` or from ``timestamp`` (ms)."""
    if mode not in MODES:
        raise OpsError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    if mode == OFFSET and (offset is None or offset < 0):
        raise OpsError("an offset of 0 or more is needed")
    if mode == TIMESTAMP and timestamp is None:
        raise OpsError("a timestamp is needed")
    limit = max(1, min(limit, MAX_LIMIT))
    partition_leaders = await leaders(client, topic)
    chosen = sorted(partition_leaders) if partitions is None else sorted(set(partitions))
    missing = [p for p in chosen if p not in partition_leaders]
    if missing:
        raise OpsError(f"topic {topic!r} has no partition {missing[0]}")
    offsets = await log_offsets(client, [(topic, p) for p in chosen])
    bounds = {p: offsets[(topic, p)] for p in chosen if (topic, p) in offsets}
    by_time: dict[int, int] = {}
    if mode == TIMESTAMP and timestamp is not None:
        found = await offsets_at(client, [(topic, p) for p in bounds], timestamp)
        by_time = {p: o for (_, p), o in found.items()}
    positions = _starts(mode, bounds, offset, by_time, limit)
    collected: dict[int, list[BrowsedRecord]] = defaultdict(list)
    for _ in range(MAX_ROUNDS):
        wanted = {
            p: o for p, o in positions.items() if o < bounds[p][1] and len(collected[p]) < limit
        }
        if not wanted:
            break
        by_leader: dict[int, dict[int, int]] = defaultdict(dict)
        for p, o in wanted.items():
            by_leader[partition_leaders[p]][p] = o
        for leader, leader_offsets in sorted(by_leader.items()):
            results = await fetch(
                client,
                topic,
                leader,
                leader_offsets,
                max_wait_ms=0,
                max_bytes=PARTITION_FETCH_BYTES * len(leader_offsets),
            )
            for p, result in results.items():
                for r in result.records[: limit - len(collected[p])]:
                    collected[p].append(
                        BrowsedRecord(p, r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                    )
                if result.records:
                    positions[p] = result.records[-1].offset + 1
                else:
                    # Nothing below the high watermark from here (only control batches or
                    # aborted data): stop reading this partition.
                    positions[p] = bounds[p][1]
    records = [r for rs in collected.values() for r in rs]
    if mode == NEWEST:
        records.sort(key=lambda r: (r.timestamp, r.offset), reverse=True)
    else:
        records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    return BrowseResult(records[:limit], bounds)
