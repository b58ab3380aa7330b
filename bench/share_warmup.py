"""When bench/share_consumers.py may start measuring: once the share group has stopped moving
partitions between its consumers. Pure, with the clock passed in.

Why it matters (issue 26): the consumers' JVMs start one after another (seconds apart on a
loaded machine), and each one that joins makes the simple assignor take partitions away from
the members already there (KIP-932: partitions are balanced over the members). A member hears
of it at its next heartbeat and the Java client's next ShareFetch drops those partitions from
its share session; commitSync then fails the acknowledgements of records it still holds from
them with NotLeaderOrFollowerException, without sending them (ShareConsumeRequestManager
acknowledges through the share session only), and those records wait out their acquisition
lock (30 s). A measurement that starts before the last member joined pays for that.

Joining is not all: a ShareFetch sent while a member still had a partition and answered after
the partition moved hands the member records it can no longer acknowledge (seen at 8
partitions x 8 consumers: a warm-up record of partition 1 acquired 1.5 s after its consumer
lost it). That record stays acquired for its 30 s lock, the partition's start offset stays
behind it, and once `group.share.partition.max.record.locks` (2,000) records are in flight
behind it the partition hands out nothing more: with 2,500 records a partition, the last ones
waited for the lock, during the measurement (kbroker 1,290-1,741 records/s in that cell).

Settled means: at least one record per partition acknowledged; every consumer acknowledged one
record of its own when there are no more consumers than partitions (a member only gets
records of partitions assigned to it, so each one has joined); then two heartbeat intervals
more, in which every member hears of its final assignment; and then no warm-up record left
unacknowledged (the share group's lag, DescribeShareGroupOffsets v1, 0 on every partition),
so that no record from before is still locked when the measurement starts. With more
consumers than partitions the members share partitions and a warm-up record cannot reach
each of them, so the second condition does not apply.
"""

from __future__ import annotations

from collections.abc import Sequence

# group.share.heartbeat.interval.ms, 5 s by default on kbroker and Kafka 4.3: how late a
# member may hear that its assignment changed.
HEARTBEAT_INTERVAL_S = 5.0


class WarmUp:
    def __init__(self, partitions: int, settle_s: float = 2 * HEARTBEAT_INTERVAL_S) -> None:
        self.partitions = partitions
        self.settle_s = settle_s
        self._joined_at: float | None = None

    def settled(self, acked_per_consumer: Sequence[int], now: float, lag: int | None) -> bool:
        """Whether the group has settled, given each consumer's acknowledged records so far
        (they only grow), the time now (seconds, any monotonic clock) and the group's records
        not yet acknowledged (None: not known yet)."""
        if self._joined_at is None:
            if sum(acked_per_consumer) < self.partitions:
                return False
            if len(acked_per_consumer) <= self.partitions and 0 in acked_per_consumer:
                return False
            self._joined_at = now
        return now - self._joined_at >= self.settle_s and lag == 0
