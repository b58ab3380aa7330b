"""Leader failover under an idempotent acks=all librdkafka producer, and replica convergence."""

from __future__ import annotations

import time

import pytest
from helpers import (
    BackgroundProducer,
    create_topic,
    full_isr,
    log_bytes,
    partition_view,
    read_all,
    wait_for,
)
from local_cluster import LocalCluster

pytestmark = pytest.mark.slow


def _kill_leader_and_restart(cluster: LocalCluster, topic: str) -> None:
    view = wait_for(lambda: full_isr(cluster, topic), 90, "a full ISR")
    old = view.leader
    cluster.brokers[old].kill()
    wait_for(
        lambda: (v := partition_view(cluster, topic)) is not None and v.leader not in (-1, old),
        60,
        "a new leader",
    )
    time.sleep(1.0)
    cluster.brokers[old].start(timeout=60)


def test_leader_killed_twice_loses_no_acknowledged_record(cluster: LocalCluster) -> None:
    topic = "failover"
    create_topic(cluster, topic, **{"min.insync.replicas": "2"})
    producer = BackgroundProducer(cluster, topic)
    producer.start()
    try:
        wait_for(lambda: len(producer.acked) > 200, 60, "first acknowledgements")
        _kill_leader_and_restart(cluster, topic)
        wait_for(lambda: len(producer.acked) > 600, 120, "acknowledgements after a failover")
        _kill_leader_and_restart(cluster, topic)
        before = len(producer.acked)
        wait_for(lambda: len(producer.acked) > before + 300, 120, "acknowledgements again")
    finally:
        producer.stop()
    assert producer.errors == []
    consumed = [(int(v), o) for v, o in read_all(cluster, topic)]
    values = [v for v, _ in consumed]
    assert len(values) == len(set(values)), "duplicates"
    assert values == sorted(values), "out of order"
    missing = {v for v, _ in producer.acked} - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost"
    # Every acknowledged record is where its acknowledgement said.
    assert {v: o for v, o in consumed} | dict(producer.acked) == {v: o for v, o in consumed}
    wait_for(lambda: full_isr(cluster, topic), 90, "the ISR to heal")
    wait_for(
        lambda: (
            log_bytes(cluster, 1, topic)
            == log_bytes(cluster, 2, topic)
            == log_bytes(cluster, 3, topic)
        ),
        30,
        "identical replicas",
    )
