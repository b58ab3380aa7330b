"""A partition this broker hosts: its log, leader epoch and high watermark.

With a single replica the in-sync replica set is this broker alone, so the high
watermark (the offset below which records are committed and visible to
consumers) follows the log end offset on every append. Replication replaces
this with the minimum log end offset over the ISR.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kbroker.log.partition_log import AppendResult, PartitionLog


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    log: PartitionLog
    leader_epoch: int
    isr: tuple[int, ...]
    # Called with (topic, index) after the partition's data or watermark moved,
    # to wake fetches waiting in the purgatory.
    on_change: Callable[[tuple[str, int]], None]
    high_watermark: int = field(init=False)

    def __post_init__(self) -> None:
        self.high_watermark = self.log.log_end_offset

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    def append(self, batches: bytearray, *, log_append_time_ms: int | None) -> AppendResult:
        result = self.log.append_as_leader(
            batches, leader_epoch=self.leader_epoch, log_append_time_ms=log_append_time_ms
        )
        if not result.duplicate:
            self.high_watermark = self.log.log_end_offset
            self.on_change(self.key)
        return result

    def delete_records_before(self, offset: int) -> int:
        start = self.log.delete_records_before(offset)
        self.on_change(self.key)
        return start
