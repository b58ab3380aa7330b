"""The log cleaner's guarantees (Kafka's compaction semantics)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbroker.log.cleaner import (
    CHECKPOINT_FILE,
    CleanerConfig,
    SegmentRef,
    Throttler,
    group_segments,
)
from kbroker.log.log_manager import read_offset_checkpoint
from kbroker.log.partition_log import PartitionLog
from kbroker.log.segment import LogSegment
from wire.records import compression

from .compaction_helpers import (
    cleaner_for,
    compact_config,
    manager_with_log,
    put,
    read_batches,
    read_kv,
)
from .helpers import FakeClock


def fill(plog, rounds: int, keys: int = 10, value_size: int = 20) -> dict[bytes, bytes]:
    """Write every key `rounds` times, one record per batch; returns the final values."""
    final = {}
    for r in range(rounds):
        for k in range(keys):
            key, value = b"k%d" % k, b"v%d-%d-" % (k, r) + b"x" * value_size
            put(plog, [(key, value)])
            final[key] = value
    return final


def test_offsets_order_head_and_final_values(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    final = fill(plog, 12)
    before = read_kv(plog)
    active_base = plog.segment_base_offsets()[-1]
    cleaner = cleaner_for(manager)
    assert cleaner.clean_once()
    after = read_kv(plog)
    # Offsets never change and order is kept: the survivors are a subsequence of the log.
    assert set(after) <= set(before)
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    # The head (here the active segment) is untouched: a consumer there sees everything.
    assert [r for r in before if r[0] >= active_base] == [r for r in after if r[0] >= active_base]
    # A consumer from the start sees at least the final value of every key...
    latest = {k: v for _, k, v in after}
    assert latest == final
    # ...and, below the head, nothing else: one record per key.
    cleaned = [k for o, k, _ in after if o < active_base]
    assert len(cleaned) == len(set(cleaned))
    assert plog.log_end_offset == before[-1][0] + 1
    assert cleaner.stats.records_removed == len(before) - len(after)


def test_active_segment_and_high_watermark_bound_the_clean(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    fill(plog, 10)
    bases = plog.segment_base_offsets()
    active = plog.segments()[-1]
    active_bytes = active.read_batch(0, active.find_batch(bases[-1])[1])
    hw = bases[3]
    cleaner = cleaner_for(manager)
    cleaner._stable_offset = lambda _tp: hw  # the broker's hook
    before = read_kv(plog)
    assert cleaner.clean_once()
    after = read_kv(plog)
    assert [r for r in before if r[0] >= hw] == [r for r in after if r[0] >= hw]
    assert active.read_batch(0, active.find_batch(bases[-1])[1]) == active_bytes
    assert plog.segments()[-1] is active


def test_min_compaction_lag_protects_recent_records(tmp_path: Path) -> None:
    clock = FakeClock(now=100.0)  # 100_000 ms
    config = compact_config(min_compaction_lag_ms=50_000)
    manager, plog = manager_with_log(tmp_path, config, clock)
    for r in range(10):
        for k in range(10):
            # Old records (timestamps 1_000..) then recent ones (90_000..).
            ts = 1_000 + r * 10 if r < 5 else 90_000 + r * 10
            put(plog, [(b"k%d" % k, b"v%d" % r + b"x" * 20)], timestamp=ts)
    before = read_kv(plog)
    recent = [seg for seg in plog.segments() if seg.largest_timestamp >= 50_000]
    first_recent = recent[0].base_offset
    cleaner = cleaner_for(manager, clock)
    assert cleaner.clean_once()
    after = read_kv(plog)
    assert [r for r in before if r[0] >= first_recent] == [r for r in after if r[0] >= first_recent]
    assert len(after) < len(before)


def test_tombstones_kept_for_delete_retention_then_dropped(tmp_path: Path) -> None:
    clock = FakeClock()
    manager, plog = manager_with_log(tmp_path, compact_config(delete_retention_ms=60_000), clock)
    fill(plog, 5)
    put(plog, [(b"k3", None)])  # tombstone
    fill(plog, 3, keys=2)  # other keys move the head past it
    plog.roll()
    cleaner = cleaner_for(manager, clock)
    assert cleaner.clean_once()
    kv = read_kv(plog)
    assert [(k, v) for _, k, v in kv if k == b"k3"] == [(b"k3", None)]
    stamped = [h for h, recs in read_batches(plog) if any(r.value is None for r in recs)]
    assert stamped and all(h.has_delete_horizon for h in stamped)
    assert stamped[0].base_timestamp == int(clock() * 1000) + 60_000
    # Within delete.retention.ms a later clean keeps it...
    clock.advance_ms(30_000)
    put(plog, [(b"k0", b"again")])
    plog.roll()
    cleaner.clean_log("t", 0)
    assert (b"k3", None) in [(k, v) for _, k, v in read_kv(plog)]
    # ...after it, the tombstone (and so the key) is gone; other keys keep their final value.
    clock.advance_ms(30_001)
    assert cleaner.clean_once()  # due because the horizon passed, whatever the dirty ratio
    kv = read_kv(plog)
    assert b"k3" not in {k for _, k, _ in kv}
    assert {k for _, k, _ in kv} == {b"k%d" % i for i in range(10) if i != 3}
    # Record timestamps survive the horizon stamp.
    for header, records in read_batches(plog):
        assert all(r.timestamp >= 1_000 for r in records) or header.records_count == 0


def test_small_segments_are_grouped_within_segment_bytes(tmp_path: Path) -> None:
    config = compact_config(segment_bytes=2000)
    manager, plog = manager_with_log(tmp_path, config)
    fill(plog, 40, keys=5)
    cleaner = cleaner_for(manager)
    count = len(plog.segment_base_offsets())
    cleaner.clean_log("t", 0)
    cleaner.clean_log("t", 0)
    after = plog.segment_base_offsets()
    assert len(after) < count - 2
    assert all(seg.size <= config.segment_bytes for seg in plog.segments())
    # Grouping rule itself: consecutive, total input within segment.bytes.
    refs = [
        SegmentRef(None, b, b + 10, size, Path("x"), ())  # type: ignore[arg-type]
        for b, size in [(0, 700), (10, 700), (20, 700), (30, 100), (40, 1900)]
    ]
    grouped = group_segments(refs, segment_bytes=2000, index_bytes=10_000, index_interval_bytes=100)
    assert [[r.base_offset for r in g] for g in grouped] == [[0, 10], [20, 30], [40]]


@pytest.mark.parametrize(
    "codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
)
def test_compressed_batches_keep_their_codec(tmp_path: Path, codec: int) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    for r in range(8):
        items = [(b"k%d" % k, b"v%d" % r + os.urandom(40)) for k in range(6)]
        put(plog, items, compression=codec)
    before = read_kv(plog)
    assert cleaner_for(manager).clean_once()
    rewritten = [h for h, _ in read_batches(plog)]
    assert all(h.compression == codec for h in rewritten)
    after = read_kv(plog)
    assert len(after) < len(before) and set(after) <= set(before)
    assert {k: v for _, k, v in after} == {k: v for _, k, v in before}


def test_producer_batch_metadata_survives(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    # Producer 7 writes key "p" in three batches; everything it wrote is later overwritten
    # by a non-idempotent writer, so its batches lose every record.
    seq = 0
    for r in range(3):
        put(plog, [(b"p", b"old%d" % r), (b"q", b"old")], producer=(7, 2, seq))
        seq += 2
    last_first, last_last = plog.log_end_offset - 2, plog.log_end_offset - 1
    put(plog, [(b"t", b"txn")], producer=(9, 0, 0), transactional=True)
    fill(plog, 6, keys=3)
    put(plog, [(b"p", b"new"), (b"q", b"new")])
    plog.roll()
    assert cleaner_for(manager).clean_once()
    batches = read_batches(plog)
    of_seven = [h for h, _ in batches if h.producer_id == 7]
    # Only the producer's last batch stays, empty, with its offsets, epoch and sequence.
    assert len(of_seven) == 1
    empty = of_seven[0]
    assert (empty.base_offset, empty.last_offset, empty.records_count) == (last_first, last_last, 0)
    assert (empty.producer_epoch, empty.base_sequence) == (2, 4)
    txn = [h for h, _ in batches if h.producer_id == 9]
    assert len(txn) == 1 and txn[0].is_transactional
    # After a restart the producer continues its sequence (no OUT_OF_ORDER_SEQUENCE_NUMBER).
    manager.shutdown()
    manager2, plog2 = manager_with_log(tmp_path, compact_config())
    for path in plog2.directory.glob("*.snapshot"):
        path.unlink()  # force a replay of the cleaned log's headers
    manager2.shutdown()
    manager3, plog3 = manager_with_log(tmp_path, compact_config())
    first, _ = put(plog3, [(b"p", b"next")], producer=(7, 2, 6))
    assert first == plog3.log_end_offset - 1
    manager3.shutdown()


def test_control_batches_are_kept(tmp_path: Path) -> None:
    from wire.records.record import Record, build_batch

    manager, plog = manager_with_log(tmp_path, compact_config())
    put(plog, [(b"a", b"1")], producer=(5, 0, 0), transactional=True)
    marker = build_batch(
        [Record(0, 2_000, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        producer_id=5,
        producer_epoch=0,
        transactional=True,
        control=True,
    )
    plog.append_as_leader(bytearray(marker), leader_epoch=0, log_append_time_ms=None)
    fill(plog, 6, keys=2)
    put(plog, [(b"a", b"2")])
    plog.roll()
    assert cleaner_for(manager).clean_once()
    controls = [h for h, _ in read_batches(plog) if h.is_control]
    assert len(controls) == 1 and controls[0].producer_id == 5


def test_the_dirtiest_log_is_cleaned_first_and_clean_logs_are_left(tmp_path: Path) -> None:
    config = compact_config(min_cleanable_dirty_ratio=0.5)
    manager, dirty = manager_with_log(tmp_path, config)
    fill(dirty, 10)
    tidy = manager.get_or_create("u", 0, config)
    for k in range(60):
        put(tidy, [(b"k%d" % k, b"unique" + b"x" * 20)])
    deleting = manager.get_or_create("d", 0, compact_config(cleanup_policy=("delete",)))
    fill(deleting, 10)
    cleaner = cleaner_for(manager)
    plan = cleaner.grab_filthiest()
    assert plan is not None and plan.tp == ("t", 0)
    cleaner.install(cleaner.build(plan))
    # The tidy log gets cleaned once too (nothing was ever clean), then neither is due.
    assert cleaner.clean_once()
    assert not cleaner.clean_once()
    assert read_offset_checkpoint(tmp_path / CHECKPOINT_FILE) == {
        ("t", 0): dirty.segment_base_offsets()[-1],
        ("u", 0): tidy.segment_base_offsets()[-1],
    }
    assert cleaner.plan_for(("d", 0), deleting, force=True) is None


def test_first_dirty_offset_survives_restart(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config(min_cleanable_dirty_ratio=0.5))
    fill(plog, 10)
    assert cleaner_for(manager).clean_once()
    end = plog.segment_base_offsets()[-1]
    manager.shutdown()
    manager2, plog2 = manager_with_log(tmp_path, compact_config(min_cleanable_dirty_ratio=0.5))
    cleaner = cleaner_for(manager2)
    assert cleaner.first_dirty_offset(("t", 0), plog2) == end
    assert not cleaner.clean_once()  # nothing new is dirty


def test_a_small_dedupe_buffer_cleans_in_several_passes(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    final = fill(plog, 10, keys=40)
    cleaner = cleaner_for(manager, dedupe_buffer_size=40 * 24, io_buffer_load_factor=1.0)
    assert cleaner.config.max_map_entries == 40
    passes = 0
    while cleaner.clean_once():
        passes += 1
        assert {k: v for _, k, v in read_kv(plog)} == final
    assert passes > 1
    assert cleaner.first_dirty_offset(("t", 0), plog) == plog.segment_base_offsets()[-1]


def test_retention_moving_the_log_start_abandons_a_clean(tmp_path: Path) -> None:
    config = compact_config(cleanup_policy=("compact", "delete"), retention_bytes=3000)
    manager, plog = manager_with_log(tmp_path, config)
    fill(plog, 10)
    cleaner = cleaner_for(manager)
    plan = cleaner.grab_filthiest()
    assert plan is not None
    result = cleaner.build(plan)
    assert plog.enforce_retention(stable_offset=plog.log_end_offset) > 0
    before = read_kv(plog)
    assert not cleaner.install(result)
    assert read_kv(plog) == before
    assert not list(plog.directory.glob("*.cleaned"))
    assert cleaner.clean_once()  # the next pass works on the new log


def test_throttler_bounds_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = Throttler(1000.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(10):
        throttler.acquire(500)
    assert now[0] == pytest.approx(4.5)  # 5000 bytes at 1000 B/s, the first one free
    unlimited = Throttler(float("inf"), clock=lambda: 0.0, sleep=sleep)
    unlimited.acquire(10**9)
    assert len(slept) == 9


def test_cleaner_config_from_broker_properties() -> None:
    from kbroker.config import BrokerConfig

    broker = BrokerConfig.from_properties(
        {"log.dirs": "/tmp/x", "log.cleaner.threads": "2", "log.cleaner.backoff.ms": "10"}
    )
    config = CleanerConfig.from_broker(broker.get)
    assert (config.threads, config.backoff_ms, config.enable) == (2, 10, True)


def test_cleaned_segments_have_sound_indexes(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config(segment_bytes=4000))
    fill(plog, 12, keys=6, value_size=60)
    cleaner_for(manager).clean_log("t", 0)
    for segment in plog.segments()[:-1]:
        reopened = LogSegment.open(segment.directory, segment.base_offset, segment.config, 0)
        assert not reopened.needs_rebuild
        batches = list(reopened.batches_from(0))
        assert len(reopened.index) > 0 or reopened.size <= 2 * segment.config.index_interval_bytes
        for position, header in batches:
            assert reopened.find_batch(header.base_offset) == (position, header)
        if batches:
            assert reopened.max_timestamp == max(h.max_timestamp for _, h in batches)
        reopened.close()


def test_max_compaction_lag_forces_a_clean_below_the_ratio(tmp_path: Path) -> None:
    clock = FakeClock()
    config = compact_config(min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=10_000)
    manager, plog = manager_with_log(tmp_path, config, clock)
    now = int(clock() * 1000)
    for r in range(6):
        for k in range(6):
            put(plog, [(b"k%d" % k, b"v%d" % r + b"x" * 30)], timestamp=now)
    cleaner = cleaner_for(manager, clock)
    assert not cleaner.clean_once()
    clock.advance_ms(10_001)
    assert cleaner.clean_once()


def test_a_recreated_log_starts_dirty_again(tmp_path: Path) -> None:
    config = compact_config()
    manager, plog = manager_with_log(tmp_path, config)
    fill(plog, 4)
    cleaner = cleaner_for(manager)
    assert cleaner.clean_once()
    assert cleaner.first_dirty_offset(("t", 0), plog) > 0
    manager.delete("t", 0)
    recreated = manager.get_or_create("t", 0, config)
    fill(recreated, 12)
    assert cleaner.first_dirty_offset(("t", 0), recreated) == 0


async def test_the_service_cleans_in_a_thread_while_the_loop_keeps_running(
    tmp_path: Path,
) -> None:
    import asyncio

    from kbroker.log.lifecycle import LifecycleSettings, StorageLifecycle

    manager, plog = manager_with_log(tmp_path, compact_config())
    fill(plog, 20, value_size=200)
    cleaner_config = CleanerConfig(backoff_ms=10, io_max_bytes_per_second=200_000.0)
    lifecycle = StorageLifecycle(
        manager,
        LifecycleSettings(retention_check_interval_ms=60_000, cleaner=cleaner_config),
        stable_offset=lambda _tp: plog.log_end_offset,
    )
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    lifecycle.start()
    started = loop.time()
    try:
        last = loop.time()
        while lifecycle.cleaner.stats.cleans == 0:
            assert loop.time() - started < 30, "the cleaner did not finish"
            await asyncio.sleep(0.005)
            gaps.append(loop.time() - last)
            last = loop.time()
    finally:
        await lifecycle.stop()
    took = loop.time() - started
    # The pass is throttled to take a while; the loop went on ticking meanwhile.
    assert took > 0.2
    assert max(gaps) < took / 2
    manager.shutdown()


async def test_two_cleaner_threads_clean_two_logs(tmp_path: Path) -> None:
    import asyncio

    from kbroker.log.lifecycle import LifecycleSettings, StorageLifecycle

    config = compact_config()
    manager, first = manager_with_log(tmp_path, config)
    second = manager.get_or_create("u", 0, config)
    fill(first, 10)
    fill(second, 10)
    sizes = first.size_bytes, second.size_bytes
    lifecycle = StorageLifecycle(
        manager,
        LifecycleSettings(cleaner=CleanerConfig(threads=2, backoff_ms=10)),
        stable_offset=lambda _tp: None,
    )
    lifecycle.start()
    try:
        for _ in range(1000):
            if lifecycle.cleaner.stats.cleans >= 2:
                break
            await asyncio.sleep(0.01)
    finally:
        await lifecycle.stop()
    assert (first.size_bytes, second.size_bytes) < sizes
    assert first.size_bytes < sizes[0] and second.size_bytes < sizes[1]
    manager.shutdown()


async def test_a_log_the_cleaner_fails_on_is_marked_uncleanable(tmp_path: Path) -> None:
    import asyncio

    from kbroker.log.lifecycle import LifecycleSettings, StorageLifecycle

    config = compact_config()
    manager, broken = manager_with_log(tmp_path, config)
    fill(broken, 10)
    healthy = manager.get_or_create("u", 0, config)
    fill(healthy, 10)
    # Flip a byte inside a record of a sealed segment: its CRC no longer matches.
    path = broken.segments()[0].log_path
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF
    path.write_bytes(bytes(data))
    size = healthy.size_bytes
    lifecycle = StorageLifecycle(
        manager,
        LifecycleSettings(cleaner=CleanerConfig(backoff_ms=10)),
        stable_offset=lambda _tp: None,
    )
    lifecycle.start()
    try:
        for _ in range(1000):
            if lifecycle.cleaner.uncleanable and lifecycle.cleaner.stats.cleans:
                break
            await asyncio.sleep(0.01)
    finally:
        await lifecycle.stop()
    assert lifecycle.cleaner.uncleanable == {("t", 0)}
    assert healthy.size_bytes < size
    assert not list(broken.directory.glob("*.cleaned"))
    manager.shutdown()


def test_bomb_batch_is_kept_unexpanded_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.records.records_helpers import bomb_batch

    manager, plog = manager_with_log(tmp_path, compact_config(max_message_bytes=10_000))
    fill(plog, 6)
    bomb = bomb_batch(compression.ZSTD, 512 * 1024 * 1024)
    plog.append_as_leader(bytearray(bomb), leader_epoch=0, log_append_time_ms=None)
    fill(plog, 6)
    before = read_kv_skipping_bombs(plog)
    cleaner = cleaner_for(manager)
    with caplog.at_level("ERROR"):
        assert cleaner.clean_once()
    assert "decompresses to more than" in caplog.text
    # The other records were cleaned; the bomb is still there, as it came.
    assert len(read_kv_skipping_bombs(plog)) < len(before)
    assert any(bomb[61:] in path.read_bytes() for path in tmp_path.rglob("*.log"))


def read_kv_skipping_bombs(plog: PartitionLog) -> list[tuple[int, bytes | None]]:
    from wire.records.record import decode_batch, iter_entries

    data = b"".join(path.read_bytes() for path in sorted(plog.directory.glob("*.log")))
    out = []
    for pos, _, _ in iter_entries(data):
        try:
            out += [(r.offset, r.key) for r in decode_batch(data, pos, max_message_bytes=10_000)[1]]
        except compression.DecompressionLimitError:
            continue
    return out
