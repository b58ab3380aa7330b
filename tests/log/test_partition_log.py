"""PartitionLog: appends, reads, rolling, lookups, epochs, deletion and truncation."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pytest

from kbroker.log import LogConfig, PartitionLog, segment
from kbroker.log.segment import LogSegment
from wire.errors import ErrorCode, KafkaError
from wire.records.batch import iter_batches
from wire.records.record import Record, build_batch, decode_records

from .helpers import FakeClock, batch, tags_of

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=150)


def open_log(path: Path, config: LogConfig = SMALL, **kw: object) -> PartitionLog:
    return PartitionLog.open(path / "topic-0", config, recover=False, **kw)  # type: ignore[arg-type]


def append(plog: PartitionLog, data: bytearray, epoch: int = 0) -> tuple[int, int]:
    result = plog.append_as_leader(data, leader_epoch=epoch, log_append_time_ms=None)
    return result.first_offset, result.last_offset


def read_all(
    plog: PartitionLog, offset: int, max_offset: int | None = None
) -> list[tuple[int, int]]:
    """Every (offset, tag) from `offset` on, following reads across segments."""
    out: list[tuple[int, int]] = []
    limit = plog.log_end_offset if max_offset is None else max_offset
    while offset < limit:
        region = plog.read(offset, 1 << 20, max_offset=limit, min_one_batch=True)
        assert region is not None
        got = tags_of(region.read())
        out.extend(got)
        offset = got[-1][0] + 1
    return out


def test_round_trip_across_many_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    expected = []
    for tag in range(200):
        count = 1 + tag % 4
        first, last = append(plog, batch(count, value_size=tag % 50, tag=tag))
        assert first == (expected[-1][0] + 1 if expected else 0)
        assert last == first + count - 1
        expected.extend((first + i, tag) for i in range(count))
    assert len(plog.segment_base_offsets()) > 10
    assert plog.log_end_offset == len(expected)
    assert read_all(plog, 0) == expected
    for offset, tag in expected:
        region = plog.read(offset, 1, max_offset=plog.log_end_offset, min_one_batch=True)
        assert region is not None
        got = tags_of(region.read())
        assert (offset, tag) in got  # the batch containing the offset comes first
    files = sorted(p.name for p in (tmp_path / "topic-0").iterdir())
    assert "00000000000000000000.log" in files
    assert "00000000000000000000.index" in files
    assert "00000000000000000000.timeindex" in files


def test_appended_batch_has_offsets_and_epoch_rewritten(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(3))
    append(plog, batch(2), epoch=7)
    region = plog.read(3, 10_000, max_offset=5, min_one_batch=False)
    assert region is not None
    data = region.read()
    [(pos, header)] = list(iter_batches(data))
    assert (pos, header.base_offset, header.partition_leader_epoch) == (0, 3, 7)
    assert [r.offset for r in decode_records(data)] == [3, 4]  # CRC still valid


def test_log_append_time_rewrites_timestamps(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    result = plog.append_as_leader(batch(2, timestamp=5), leader_epoch=0, log_append_time_ms=9999)
    assert result.log_append_time_ms == 9999
    region = plog.read(0, 10_000, max_offset=2, min_one_batch=True)
    assert region is not None
    data = region.read()
    header = next(iter_batches(data))[1]
    assert header.timestamp_type == 1 and header.max_timestamp == 9999
    assert all(r.timestamp == 9999 for r in decode_records(data))
    assert plog.max_timestamp() == (9999, 0)
    assert plog.offset_for_timestamp(9000) == (0, 9999)


def test_index_entries_are_written_every_interval(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=150))
    for tag in range(30):
        append(plog, batch(1, value_size=40, tag=tag))
    index = plog.active_segment.index
    assert len(index) >= 5
    # Each entry maps a batch's last offset to that batch's start.
    for offset in range(30):
        indexed, position = index.lookup(offset)
        batch_at = next(plog.active_segment.batches_from(position))[1]
        assert batch_at.last_offset == indexed or (indexed, position) == (0, 0)


def test_roll_by_size_before_overflowing(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    size = len(batch(1, value_size=100))
    for tag in range(20):
        append(plog, batch(1, value_size=100, tag=tag))
    per_segment = 1000 // size
    bases = plog.segment_base_offsets()
    assert bases[:3] == [0, per_segment, 2 * per_segment]
    for path in (tmp_path / "topic-0").glob("*.log"):
        assert path.stat().st_size <= 1000


def test_roll_by_segment_ms_uses_first_batch_timestamp(tmp_path: Path) -> None:
    clock = FakeClock()
    plog = open_log(tmp_path, LogConfig(segment_ms=1000), clock=clock)
    append(plog, batch(1, timestamp=10_000))
    append(plog, batch(1, timestamp=11_000))  # exactly segment.ms later: no roll yet
    assert plog.segment_base_offsets() == [0]
    append(plog, batch(1, timestamp=11_001))
    assert plog.segment_base_offsets() == [0, 2]


def test_roll_by_segment_ms_from_creation_without_timestamps(tmp_path: Path) -> None:
    clock = FakeClock()
    plog = open_log(tmp_path, LogConfig(segment_ms=1000), clock=clock)
    append(plog, batch(1, timestamp=-1))
    clock.advance_ms(1001)
    append(plog, batch(1, timestamp=-1))
    assert plog.segment_base_offsets() == [0, 1]


def test_roll_when_index_is_full(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=1, segment_index_bytes=8 * 3))
    for tag in range(10):
        append(plog, batch(1, tag=tag))
    assert len(plog.segment_base_offsets()) >= 3
    assert read_all(plog, 0) == [(i, i) for i in range(10)]


def test_roll_when_relative_offset_would_overflow(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append_as_follower(bytearray(build_batch([Record(0, 1, None, b"a")])))
    far = 2**31 + 10
    plog.append_as_follower(bytearray(build_batch([Record(far, 1, None, b"b")], base_offset=far)))
    assert plog.segment_base_offsets() == [0, far]
    assert plog.log_end_offset == far + 1
    region = plog.read(far, 1000, max_offset=far + 1, min_one_batch=True)
    assert region is not None and decode_records(region.read())[0].offset == far


def test_kip74_min_one_batch(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    append(plog, batch(1, value_size=500, tag=1))
    append(plog, batch(1, value_size=10, tag=2))
    big = len(batch(1, value_size=500))
    region = plog.read(0, 100, max_offset=2, min_one_batch=True)
    assert region is not None and region.nbytes == big
    assert tags_of(region.read()) == [(0, 1)]
    # Without KIP-74 the first batch is cut at max_bytes (the client reports it too large).
    region = plog.read(0, 100, max_offset=2, min_one_batch=False)
    assert region is not None and region.nbytes == 100
    assert plog.read(0, 0, max_offset=2, min_one_batch=False) is None


def test_max_bytes_returns_whole_batches_only(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    for tag in range(5):
        append(plog, batch(1, value_size=50, tag=tag))
    size = len(batch(1, value_size=50))
    region = plog.read(0, size * 3 - 1, max_offset=5, min_one_batch=True)
    assert region is not None and region.nbytes == size * 2
    assert [t for _, t in tags_of(region.read())] == [0, 1]


def test_read_stops_at_max_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    for tag in range(5):
        append(plog, batch(2, tag=tag))
    assert read_all(plog, 0, max_offset=6) == [(i, i // 2) for i in range(6)]
    assert plog.read(6, 10_000, max_offset=6, min_one_batch=True) is None
    # A batch straddling max_offset is not returned.
    assert plog.read(4, 10_000, max_offset=5, min_one_batch=True) is None


def test_read_from_the_middle_of_a_batch(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    append(plog, batch(5, tag=1))
    append(plog, batch(5, tag=2))
    region = plog.read(7, 10_000, max_offset=10, min_one_batch=True)
    assert region is not None and tags_of(region.read())[0] == (5, 2)


def test_offset_out_of_range(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(3))
    assert plog.read(3, 100, max_offset=3, min_one_batch=True) is None
    for offset in (-1, 4):
        with pytest.raises(KafkaError) as info:
            plog.read(offset, 100, max_offset=3, min_one_batch=True)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    plog.delete_records_before(2)
    with pytest.raises(KafkaError):
        plog.read(1, 100, max_offset=3, min_one_batch=True)


def test_region_is_sendable_with_sendfile(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(2, tag=5))
    region = plog.read(0, 10_000, max_offset=2, min_one_batch=True)
    assert region is not None
    r, w = os.pipe()
    try:
        sent = os.sendfile(w, region.file.fileno(), region.position, region.nbytes)
        assert os.read(r, 65536) == region.read() and sent == region.nbytes
    finally:
        os.close(r)
        os.close(w)


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    # Batches of 3 records with timestamps t, t+1, t+2; segments roll along the way.
    for tag in range(40):
        append(plog, batch(3, timestamp=1000 + tag * 10, value_size=20, tag=tag))
    assert len(plog.segment_base_offsets()) > 3
    assert plog.offset_for_timestamp(0) == (0, 1000)
    assert plog.offset_for_timestamp(1000) == (0, 1000)
    assert plog.offset_for_timestamp(1001) == (1, 1001)
    assert plog.offset_for_timestamp(1003) == (3, 1010)
    assert plog.offset_for_timestamp(1252) == (77, 1252)
    assert plog.offset_for_timestamp(1392) == (119, 1392)
    assert plog.offset_for_timestamp(1393) is None
    assert plog.max_timestamp() == (1392, 119)
    plog.close()
    plog = open_log(tmp_path)
    assert plog.offset_for_timestamp(1252) == (77, 1252)
    assert plog.max_timestamp() == (1392, 119)


def test_max_timestamp_finds_the_record_not_the_batch_end(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    records = [Record(0, 50, None, b"a"), Record(1, 900, None, b"b"), Record(2, 60, None, b"c")]
    append(plog, bytearray(build_batch(records)))
    append(plog, batch(1, timestamp=100))
    assert plog.max_timestamp() == (900, 1)
    assert plog.offset_for_timestamp(70) == (1, 900)


def test_max_timestamp_of_an_empty_log(tmp_path: Path) -> None:
    assert open_log(tmp_path).max_timestamp() == (-1, -1)
    assert open_log(tmp_path).offset_for_timestamp(0) is None


def test_offset_for_timestamp_respects_log_start(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    append(plog, batch(5, timestamp=100))
    plog.delete_records_before(3)
    assert plog.offset_for_timestamp(0) == (3, 103)


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(3), epoch=1)
    append(plog, batch(2), epoch=1)
    append(plog, batch(4), epoch=3)
    assert plog.latest_epoch() == 3
    assert plog.end_offset_for_epoch(1) == (1, 5)
    assert plog.end_offset_for_epoch(2) == (1, 5)
    assert plog.end_offset_for_epoch(3) == (3, 9)
    assert plog.end_offset_for_epoch(4) == (-1, -1)
    assert plog.end_offset_for_epoch(0) == (0, 0)
    plog.assign_epoch_start(5, plog.log_end_offset)
    assert plog.end_offset_for_epoch(3) == (3, 9)
    plog.close()
    assert open_log(tmp_path).end_offset_for_epoch(1) == (1, 5)


def test_delete_records_before(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for tag in range(60):
        append(plog, batch(1, value_size=50, tag=tag))
    bases = plog.segment_base_offsets()
    target = bases[3] + 1
    assert plog.delete_records_before(target) == target
    assert plog.log_start_offset == target
    assert plog.segment_base_offsets() == bases[3:]
    assert not (tmp_path / "topic-0" / f"{bases[0]:020d}.log").exists()
    assert read_all(plog, target) == [(i, i) for i in range(target, 60)]
    assert plog.delete_records_before(5) == target  # never moves back
    with pytest.raises(KafkaError):
        plog.delete_records_before(61)
    # Up to the end: the data segments go, appends continue at the same offsets.
    assert plog.delete_records_before(60) == 60
    assert plog.segment_base_offsets() == [60]
    assert append(plog, batch(1, tag=99)) == (60, 60)


def test_deleted_segment_file_stays_readable_until_the_delay(tmp_path: Path) -> None:
    clock = FakeClock()
    plog = open_log(tmp_path, clock=clock)
    for tag in range(60):
        append(plog, batch(1, value_size=50, tag=tag))
    region = plog.read(0, 10_000, max_offset=60, min_one_batch=True)
    assert region is not None
    plog.delete_records_before(plog.segment_base_offsets()[2])
    plog.maybe_flush()
    assert tags_of(region.read())[0] == (0, 0)  # a fetch in flight still completes
    clock.advance_ms(60_000)
    plog.maybe_flush()
    assert region.file.closed


def test_truncate_to(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for tag in range(60):
        append(plog, batch(1, value_size=50, tag=tag), epoch=tag // 20)
    bases = plog.segment_base_offsets()
    target = bases[2] + 2
    plog.truncate_to(target)
    assert plog.log_end_offset == target
    assert plog.segment_base_offsets() == bases[:3]
    assert read_all(plog, 0) == [(i, i) for i in range(target)]
    assert plog.latest_epoch() == (target - 1) // 20
    assert append(plog, batch(1, tag=500)) == (target, target)
    plog.close()
    plog = open_log(tmp_path)
    assert read_all(plog, 0)[-2:] == [(target - 1, target - 1), (target, 500)]


def test_truncate_inside_a_batch_keeps_whole_batches(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    append(plog, batch(4, tag=1))
    append(plog, batch(4, tag=2))
    plog.truncate_to(6)
    assert plog.log_end_offset == 4
    assert plog.max_timestamp() == (1003, 3)


def test_truncate_to_below_the_first_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for tag in range(30):
        append(plog, batch(1, value_size=50, tag=tag))
    plog.delete_records_before(plog.segment_base_offsets()[1])
    plog.truncate_to(0)
    assert plog.log_end_offset == 0 and plog.log_start_offset == 0
    assert plog.segment_base_offsets() == [0]
    assert append(plog, batch(1)) == (0, 0)


def test_truncate_fully_and_start_past_the_log_end(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for tag in range(30):
        append(plog, batch(1, value_size=50, tag=tag), epoch=1)
    plog.truncate_fully_and_start_at(100)
    assert (plog.log_start_offset, plog.log_end_offset) == (100, 100)
    assert plog.segment_base_offsets() == [100]
    assert plog.latest_epoch() < 0
    data = bytearray(
        build_batch([Record(100, 1, None, b"a")], base_offset=100, partition_leader_epoch=3)
    )
    plog.append_as_follower(data)
    assert plog.log_end_offset == 101 and plog.latest_epoch() == 3
    plog.close()
    plog = open_log(tmp_path)
    assert (plog.log_start_offset, plog.log_end_offset) == (100, 101)
    assert plog.segment_base_offsets() == [100]


def test_follower_append_keeps_offsets_and_epochs(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    data = bytearray(
        build_batch(
            [Record(10, 1, None, b"a"), Record(11, 2, None, b"b")],
            base_offset=10,
            partition_leader_epoch=4,
        )
    )
    result = plog.append_as_follower(data)
    assert (result.first_offset, result.last_offset) == (10, 11)
    assert plog.log_end_offset == 12 and plog.latest_epoch() == 4
    with pytest.raises(KafkaError):
        plog.append_as_follower(data)


def test_partial_or_empty_records_are_rejected(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for bad in (bytearray(), batch(1)[:-1]):
        with pytest.raises(KafkaError) as info:
            plog.append_as_leader(bad, leader_epoch=0, log_append_time_ms=None)
        assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    assert plog.log_end_offset == 0


def test_idempotent_producer_through_the_log(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    first = batch(2, producer_id=5, producer_epoch=0, base_sequence=0)
    retry = bytearray(first)
    assert append(plog, first) == (0, 1)
    append(plog, batch(1))
    dup = plog.append_as_leader(retry, leader_epoch=0, log_append_time_ms=None)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    assert plog.log_end_offset == 3
    with pytest.raises(KafkaError) as info:
        append(plog, batch(1, producer_id=5, producer_epoch=0, base_sequence=3))
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert plog.log_end_offset == 3  # nothing written
    assert append(plog, batch(1, producer_id=5, producer_epoch=0, base_sequence=2)) == (3, 3)
    assert append(plog, batch(1, producer_id=5, producer_epoch=1, base_sequence=0)) == (4, 4)
    with pytest.raises(KafkaError) as info:
        append(plog, batch(1, producer_id=5, producer_epoch=0, base_sequence=3))
    assert info.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def producer_log(tmp_path: Path) -> PartitionLog:
    plog = open_log(tmp_path)
    for i in range(40):
        append(plog, batch(1, value_size=50, producer_id=5, producer_epoch=2, base_sequence=i))
    assert len(plog.segment_base_offsets()) > 2
    return plog


def assert_producer_state_restored(plog: PartitionLog) -> None:
    dup = plog.append_as_leader(
        batch(1, value_size=50, producer_id=5, producer_epoch=2, base_sequence=38),
        leader_epoch=0,
        log_append_time_ms=None,
    )
    assert dup.duplicate and dup.first_offset == 38
    with pytest.raises(KafkaError) as info:
        append(plog, batch(1, producer_id=5, producer_epoch=1, base_sequence=40))
    assert info.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert append(plog, batch(1, producer_id=5, producer_epoch=2, base_sequence=40)) == (40, 40)


def test_producer_state_restored_from_snapshot_at_close(tmp_path: Path) -> None:
    producer_log(tmp_path).close()
    assert (tmp_path / "topic-0" / f"{40:020d}.snapshot").exists()
    assert_producer_state_restored(open_log(tmp_path))


def test_producer_state_rebuilt_by_scanning_without_snapshots(tmp_path: Path) -> None:
    producer_log(tmp_path).close()
    for path in (tmp_path / "topic-0").glob("*.snapshot"):
        path.unlink()
    assert_producer_state_restored(open_log(tmp_path))


def test_producer_state_from_older_snapshot_plus_scan(tmp_path: Path) -> None:
    plog = producer_log(tmp_path)
    plog.close()
    (tmp_path / "topic-0" / f"{40:020d}.snapshot").unlink()
    remaining = sorted((tmp_path / "topic-0").glob("*.snapshot"))
    assert remaining  # written at each roll
    assert_producer_state_restored(open_log(tmp_path))


def test_producer_state_after_truncation(tmp_path: Path) -> None:
    plog = producer_log(tmp_path)
    plog.truncate_to(30)
    with pytest.raises(KafkaError):
        append(plog, batch(1, producer_id=5, producer_epoch=2, base_sequence=31))
    assert append(plog, batch(1, producer_id=5, producer_epoch=2, base_sequence=30)) == (30, 30)


def test_flush_messages_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = LogSegment.take_unsynced

    def spy(self: LogSegment) -> list[int]:
        calls.append(self.base_offset)
        return real(self)

    monkeypatch.setattr(LogSegment, "take_unsynced", spy)
    plog = open_log(tmp_path, LogConfig(flush_messages=3))
    append(plog, batch(2))
    assert calls == []
    append(plog, batch(1))
    assert calls == [0]
    append(plog, batch(1))
    assert calls == [0]


def test_flush_ms_through_maybe_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = LogSegment.take_unsynced
    monkeypatch.setattr(
        LogSegment, "take_unsynced", lambda s: (calls.append(s.base_offset), real(s))[1]
    )
    clock = FakeClock()
    plog = open_log(tmp_path, LogConfig(flush_ms=1000), clock=clock)
    append(plog, batch(1))
    clock.advance_ms(999)
    assert not plog.maybe_flush()
    clock.advance_ms(1)
    assert plog.maybe_flush() and calls == [0]
    clock.advance_ms(5000)
    assert not plog.maybe_flush()  # nothing new to flush


def test_default_flush_relies_on_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(LogSegment, "flush", lambda s: calls.append(s.base_offset))
    clock = FakeClock()
    plog = open_log(tmp_path, LogConfig(), clock=clock)
    for _ in range(100):
        append(plog, batch(1))
    clock.advance_ms(10**9)
    assert not plog.maybe_flush() and calls == []


def test_retention_by_time(tmp_path: Path) -> None:
    clock = FakeClock(now=100.0)  # 100_000 ms
    plog = open_log(tmp_path, LogConfig(segment_bytes=1000, retention_ms=10_000), clock=clock)
    for tag in range(40):
        append(plog, batch(1, value_size=50, tag=tag, timestamp=80_000 + tag * 500))
    bases = plog.segment_base_offsets()
    # Segments whose newest record is older than 90_000 ms go (records 0..19).
    expired = [b for i, b in enumerate(bases[1:]) if 80_000 + (b - 1) * 500 < 90_000]
    assert plog.enforce_retention(stable_offset=plog.log_end_offset) == len(expired)
    assert plog.log_start_offset == bases[len(expired)]
    clock.advance_ms(10**6)
    # Everything is expired, but the high watermark protects the uncommitted tail.
    assert plog.enforce_retention(stable_offset=bases[-1]) > 0
    assert plog.log_start_offset == bases[-1]
    assert plog.enforce_retention(stable_offset=plog.log_end_offset) == 1
    assert plog.log_start_offset == plog.log_end_offset == 40
    assert append(plog, batch(1)) == (40, 40)


def test_retention_by_size_and_policy(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1))
    for tag in range(60):
        append(plog, batch(1, value_size=50, tag=tag))
    plog.enforce_retention(stable_offset=plog.log_end_offset)
    # Kafka's rule: the oldest segments go while the log stays at or above the limit.
    first = (tmp_path / "topic-0" / f"{plog.segment_base_offsets()[0]:020d}.log").stat().st_size
    assert plog.size_bytes >= 2500 > plog.size_bytes - first
    assert plog.log_start_offset == plog.segment_base_offsets()[0] > 0
    compacted = open_log(
        tmp_path / "c",
        LogConfig(segment_bytes=1000, retention_bytes=0, cleanup_policy=("compact",)),
    )
    for tag in range(30):
        append(compacted, batch(1, value_size=50, tag=tag))
    assert compacted.enforce_retention(stable_offset=compacted.log_end_offset) == 0


def test_a_write_the_disk_refuses_leaves_whole_batches_and_the_log_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC in the middle of a batch (chaos disk schedules, issue 15): the half-written
    bytes are cut off, so the next append and a restart's recovery see whole batches only."""
    plog = open_log(tmp_path)
    append(plog, batch(2, tag=1))

    def half_then_full(fd: int, data: bytes | bytearray | memoryview) -> None:
        os.write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(segment, "write_all", half_then_full)
        with pytest.raises(OSError):
            append(plog, batch(3, tag=2))
    assert append(plog, batch(1, tag=3)) == (2, 2)
    assert read_all(plog, 0) == [(0, 1), (1, 1), (2, 3)]
    plog.close()
    reopened = PartitionLog.open(tmp_path / "topic-0", SMALL, recover=True)
    assert read_all(reopened, 0) == [(0, 1), (1, 1), (2, 3)]


