"""A mirror partition over a real log: the source's batches appended unchanged by the local
leader, whose own leader epochs stay out of the log's epoch history."""

from __future__ import annotations

from pathlib import Path

from kbroker.log.log_config import LogConfig
from kbroker.log.partition_log import PartitionLog
from kbroker.partition import Partition
from wire.records.record import Record, build_batch


def make(tmp_path: Path, name: str) -> Partition:
    log = PartitionLog.open(tmp_path / name, LogConfig.from_topic_config({}), recover=False)
    return Partition("t", 0, log, 1, lambda key: None)


def produce(partition: Partition, count: int) -> bytes:
    """Append ``count`` records as the source's leader; returns the batch as stored."""
    start = partition.log.log_end_offset
    partition.append(
        bytearray(build_batch([Record(i, 1000, None, b"v", []) for i in range(count)])),
        log_append_time_ms=None,
    )
    found = partition.log.read_with_end(
        start, 1 << 20, max_offset=partition.log.log_end_offset, min_one_batch=True
    )
    assert found is not None
    return found[0].read()


def test_the_epoch_history_is_the_source_s_across_local_leader_changes(tmp_path: Path) -> None:
    source = make(tmp_path, "source")
    source.make_leader(5, (1,), (1,), now_ms=0)
    mirror = make(tmp_path, "mirror")
    mirror.make_leader(7, (1,), (1,), now_ms=0)
    first = produce(source, 3)
    mirror.append_mirrored(first)
    # Leadership moves away and back (a higher local epoch), then copying goes on.
    mirror.make_follower(2, 8, (1, 2), (1, 2))
    mirror.make_leader(9, (1, 2), (1, 2), now_ms=0)
    mirror.append_mirrored(produce(source, 2))
    assert mirror.log.epochs.entries() == [(5, 0)]
    assert mirror.log.end_offset_for_epoch(5) == (5, 5)
    assert mirror.high_watermark == 3  # the follower 2 has not fetched the new batch yet
