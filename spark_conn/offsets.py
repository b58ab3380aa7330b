"""Partition discovery, offset resolution and per-trigger limits, on the driver.

Offsets travel through Spark (and its checkpoint's ``offsets/`` log) as the JSON object
Spark's Kafka source uses, ``{"topic": {"0": 42, "1": 7}}``: for each partition, the offset
of the next record to read.
"""

from __future__ import annotations

from collections.abc import Mapping

from kbroker.data_client import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    DataClient,
)
from spark_conn.options import OffsetSpec, OptionError, SourceOptions

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Records the query should read are gone (failOnDataLoss=true)."""


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Offsets as the JSON-able dict Spark stores: topic -> partition (str) -> offset."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    """The inverse of ``to_json``."""
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in data.items()
        for partition, offset in partitions.items()
    }


def rate_limit(start: Mapping[TopicPartition, int], latest: Offsets, limit: int) -> Offsets:
    """End offsets that read at most ``limit`` records past ``start`` in total, shared out
    over the partitions in proportion to how many records each has waiting (largest
    remainders first), so every partition with data keeps moving."""
    lag = {tp: max(0, end - start[tp]) for tp, end in latest.items()}
    total = sum(lag.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: limit * n // total for tp, n in lag.items()}
    spare = limit - sum(shares.values())
    by_remainder = sorted(lag, key=lambda tp: (-((limit * lag[tp]) % total), tp))
    for tp in by_remainder:
        if spare == 0:
            break
        if shares[tp] < lag[tp]:
            shares[tp] += 1
            spare -= 1
    return {tp: start[tp] + shares[tp] for tp in latest}


class OffsetReader:
    """Answers "which partitions" and "which offsets" for one query, through DataClient."""

    def __init__(self, options: SourceOptions, client: DataClient) -> None:
        self.options = options
        self.client = client

    def partitions(self) -> list[TopicPartition]:
        """The topic partitions the query reads now, sorted; topics that do not exist (yet)
        contribute none."""
        o = self.options
        if o.subscribe is not None:
            found = self.client.metadata(list(o.subscribe))
        elif o.pattern is not None:
            found = {t: ps for t, ps in self.client.metadata(None).items() if o.matches(t)}
        else:
            assert o.assign is not None
            found = self.client.metadata(sorted({t for t, _ in o.assign}))
            missing = [tp for tp in o.assign if tp[1] not in found.get(tp[0], [])]
            if missing:
                raise OptionError(f"assigned partitions do not exist: {missing}")
            return list(o.assign)
        return sorted((t, p) for t, ps in found.items() for p in ps)

    def earliest(self, tps: list[TopicPartition]) -> Offsets:
        """The log start offset of each partition."""
        return self.client.list_offsets(tps, EARLIEST) if tps else {}

    def latest(self, tps: list[TopicPartition]) -> Offsets:
        """The log end offset (high watermark) of each partition; with read_committed, the
        last stable offset, which no open transaction is below."""
        if not tps:
            return {}
        isolation = READ_COMMITTED if self.options.read_committed else READ_UNCOMMITTED
        return self.client.list_offsets(tps, LATEST, isolation_level=isolation)

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], what: str) -> Offsets:
        """Concrete offsets of ``tps`` for a starting or ending spec."""
        if not tps:
            return {}
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "timestamps":
            return self._by_timestamp(spec, tps, what)
        given = dict(spec.offsets or {})
        missing = [tp for tp in tps if tp not in given]
        if missing:
            raise OptionError(f"{what} must give an offset for every partition; missing {missing}")
        out: Offsets = {}
        earliest = self.earliest([tp for tp in tps if given[tp] == EARLIEST])
        latest = self.latest([tp for tp in tps if given[tp] == LATEST])
        for tp in tps:
            out[tp] = earliest.get(tp, latest.get(tp, given[tp]))
        return out

    def _by_timestamp(self, spec: OffsetSpec, tps: list[TopicPartition], what: str) -> Offsets:
        if spec.timestamp is not None:
            targets = {tp: spec.timestamp for tp in tps}
        else:
            given = dict(spec.offsets or {})
            missing = [tp for tp in tps if tp not in given]
            if missing:
                raise OptionError(f"{what} must give a timestamp for every partition: {missing}")
            targets = {tp: given[tp] for tp in tps}
        out: Offsets = {}
        for ts in sorted(set(targets.values())):
            same = [tp for tp in tps if targets[tp] == ts]
            out.update(self.client.list_offsets(same, ts))
        too_late = [tp for tp, offset in out.items() if offset < 0]
        if too_late:
            if not self.options.timestamp_strategy_latest:
                raise OptionError(
                    f"no record at or after the starting timestamp in {too_late}; set "
                    "startingOffsetsByTimestampStrategy=latest to start at the end instead"
                )
            out.update(self.latest(too_late))
        return out
