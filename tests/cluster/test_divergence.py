"""Divergent logs: a former leader's records that never reached the ISR are truncated when it
returns; a reassigned replica copies the log it joins; added and deleted partitions."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewPartitions
from helpers import (
    admin,
    create_topic,
    full_isr,
    log_bytes,
    partition_view,
    produce_raw,
    read_all,
    reassign,
    reassignments,
    wait_for,
)
from local_cluster import LocalCluster

from wire.errors import ErrorCode

pytestmark = pytest.mark.slow


def test_diverged_replica_truncates_and_replicas_converge(cluster: LocalCluster) -> None:
    topic = "diverge"
    create_topic(cluster, topic)
    view = wait_for(lambda: full_isr(cluster, topic), 60, "a full ISR")
    old = view.leader
    followers = [r for r in view.replicas if r != old]
    assert produce_raw(cluster, old, topic, -1, 10, b"committed") == ErrorCode.NONE
    # Kill the followers, write on the leader alone, kill it: all well within the ZooKeeper
    # session timeout and replica.lag.time.max.ms, so the stored ISR still names all three.
    for f in followers:
        cluster.brokers[f].kill()
    assert produce_raw(cluster, old, topic, 1, 5, b"lost") == ErrorCode.NONE
    cluster.brokers[old].kill()
    sizes = {b: len(log_bytes(cluster, b, topic)) for b in cluster.brokers}
    assert sizes[old] > sizes[followers[0]] == sizes[followers[1]]
    for f in followers:
        cluster.brokers[f].start(timeout=60)
    new_view = wait_for(
        lambda: (v := partition_view(cluster, topic)) is not None and v.leader in followers and v,
        60,
        "a new leader",
    )
    assert (
        produce_raw(cluster, new_view.leader, topic, -1, 7, b"new", until_leading=True)
        == ErrorCode.NONE
    )
    cluster.brokers[old].start(timeout=60)
    wait_for(lambda: full_isr(cluster, topic), 60, "the old leader back in sync")
    wait_for(
        lambda: (
            log_bytes(cluster, 1, topic)
            == log_bytes(cluster, 2, topic)
            == log_bytes(cluster, 3, topic)
        ),
        30,
        "identical replicas",
    )
    records = read_all(cluster, topic)
    assert records == [(b"committed", o) for o in range(10)] + [(b"new", o) for o in range(10, 17)]


def test_reassignment_moves_a_replica_and_its_data(cluster: LocalCluster) -> None:
    topic = "moving"
    create_topic(cluster, topic, replication=2)
    view = wait_for(lambda: partition_view(cluster, topic), 30, "the topic")
    assert (
        produce_raw(cluster, view.leader, topic, -1, 20, b"before", until_leading=True)
        == ErrorCode.NONE
    )
    (newcomer,) = set(cluster.brokers) - set(view.replicas)
    leaving = view.leader
    target = [r for r in view.replicas if r != leaving] + [newcomer]
    assert reassign(cluster, topic, target) == ErrorCode.NONE
    done = wait_for(
        lambda: (
            not reassignments(cluster)
            and (v := partition_view(cluster, topic)) is not None
            and v.replicas == target
            and sorted(v.isr) == sorted(target)
            and v
        ),
        60,
        "the reassignment to complete",
    )
    assert done.leader == target[0]
    assert reassign(cluster, topic, None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    wait_for(
        lambda: not (cluster.brokers[leaving].log_dir / f"{topic}-0").exists(),
        30,
        "the removed replica's log to be deleted",
    )
    assert (
        produce_raw(cluster, done.leader, topic, -1, 5, b"after", until_leading=True)
        == ErrorCode.NONE
    )
    wait_for(
        lambda: log_bytes(cluster, target[0], topic) == log_bytes(cluster, target[1], topic),
        30,
        "identical replicas",
    )
    assert len(read_all(cluster, topic)) == 25


def test_partitions_added_then_topic_deleted_everywhere(cluster: LocalCluster) -> None:
    topic = "doomed"
    create_topic(cluster, topic)
    client = admin(cluster)
    client.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    for p in range(3):
        wait_for(lambda p=p: full_isr(cluster, topic, p), 60, f"partition {p} in sync")
    dirs = [b.log_dir / f"{topic}-{p}" for b in cluster.brokers.values() for p in range(3)]
    assert all(d.exists() for d in dirs)
    client.delete_topics([topic])[topic].result(30)
    wait_for(lambda: not any(d.exists() for d in dirs), 30, "every replica's log deleted")


def test_follower_behind_the_leaders_log_start_starts_over_there(cluster: LocalCluster) -> None:
    topic = "behind"
    create_topic(cluster, topic, **{"segment.bytes": "1024"})
    view = wait_for(lambda: full_isr(cluster, topic), 60, "a full ISR")
    away = next(r for r in view.replicas if r != view.leader)
    cluster.brokers[away].stop(timeout=60)
    try:
        for _ in range(20):
            assert produce_raw(cluster, view.leader, topic, 1, 10, b"x" * 100) == ErrorCode.NONE
        # Everything the stopped follower misses below offset 150 goes (several segments).
        client = admin(cluster)  # kept: the futures need the client alive
        # Refused (OFFSET_OUT_OF_RANGE) until the high watermark passes 150: the acks=1
        # records reach it once the remaining follower fetched them or left the ISR.
        low = wait_for(
            lambda: next(
                iter(client.delete_records([TopicPartition(topic, 0, 150)]).values())
            ).result(30),
            60,
            "the records below 150 deleted",
        )
        assert low.low_watermark == 150
    finally:
        cluster.brokers[away].start(timeout=60)
    # It cannot fetch from its own log end any more: it must restart at the log start.
    wait_for(lambda: full_isr(cluster, topic), 60, "the follower back in sync")
    assert produce_raw(cluster, view.leader, topic, -1, 5, b"after") == ErrorCode.NONE
    assert read_all(cluster, topic) == [(b"x" * 100, o) for o in range(150, 200)] + [
        (b"after", o) for o in range(200, 205)
    ]
    segments = sorted((cluster.brokers[away].log_dir / f"{topic}-0").glob("*.log"))
    assert segments[0].name == f"{150:020d}.log"
