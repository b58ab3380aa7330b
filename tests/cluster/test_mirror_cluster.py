"""Mirror topics and a three-broker ZooKeeper cluster (replication factor 3), on either side.

As destination: the leader of the mirror partition is killed -9 mid-copy; the fetcher moves to
the new leader and continues from its log end, and every replica ends with the source's
batches, offset for offset. As source: its leader is killed -9 mid-copy; the link finds the
new leader and nothing is lost or repeated."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from helpers import full_isr, log_bytes, partition_view, wait_for
from local_cluster import LocalCluster

from compat_tests.broker_process import BrokerProcess
from tests.integration.mirror_support import (
    DEADLINE_SECONDS,
    assert_identical,
    consume_all,
    create_topic,
    end_offsets,
    mirrors,
    wait_caught_up,
)
from wire.records.batch import iter_batches

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def single(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "single")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def batches(data: bytes) -> list[bytes]:
    return [data[pos : pos + h.size] for pos, h in iter_batches(data)]


def test_mirror_leader_killed_while_mirroring(cluster: LocalCluster, single: BrokerProcess) -> None:
    source = single
    topic = "clicks"
    create_topic(source.bootstrap, topic, 1)
    created = mirrors(
        "create",
        "--bootstrap-server",
        cluster.bootstrap,
        "--source-bootstrap",
        source.bootstrap,
        "--topic",
        topic,
        "--replication-factor",
        "3",
    )
    assert created.returncode == 0, created.stderr
    total = 3000
    failures: list[object] = []
    producer = Producer(
        {"bootstrap.servers": source.bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )

    def produce() -> None:
        for i in range(total):
            producer.produce(topic, b"%d" % i, on_delivery=lambda e, m: e and failures.append(e))
            if i % 100 == 0:
                producer.poll(0)
                time.sleep(0.02)
        producer.flush(120)

    writer = threading.Thread(target=produce)
    writer.start()
    deadline = time.monotonic() + DEADLINE_SECONDS
    while end_offsets(cluster.bootstrap, topic, 1)[0] < total // 3:
        assert time.monotonic() < deadline, "mirror never started copying"
        time.sleep(0.1)
    view = partition_view(cluster, topic)
    assert view is not None
    victim = cluster.brokers[view.leader]
    victim.kill()
    wait_for(
        lambda: (v := partition_view(cluster, topic)) and v.leader not in (-1, view.leader),
        DEADLINE_SECONDS,
        "a new leader of the mirror partition",
    )
    victim.start(timeout=60)
    writer.join(150)
    assert not writer.is_alive() and not failures, failures
    wait_caught_up(source.bootstrap, cluster.bootstrap, topic, 1)
    wait_for(lambda: full_isr(cluster, topic), DEADLINE_SECONDS, "the killed replica in the ISR")
    assert_identical(source.bootstrap, cluster.bootstrap, topic, 1)
    assert consume_all(cluster.bootstrap, topic, 1, "read_uncommitted") == [
        str(i) for i in range(total)
    ]
    leader_batches = batches(log_bytes(cluster, 1, topic))
    for broker_id in (2, 3):
        assert batches(log_bytes(cluster, broker_id, topic)) == leader_batches


def test_source_leader_killed_while_mirroring(cluster: LocalCluster, single: BrokerProcess) -> None:
    """The source is the three-broker cluster (replication factor 3): its leader is killed -9
    mid-copy; the link learns the new leader from the source's metadata and goes on."""
    topic = "views"
    destination = single
    create_topic(cluster.bootstrap, topic, 1, replicas=3)
    wait_for(lambda: full_isr(cluster, topic), DEADLINE_SECONDS, "the source topic's ISR")
    created = mirrors(
        "create",
        "--bootstrap-server",
        destination.bootstrap,
        "--source-bootstrap",
        cluster.bootstrap,
        "--topic",
        topic,
    )
    assert created.returncode == 0, created.stderr
    total = 3000
    failures: list[object] = []
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )

    def produce() -> None:
        for i in range(total):
            producer.produce(topic, b"%d" % i, on_delivery=lambda e, m: e and failures.append(e))
            if i % 100 == 0:
                producer.poll(0)
                time.sleep(0.02)
        producer.flush(120)

    writer = threading.Thread(target=produce)
    writer.start()
    deadline = time.monotonic() + DEADLINE_SECONDS
    while end_offsets(destination.bootstrap, topic, 1)[0] < total // 3:
        assert time.monotonic() < deadline, "mirror never started copying"
        time.sleep(0.1)
    view = partition_view(cluster, topic)
    assert view is not None
    victim = cluster.brokers[view.leader]
    victim.kill()
    try:
        writer.join(150)
        assert not writer.is_alive() and not failures, failures
        wait_caught_up(cluster.bootstrap, destination.bootstrap, topic, 1)
        assert_identical(cluster.bootstrap, destination.bootstrap, topic, 1)
        assert consume_all(destination.bootstrap, topic, 1, "read_uncommitted") == [
            str(i) for i in range(total)
        ]
    finally:
        victim.start(timeout=60)
