"""ISR shrink and expansion, and min.insync.replicas with brokers down."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from helpers import (
    create_topic,
    full_isr,
    partition_view,
    pause,
    produce_raw,
    resume,
    wait_for,
)
from local_cluster import LocalCluster

from wire.errors import ErrorCode

pytestmark = pytest.mark.slow

OFFSETS = "__consumer_offsets"


def test_paused_follower_leaves_the_isr_and_rejoins(cluster: LocalCluster) -> None:
    topic = "paused"
    create_topic(cluster, topic)
    view = wait_for(lambda: full_isr(cluster, topic), 60, "a full ISR")
    follower = next(r for r in view.replicas if r != view.leader)
    pause(cluster, follower)
    try:
        shrunk = wait_for(
            lambda: (
                (v := partition_view(cluster, topic)) is not None and follower not in v.isr and v
            ),
            15,
            "the paused follower to leave the ISR",
        )
        # The leader shrank it (the follower is still registered: its session is alive).
        assert shrunk.leader == view.leader
        assert sorted(shrunk.isr) == sorted(r for r in view.replicas if r != follower)
    finally:
        resume(cluster, follower)
    wait_for(
        lambda: (v := partition_view(cluster, topic)) is not None and follower in v.isr,
        30,
        "the follower to rejoin the ISR",
    )


def test_acks_all_refused_with_two_of_three_brokers_stopped(cluster: LocalCluster) -> None:
    topic = "min-isr"
    create_topic(cluster, topic, **{"min.insync.replicas": "2"})
    view = wait_for(lambda: full_isr(cluster, topic), 60, "a full ISR")
    assert produce_raw(cluster, view.leader, topic, -1, 3) == ErrorCode.NONE
    others = [r for r in view.replicas if r != view.leader]
    for broker_id in others:
        cluster.brokers[broker_id].stop(timeout=60)
    try:
        wait_for(
            lambda: (v := partition_view(cluster, topic)) is not None and v.isr == [view.leader],
            30,
            "the ISR to shrink to the leader",
        )
        # Metadata may show the shrunk ISR a moment before the partition applies it (a
        # write then waits for the stopped followers: NOT_ENOUGH_REPLICAS_AFTER_APPEND).
        wait_for(
            lambda: (
                produce_raw(cluster, view.leader, topic, -1, 3) == ErrorCode.NOT_ENOUGH_REPLICAS
            ),
            30,
            "acks=all refused before the append",
        )
        # acks=1 does not need the ISR.
        assert produce_raw(cluster, view.leader, topic, 1, 3) == ErrorCode.NONE
    finally:
        for broker_id in others:
            cluster.brokers[broker_id].start(timeout=60)
    wait_for(lambda: full_isr(cluster, topic), 60, "the ISR to heal")
    assert produce_raw(cluster, view.leader, topic, -1, 3) == ErrorCode.NONE


def _consume(cluster: LocalCluster, topic: str, count: int) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "cluster-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[int] = []
    deadline = time.monotonic() + 60
    while len(values) < count and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            values.append(int(msg.value()))
    consumer.commit(asynchronous=False)
    consumer.close()
    return values


def test_committed_offsets_survive_the_coordinator_broker(cluster: LocalCluster) -> None:
    topic = "grouped"
    create_topic(cluster, topic, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(200):
        producer.produce(topic, str(i).encode())
    assert producer.flush(30) == 0
    assert sorted(_consume(cluster, topic, 200)) == list(range(200))
    offsets = [partition_view(cluster, OFFSETS, p) for p in range(3)]
    assert all(v is not None and len(v.isr) == 3 for v in offsets)
    for i in range(200, 300):
        producer.produce(topic, str(i).encode())
    assert producer.flush(30) == 0
    victim = offsets[0].leader  # type: ignore[union-attr]
    cluster.brokers[victim].kill()
    try:
        wait_for(
            lambda: all(
                (v := partition_view(cluster, OFFSETS, p)) is not None
                and v.leader not in (-1, victim)
                for p in range(3)
            ),
            60,
            "new leaders for the offsets topic",
        )
        # The group resumes from its committed offsets on the new coordinator.
        assert sorted(_consume(cluster, topic, 100)) == list(range(200, 300))
    finally:
        cluster.brokers[victim].start(timeout=60)
    wait_for(lambda: full_isr(cluster, OFFSETS), 60, "the offsets topic in sync")


def test_graceful_stop_hands_leadership_over_first(cluster: LocalCluster) -> None:
    topic = "handover"
    create_topic(cluster, topic)
    view = wait_for(lambda: full_isr(cluster, topic), 60, "a full ISR")
    cluster.brokers[view.leader].stop(timeout=60)
    try:
        # Controlled shutdown: a new leader right away, not after the session timeout.
        moved = wait_for(
            lambda: (
                (v := partition_view(cluster, topic)) is not None
                and v.leader not in (-1, view.leader)
                and v
            ),
            3,
            "a new leader",
        )
        assert view.leader not in moved.isr
    finally:
        cluster.brokers[view.leader].start(timeout=60)
    wait_for(lambda: full_isr(cluster, topic), 60, "the ISR to heal")
