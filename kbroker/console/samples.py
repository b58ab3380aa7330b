"""The time series the console's charts draw, kept in memory for ``retention`` seconds.

A pure core: every call is given the time (seconds since the epoch), nothing reads a clock.
The sampler feeds it what it reads from the cluster every interval:

- log end offsets of every partition: the records per second each topic receives are the
  growth of its partitions' end offsets since the previous sample (a partition that shrank,
  as a topic deleted and created again does, counts from zero);
- each group's committed offsets against those end offsets: its lag, in total and per
  partition;
- the under-replicated and offline partition counts;
- when the broker is kbroker, the counters of its Prometheus endpoint turned into rates.

Series of things not seen for a whole retention period are dropped, so a cluster whose topics
come and go does not grow the console's memory.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

TopicPartition = tuple[str, int]
Point = tuple[float, float]
DEFAULT_RETENTION_SECONDS = 3600.0

TOTAL_THROUGHPUT = "throughput"
UNDER_REPLICATED = "under_replicated"
OFFLINE = "offline"


def throughput_key(topic: str) -> str:
    return f"throughput:{topic}"


def lag_key(group: str) -> str:
    return f"lag:{group}"


def metric_key(name: str, label: str) -> str:
    return f"metric:{name}:{label}"


class SampleStore:
    """Named series of (time, value) points, each at most ``retention`` seconds long."""

    def __init__(self, retention: float = DEFAULT_RETENTION_SECONDS) -> None:
        self.retention = retention
        self._series: dict[str, deque[Point]] = {}
        self._ends: dict[TopicPartition, int] = {}
        self._ends_time: float | None = None
        self._counters: dict[tuple[str, str], float] = {}
        self._counters_time: float | None = None
        # The newest lag of each group, per partition (what the last sample found).
        self.partition_lag: dict[str, dict[TopicPartition, int]] = {}

    def add(self, key: str, now: float, value: float) -> None:
        points = self._series.setdefault(key, deque())
        points.append((now, value))
        while points and points[0][0] < now - self.retention:
            points.popleft()

    def series(self, key: str) -> list[Point]:
        return list(self._series.get(key, ()))

    def latest(self, key: str) -> float | None:
        points = self._series.get(key)
        return points[-1][1] if points else None

    def record_end_offsets(self, now: float, ends: Mapping[TopicPartition, int]) -> None:
        """Per-topic records per second since the previous sample."""
        if self._ends_time is not None and now > self._ends_time:
            elapsed = now - self._ends_time
            grown: dict[str, int] = {}
            for tp, end in ends.items():
                before = self._ends.get(tp)
                if before is None:
                    grown.setdefault(tp[0], 0)
                    continue
                grown[tp[0]] = grown.get(tp[0], 0) + (end - before if end >= before else end)
            for topic, count in grown.items():
                self.add(throughput_key(topic), now, count / elapsed)
            self.add(TOTAL_THROUGHPUT, now, sum(grown.values()) / elapsed)
        self._ends = dict(ends)
        self._ends_time = now
        self.prune(now)

    def record_lag(
        self,
        now: float,
        committed: Mapping[str, Mapping[TopicPartition, int]],
        ends: Mapping[TopicPartition, int],
    ) -> None:
        """Each group's lag: end offset minus committed offset, over the partitions whose
        end offset is known."""
        lag_now: dict[str, dict[TopicPartition, int]] = {}
        for group, offsets in committed.items():
            per_partition = {
                tp: max(ends[tp] - offset, 0) for tp, offset in offsets.items() if tp in ends
            }
            lag_now[group] = per_partition
            self.add(lag_key(group), now, sum(per_partition.values()))
        self.partition_lag = lag_now

    def record_partition_health(self, now: float, under_replicated: int, offline: int) -> None:
        self.add(UNDER_REPLICATED, now, under_replicated)
        self.add(OFFLINE, now, offline)

    def record_counters(self, now: float, counters: Mapping[tuple[str, str], float]) -> None:
        """Rates per second of monotonic counters ((metric, label) -> value), such as
        kbroker's bytes in and out per topic; a counter that went down (a restarted broker)
        counts from zero."""
        if self._counters_time is not None and now > self._counters_time:
            elapsed = now - self._counters_time
            for (name, label), value in counters.items():
                before = self._counters.get((name, label))
                if before is None:
                    continue
                grown = value - before if value >= before else value
                self.add(metric_key(name, label), now, grown / elapsed)
        self._counters = dict(counters)
        self._counters_time = now

    def prune(self, now: float) -> None:
        """Drop the series whose newest point is older than the retention."""
        stale = [k for k, p in self._series.items() if not p or p[-1][0] < now - self.retention]
        for key in stale:
            del self._series[key]
