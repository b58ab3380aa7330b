"""Retention: asynchronous segment deletion, the log start offset, and the periodic duty."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kbroker.log import LogConfig, LogManager, PartitionLog
from kbroker.log.lifecycle import LifecycleSettings, StorageLifecycle
from kbroker.log.log_manager import LOG_START_CHECKPOINT, read_offset_checkpoint
from wire.errors import ErrorCode, KafkaError

from .compaction_helpers import manager_with_log, put, read_batches, read_kv
from .helpers import FakeClock, batch


def append_many(plog: PartitionLog, count: int, value_size: int = 50) -> None:
    for tag in range(count):
        plog.append_as_leader(
            batch(1, value_size=value_size, tag=tag), leader_epoch=0, log_append_time_ms=None
        )


def test_deleted_segments_are_renamed_then_removed_after_the_delay(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(segment_bytes=1000, retention_bytes=2000, retention_ms=-1)
    plog = PartitionLog.open(tmp_path / "t-0", config, recover=False, clock=clock)
    append_many(plog, 60)
    first = plog.segment_base_offsets()[0]
    assert plog.enforce_retention(stable_offset=plog.log_end_offset) > 0
    gone = tmp_path / "t-0" / f"{first:020d}.log"
    assert not gone.exists()
    assert gone.with_name(gone.name + ".deleted").exists()
    clock.advance_ms(config.file_delete_delay_ms - 1)
    plog.delete_expired_files()
    assert gone.with_name(gone.name + ".deleted").exists()
    clock.advance_ms(1)
    plog.delete_expired_files()
    assert list((tmp_path / "t-0").glob("*.deleted")) == []


def test_leftover_deleted_files_are_removed_at_start_up(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, retention_bytes=2000, retention_ms=-1)
    plog = PartitionLog.open(tmp_path / "t-0", config, recover=False)
    append_many(plog, 60)
    plog.enforce_retention(stable_offset=plog.log_end_offset)
    start = plog.log_start_offset
    assert list((tmp_path / "t-0").glob("*.deleted"))
    # A crash: nothing closed, the .deleted files stay behind.
    reopened = PartitionLog.open(tmp_path / "t-0", config, recover=True)
    assert list((tmp_path / "t-0").glob("*.deleted")) == []
    assert reopened.segment_base_offsets()[0] == start
    assert [t for _, t in read_tags(reopened)] == list(range(start, 60))


def read_tags(plog: PartitionLog) -> list[tuple[int, int]]:
    return [(o, int.from_bytes(v[:4], "big")) for o, _, v in read_kv(plog)]


def test_fetch_below_the_start_is_out_of_range_and_the_start_is_checkpointed(
    tmp_path: Path,
) -> None:
    config = LogConfig(segment_bytes=1000, retention_bytes=2000, retention_ms=-1)
    manager = LogManager([tmp_path], config_for=lambda _t, _p: config)
    manager.open_all()
    plog = manager.get_or_create("t", 0, config)
    append_many(plog, 60)
    plog.enforce_retention(stable_offset=plog.log_end_offset)
    start = plog.log_start_offset
    assert start > 0
    with pytest.raises(KafkaError) as raised:
        plog.read(start - 1, 1000, max_offset=plog.log_end_offset, min_one_batch=True)
    assert raised.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert plog.read(start, 1000, max_offset=plog.log_end_offset, min_one_batch=True)
    # DeleteRecords moves it further, inside a segment.
    assert plog.delete_records_before(start + 3) == start + 3
    manager.flush_due()
    assert manager.syncer.wait_idle(10)
    assert read_offset_checkpoint(tmp_path / LOG_START_CHECKPOINT) == {("t", 0): start + 3}
    manager.shutdown()
    manager2 = LogManager([tmp_path], config_for=lambda _t, _p: config)
    manager2.open_all()
    assert manager2.get("t", 0).log_start_offset == start + 3
    manager2.shutdown()


def test_empty_cleaned_segments_do_not_block_retention(tmp_path: Path) -> None:
    from .compaction_helpers import cleaner_for, compact_config

    clock = FakeClock()
    config = compact_config(cleanup_policy=("compact", "delete"), retention_ms=10_000)
    manager, plog = manager_with_log(tmp_path, config, clock)
    for r in range(6):
        for k in range(6):
            put(plog, [(b"k%d" % k, b"v%d" % r + b"x" * 30)], timestamp=int(clock() * 1000))
    cleaner_for(manager, clock).clean_log("t", 0)
    # Every record of the first segment was superseded: it holds one empty batch.
    second = plog.segment_base_offsets()[1]
    assert [h.records_count for h, _ in read_batches(plog) if h.base_offset < second] == [0]
    clock.advance_ms(20_000)
    count = len(plog.segments())
    assert plog.enforce_retention(stable_offset=plog.log_end_offset) == count
    assert plog.log_start_offset == plog.log_end_offset


def test_continuous_production_with_retention_bytes_stays_bounded(tmp_path: Path) -> None:
    config = LogConfig(
        segment_bytes=4000, retention_bytes=20_000, retention_ms=-1, file_delete_delay_ms=0
    )
    manager = LogManager([tmp_path], config_for=lambda _t, _p: config)
    manager.open_all()
    plog = manager.get_or_create("t", 0, config)
    lifecycle = StorageLifecycle(
        manager, LifecycleSettings(), stable_offset=lambda _tp: plog.log_end_offset
    )
    peak = 0
    for tag in range(3000):
        plog.append_as_leader(
            batch(1, value_size=80, tag=tag), leader_epoch=0, log_append_time_ms=None
        )
        if tag % 20 == 0:
            lifecycle.enforce_retention()
            manager.flush_due()
            on_disk = sum(p.stat().st_size for p in plog.directory.glob("*.log*"))
            peak = max(peak, on_disk)
    # Kafka's bound: retention.bytes plus one segment, plus what arrives between checks.
    assert peak <= config.retention_bytes + 2 * config.segment_bytes
    assert plog.log_start_offset > 2000
    manager.shutdown()


async def test_retention_runs_every_check_interval_and_wakes_the_partition(
    tmp_path: Path,
) -> None:
    config = LogConfig(segment_bytes=1000, retention_bytes=2000, retention_ms=-1)
    manager = LogManager([tmp_path], config_for=lambda _t, _p: config)
    manager.open_all()
    plog = manager.get_or_create("t", 0, config)
    other = manager.get_or_create("not-served", 0, config)
    append_many(plog, 60)
    append_many(other, 60)
    changed: list[tuple[str, int]] = []
    lifecycle = StorageLifecycle(
        manager,
        LifecycleSettings(retention_check_interval_ms=20),
        stable_offset=lambda tp: plog.log_end_offset if tp == ("t", 0) else None,
        on_change=changed.append,
    )
    lifecycle.start()
    try:
        for _ in range(200):
            if changed:
                break
            await asyncio.sleep(0.02)
    finally:
        await lifecycle.stop()
    assert changed == [("t", 0)]
    assert plog.log_start_offset > 0 and other.log_start_offset == 0
    manager.shutdown()
