"""Partition roles over a real log: the leader's high watermark follows its ISR, a follower
appends the leader's batches unchanged and truncates to a divergence point."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.log.log_config import LogConfig
from kbroker.log.partition_log import PartitionLog
from kbroker.partition import Partition
from wire.errors import ErrorCode, KafkaError
from wire.records.record import Record, build_batch


def batch(count: int) -> bytearray:
    return bytearray(build_batch([Record(i, 1000 + i, None, b"v", []) for i in range(count)]))


def make(tmp_path: Path, name: str, broker_id: int) -> tuple[Partition, list[tuple[str, int]]]:
    log = PartitionLog.open(tmp_path / name, LogConfig.from_topic_config({}), recover=False)
    changes: list[tuple[str, int]] = []
    return Partition("t", 0, log, broker_id, changes.append), changes


def test_leader_high_watermark_waits_for_the_isr(tmp_path: Path) -> None:
    leader, changes = make(tmp_path, "l", 1)
    assert leader.make_leader(3, (1, 2), (1, 2), now_ms=0)
    leader.append(batch(5), log_append_time_ms=None)
    assert leader.high_watermark == 0
    leader.on_follower_fetch(2, 5, now_ms=10)
    assert leader.high_watermark == 5
    assert ("t", 0) in changes
    assert leader.log.end_offset_for_epoch(3) == (3, 5)


def test_shrunk_isr_lets_the_leader_commit_alone(tmp_path: Path) -> None:
    leader, _ = make(tmp_path, "l", 1)
    leader.make_leader(0, (1, 2), (1, 2), now_ms=0)
    leader.append(batch(2), log_append_time_ms=None)
    assert leader.isr_to_shrink(now_ms=50_000, lag_max_ms=30_000) == {2}
    leader.apply_isr((1,))
    assert leader.high_watermark == 2


def test_follower_refuses_produce_and_replicates_unchanged(tmp_path: Path) -> None:
    leader, _ = make(tmp_path, "l", 1)
    follower, _ = make(tmp_path, "f", 2)
    leader.make_leader(4, (1, 2), (1, 2), now_ms=0)
    assert follower.make_follower(1, 4, (1, 2), (1, 2))
    with pytest.raises(KafkaError) as err:
        follower.append(batch(1), log_append_time_ms=None)
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    leader.append(batch(3), log_append_time_ms=None)
    region = leader.log.read(0, 1 << 20, max_offset=3, min_one_batch=True)
    assert region is not None
    follower.append_as_follower(region.read(), leader_high_watermark=2)
    assert follower.log.log_end_offset == 3
    assert follower.high_watermark == 2
    assert follower.log.end_offset_for_epoch(4) == (4, 3)
    follower.truncate_to(0)
    assert follower.log.log_end_offset == 0 and follower.high_watermark == 0


def test_same_epoch_is_not_a_new_leadership(tmp_path: Path) -> None:
    leader, _ = make(tmp_path, "l", 1)
    assert leader.make_leader(1, (1, 2, 3), (1, 2, 3), now_ms=0)
    assert not leader.make_leader(1, (1, 2, 3), (1, 2), now_ms=5)
    assert leader.isr == (1, 2)
    assert leader.make_follower(2, 2, (1, 2, 3), (2, 3))
    assert not leader.is_leader
    assert not leader.make_follower(2, 2, (1, 2, 3), (2, 3))
