"""Builders for the retention, compaction and recovery tests."""

from __future__ import annotations

from pathlib import Path

from kbroker.log import LogConfig, LogManager, PartitionLog
from kbroker.log.cleaner import CleanerConfig, LogCleaner
from wire.records.record import Record, build_batch, decode_batch

from .helpers import FakeClock

KV = tuple[int, bytes | None, bytes | None]  # (offset, key, value)


def compact_config(**overrides: object) -> LogConfig:
    """A compacted topic with small segments and an eager cleaner."""
    values: dict[str, object] = {
        "segment_bytes": 1200,
        "index_interval_bytes": 200,
        "cleanup_policy": ("compact",),
        "min_cleanable_dirty_ratio": 0.01,
        "retention_ms": -1,
        "file_delete_delay_ms": 0,
    }
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


def put(
    plog: PartitionLog,
    items: list[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int = 1_000,
    compression: int = 0,
    producer: tuple[int, int, int] | None = None,
    transactional: bool = False,
) -> tuple[int, int]:
    """Append one batch of (key, value) records; returns its (first, last) offsets."""
    pid, epoch, seq = producer if producer is not None else (-1, -1, -1)
    data = build_batch(
        [Record(i, timestamp + i, k, v) for i, (k, v) in enumerate(items)],
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )
    result = plog.append_as_leader(bytearray(data), leader_epoch=0, log_append_time_ms=None)
    return result.first_offset, result.last_offset


def read_batches(plog: PartitionLog, start: int | None = None) -> list[tuple]:
    """(header, records) of every batch from `start` (the log start) to the end."""
    offset = plog.log_start_offset if start is None else start
    out = []
    while offset < plog.log_end_offset:
        region = plog.read(offset, 1 << 20, max_offset=plog.log_end_offset, min_one_batch=True)
        if region is None:
            break
        data = region.read()
        pos = 0
        while pos < len(data):
            header, records = decode_batch(data, pos)
            out.append((header, records))
            pos += header.size
            offset = header.next_offset
    return out


def read_kv(plog: PartitionLog, start: int | None = None) -> list[KV]:
    """(offset, key, value) of every record (control records included)."""
    return [(r.offset, r.key, r.value) for _, records in read_batches(plog, start) for r in records]


def manager_with_log(
    root: Path, config: LogConfig, clock: FakeClock | None = None
) -> tuple[LogManager, PartitionLog]:
    manager = LogManager([root], clock=clock or FakeClock(), config_for=lambda _t, _p: config)
    manager.open_all()
    return manager, manager.get_or_create("t", 0, config)


def cleaner_for(manager: LogManager, clock: FakeClock | None = None, **kw: object) -> LogCleaner:
    return LogCleaner(manager, CleanerConfig(**kw), clock=clock or FakeClock())  # type: ignore[arg-type]
