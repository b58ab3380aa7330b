"""A KIP-848 consumer group (confluent-kafka, ``group.protocol=consumer``) on three brokers
while the broker that coordinates it is killed with SIGKILL in the middle of a rebalance.

Three members share a 12-partition topic a producer keeps writing to; a fourth joins, and as
soon as one of the first three revokes a partition for it (the group reconciling towards the
new target assignment) the coordinator's broker is killed. __consumer_offsets has three
replicas, and the coordinator writes the group's records (Kafka's consumer group record
types: metadata, member subscriptions, target assignment, current member assignment) with
acks=all, so the follower elected in its place loads the group as it was: the members keep
their member ids and partitions (none of them is fenced and loses its partitions), and the
rebalance completes at the new coordinator.

Checked throughout: a partition is held by one member at a time (each member's assignment
intervals, from its assign callback to its revoke callback, never overlap another's on the
same partition, and a member only receives records of partitions it holds), no committed
offset goes back (polled every 0.2 s), and every acknowledged record is consumed.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from helpers import BackgroundProducer, admin, create_topic, partition_view, wait_for
from local_cluster import LocalCluster

from kbroker.group.offsets_store import OFFSETS_TOPIC, partition_for

pytestmark = pytest.mark.slow

TOPIC = "kip848-failover"
GROUP = "kip848-failover-group"
PARTITIONS = 12
# The cluster's offsets.topic.num.partitions (tests/cluster/local_cluster.py).
OFFSETS_PARTITIONS = 3


@dataclass
class Holding:
    """One member holding one partition from ``start`` until ``end`` (monotonic seconds)."""

    member: str
    start: float
    end: float | None = None


@dataclass
class Ledger:
    """What the members report from their callbacks and polls, under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    holdings: dict[int, list[Holding]] = field(default_factory=lambda: defaultdict(list))
    held: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    consumed: set[int] = field(default_factory=set)
    # Records a member received for a partition it did not hold: (member, partition, offset).
    strays: list[tuple[str, int, int]] = field(default_factory=list)
    lost: list[tuple[str, list[int]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Set by the first revocation once armed: the moment to kill the coordinator.
    armed: bool = False
    revoking: threading.Event = field(default_factory=threading.Event)

    def assigned(self, member: str, partitions: list[TopicPartition]) -> None:
        now = time.monotonic()
        with self.lock:
            for tp in partitions:
                self.holdings[tp.partition].append(Holding(member, now))
                self.held[member].add(tp.partition)

    def released(self, member: str, partitions: list[TopicPartition], lost: bool) -> None:
        now = time.monotonic()
        with self.lock:
            for tp in partitions:
                for holding in self.holdings[tp.partition]:
                    if holding.member == member and holding.end is None:
                        holding.end = now
                self.held[member].discard(tp.partition)
            if lost:
                self.lost.append((member, sorted(tp.partition for tp in partitions)))
            if partitions and self.armed:
                self.revoking.set()

    def received(self, member: str, partition: int, offset: int, value: bytes) -> None:
        with self.lock:
            if partition not in self.held[member]:
                self.strays.append((member, partition, offset))
            self.consumed.add(int(value))

    def assignment(self) -> dict[str, set[int]]:
        with self.lock:
            return {m: set(p) for m, p in self.held.items() if p}


class Member:
    """A confluent-kafka consumer of the group polling in its own thread."""

    def __init__(self, cluster: LocalCluster, name: str, ledger: Ledger) -> None:
        self.name = name
        self._ledger = ledger
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 200,
            }
        )
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._consumer.subscribe(
            [TOPIC],
            on_assign=lambda _, tps: self._ledger.assigned(self.name, tps),
            on_revoke=lambda _, tps: self._ledger.released(self.name, tps, lost=False),
            on_lost=lambda _, tps: self._ledger.released(self.name, tps, lost=True),
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msg = self._consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    self._ledger.errors.append(f"{self.name}: {msg.error()}")
                    continue
                self._ledger.received(self.name, msg.partition(), msg.offset(), msg.value())
        finally:
            self._consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


class CommittedWatch:
    """Polls the group's committed offsets (OffsetFetch through a consumer that never
    subscribes, so it is no member); records every offset going back."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
        self.latest: dict[int, int] = {}
        self.regressions: list[tuple[int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        wanted = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        try:
            while not self._stop.wait(0.2):
                try:
                    offsets = self._reader.committed(wanted, timeout=5)
                except KafkaException:
                    continue  # no coordinator for a moment: the failover itself
                for tp in offsets:
                    if tp.error is not None or tp.offset < 0:
                        continue
                    before = self.latest.get(tp.partition, -1)
                    if tp.offset < before:
                        self.regressions.append((tp.partition, before, tp.offset))
                    self.latest[tp.partition] = max(before, tp.offset)
        finally:
            self._reader.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def coordinator(cluster: LocalCluster, not_on: int | None = None) -> int | None:
    view = partition_view(cluster, OFFSETS_TOPIC, partition_for(GROUP, OFFSETS_PARTITIONS))
    if view is None or view.leader in (-1, not_on):
        return None
    return view.leader


def member_ids(cluster: LocalCluster) -> dict[str, str] | None:
    """client id -> member id, as the coordinator describes the group (ConsumerGroupDescribe)."""
    client = admin(cluster)  # kept until the answer is in: its futures die with it
    description = client.describe_consumer_groups([GROUP])[GROUP].result(10)
    return {m.client_id: m.member_id for m in description.members} or None


def balanced(ledger: Ledger, members: int) -> bool:
    """Every member holds its share and the holdings cover each partition once."""
    held = ledger.assignment()
    every = [p for parts in held.values() for p in parts]
    return (
        len(held) == members
        and sorted(every) == list(range(PARTITIONS))
        and all(len(p) == PARTITIONS // members for p in held.values())
    )


def overlaps(ledger: Ledger) -> list[tuple[int, Holding, Holding]]:
    found = []
    with ledger.lock:
        for partition, holdings in ledger.holdings.items():
            ordered = sorted(holdings, key=lambda h: h.start)
            for before, after in zip(ordered, ordered[1:], strict=False):
                if before.end is None or before.end > after.start:
                    found.append((partition, before, after))
    return found


def end_offsets(cluster: LocalCluster) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{GROUP}-reader"})
    try:
        return {
            p: reader.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
            for p in range(PARTITIONS)
        }
    finally:
        reader.close()


def test_consumer_group_survives_coordinator_kill_during_rebalance(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, partitions=PARTITIONS)
    ledger = Ledger()
    producer = BackgroundProducer(cluster, TOPIC)
    watch = CommittedWatch(cluster)
    members = [Member(cluster, f"member-{n}", ledger) for n in range(4)]
    victim: int | None = None
    producer.start()
    watch.start()
    try:
        for member in members[:3]:
            member.start()
        wait_for(lambda: balanced(ledger, 3), 90, "three members sharing the partitions")
        wait_for(lambda: len(ledger.consumed) > 1000, 60, "records consumed")
        ids_before = wait_for(lambda: member_ids(cluster), 30, "the group's members")
        victim = wait_for(lambda: coordinator(cluster), 30, "the group coordinator")

        ledger.armed = True
        members[3].start()
        assert ledger.revoking.wait(60), "no member revoked a partition for the fourth"
        cluster.brokers[victim].kill()
        killed_at = time.monotonic()

        wait_for(lambda: coordinator(cluster, not_on=victim), 60, "a new coordinator")
        wait_for(lambda: balanced(ledger, 4), 90, "four members sharing the partitions")
        settled = time.monotonic() - killed_at
        ids_after = wait_for(lambda: member_ids(cluster), 30, "the group's members")
        mark = len(ledger.consumed)
        wait_for(lambda: len(ledger.consumed) > mark + 1000, 60, "records consumed after")
        producer.stop()
        acked = {value for value, _ in producer.acked}
        assert not producer.errors
        wait_for(lambda: acked <= ledger.consumed, 90, "every acknowledged record consumed")
        ends = end_offsets(cluster)
        wait_for(lambda: watch.latest == ends, 60, "committed offsets at the log ends")
    finally:
        producer.stop()
        watch.stop()
        for member in members:
            member.stop()
        if victim is not None and not cluster.brokers[victim].running():
            cluster.brokers[victim].start(timeout=60)

    print(f"rebalance completed {settled:.1f} s after the kill; {len(acked)} records")
    # The new coordinator resumed the group: the same members, none fenced.
    assert set(ids_before.items()) <= set(ids_after.items())
    assert len(ids_after) == 4
    assert ledger.lost == []
    assert overlaps(ledger) == []
    assert ledger.strays == []
    assert watch.regressions == []
    assert ledger.errors == []