def _expected_read(
    plog: PartitionLog, offset: int, max_bytes: int, max_offset: int
) -> tuple[int, int] | None:
    """What read_with_end must answer with min_one_batch, from the segments' batch headers:
    (offset of the first batch, offset after the last) of whole batches of one segment."""
    if offset >= max_offset or offset >= plog.log_end_offset:
        return None
    for seg in plog.segments():
        batches = [h for _, h in seg.batches_from(0) if h.last_offset >= offset]
        if seg.base_offset > offset and seg is not plog.segments()[0] and not batches:
            continue
        if not batches:
            continue
        if batches[0].next_offset > max_offset:
            return None
        end, used = batches[0].next_offset, batches[0].size
        for header in batches[1:]:
            if header.next_offset > max_offset or used + header.size > max_bytes:
                break
            end, used = header.next_offset, used + header.size
        return batches[0].base_offset, end
    return None


def test_reads_agree_with_a_header_walk_whatever_the_last_read(tmp_path: Path) -> None:
    """read_with_end skips the header reads where it knows a batch start (a segment's
    start, where the last read ended); every answer must still be the walk's."""
    rng = random.Random(7)
    plog = open_log(tmp_path)
    for tag in range(120):
        append(plog, batch(1 + rng.randrange(4), value_size=rng.randrange(60), tag=tag))
        if rng.random() < 0.5:
            continue
        for _ in range(3):
            leo = plog.log_end_offset
            offset = rng.randrange(leo)
            max_offset = rng.randrange(offset, leo + 1)
            max_bytes = rng.choice([1, 100, 300, 1 << 20])
            found = plog.read_with_end(offset, max_bytes, max_offset=max_offset, min_one_batch=True)
            expected = _expected_read(plog, offset, max_bytes, max_offset)
            if expected is None:
                assert found is None
                continue
            assert found is not None
            region, end = found
            assert (tags_of(region.read())[0][0], end) == expected
            # A consumer's next fetch starts where this one ended.
            if end < max_offset:
                following = plog.read_with_end(end, 1 << 20, max_offset=leo, min_one_batch=True)
                assert following is not None
                assert following[1] == _expected_read(plog, end, 1 << 20, leo)[1]  # type: ignore[index]


