"""Builders for transactional batches and markers in storage tests."""

from __future__ import annotations

from kbroker.log import PartitionLog
from wire.records.control import EndTxnMarker, end_txn_marker_batch
from wire.records.record import Record, build_batch


def txn_batch(
    pid: int, seq: int, count: int = 2, *, epoch: int = 0, key: bytes | None = None, tag: int = 0
) -> bytearray:
    """A transactional batch of `count` records whose values start with `tag`."""
    records = [Record(i, 1_000 + i, key, tag.to_bytes(4, "big") + b"x" * 20) for i in range(count)]
    return bytearray(
        build_batch(
            records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
        )
    )


def marker(pid: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytearray:
    return bytearray(
        end_txn_marker_batch(
            EndTxnMarker(commit, coordinator_epoch),
            producer_id=pid,
            producer_epoch=epoch,
            timestamp=2_000,
        )
    )


def append(plog: PartitionLog, data: bytearray) -> int:
    """Append as leader; returns the first offset."""
    return plog.append_as_leader(data, leader_epoch=0, log_append_time_ms=None).first_offset
