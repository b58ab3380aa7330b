"""The exactly-once loop (compat_tests/eos_worker.py, confluent-kafka) on three brokers while
the broker that coordinates its transactions is killed with SIGKILL: the leader of its
`__transaction_state` partition moves, the new coordinator loads the partition and finishes
or aborts what was in flight, and the output still holds every input exactly once."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from helpers import create_topic, partition_view, wait_for
from local_cluster import LocalCluster

from compat_tests.eos_support import committed_offsets, end_offsets, read_values, start_worker
from kbroker.txn.state_machine import partition_for

pytestmark = pytest.mark.slow

TOTAL, PARTITIONS = 30_000, 3
# The cluster's transaction.state.log.num.partitions (Kafka's default).
STATE_PARTITIONS = 50


def coordinator_of(cluster: LocalCluster, transactional_id: str) -> int:
    """The broker leading the transactional id's `__transaction_state` partition."""
    partition = partition_for(transactional_id, STATE_PARTITIONS)
    view = wait_for(
        lambda: (
            (v := partition_view(cluster, "__transaction_state", partition)) is not None
            and v.leader >= 0
            and v
        ),
        60,
        "the transaction coordinator",
    )
    return view.leader


def test_exactly_once_loop_survives_its_coordinator_killed(cluster: LocalCluster) -> None:
    source, sink = "eos-source", "eos-sink"
    for topic in (source, sink):
        create_topic(cluster, topic, partitions=PARTITIONS, **{"min.insync.replicas": "2"})
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "linger.ms": 20}
    )
    for i in range(TOTAL):
        producer.produce(source, value=b"record-%06d" % i, partition=i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(60) == 0
    watcher = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{source}-group"})
    wanted = [TopicPartition(source, p) for p in range(PARTITIONS)]

    def progress() -> int:
        return sum(max(tp.offset, 0) for tp in watcher.committed(wanted, timeout=30))

    worker = start_worker(cluster.bootstrap, source, sink, TOTAL)
    try:
        wait_for(lambda: progress() >= TOTAL // 4, 120, "a quarter of the input processed")
        victim = coordinator_of(cluster, f"{source}-eos")
        cluster.brokers[victim].kill()
        wait_for(
            lambda: coordinator_of(cluster, f"{source}-eos") != victim,
            60,
            "a new transaction coordinator",
        )
        mark = progress()
        wait_for(lambda: progress() > mark, 120, "transactions committed by the new coordinator")
        time.sleep(0.5)
        cluster.brokers[victim].start(timeout=60)
        assert worker.wait(timeout=300) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
        watcher.close()
    output = read_values(cluster.bootstrap, sink, PARTITIONS, "read_committed", TOTAL)
    assert Counter(output) == Counter(b"RECORD-%06d" % i for i in range(TOTAL))
    assert committed_offsets(cluster.bootstrap, f"{source}-group", source, PARTITIONS) == (
        end_offsets(TOTAL, PARTITIONS)
    )