def test_truncation_forgets_where_the_last_read_ended(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    append(plog, batch(5, tag=1))
    append(plog, batch(5, value_size=100, tag=2))
    found = plog.read_with_end(5, 1 << 20, max_offset=10, min_one_batch=True)
    assert found is not None and found[1] == 10
    # The batch after the read's end (offset 10) now starts elsewhere in the file.
    plog.truncate_to(5)
    append(plog, batch(2, tag=3))
    append(plog, batch(3, tag=4))
    append(plog, batch(4, value_size=200, tag=5))
    found = plog.read_with_end(10, 1 << 20, max_offset=14, min_one_batch=True)
    assert found is not None
    assert tags_of(found[0].read()) == [(10 + i, 5) for i in range(4)]


def test_a_full_fetch_response_reads_nothing_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = open_log(tmp_path)
    for tag in range(3):
        append(plog, batch(2, tag=tag))

    def no_header_reads(self: LogSegment, offset: int) -> None:
        raise AssertionError("a batch header was read")

    monkeypatch.setattr(LogSegment, "find_batch", no_header_reads)
    assert plog.read_with_end(2, 0, max_offset=6, min_one_batch=False) is None
    with pytest.raises(KafkaError) as raised:  # the offset is still checked
        plog.read_with_end(7, 0, max_offset=6, min_one_batch=False)
    assert raised.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
