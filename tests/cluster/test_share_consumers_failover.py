"""Java share consumers (kafka-clients 4.3) through the kill -9 of their share coordinator.

Three brokers on ZooKeeper, a topic of three replicas; two KafkaShareConsumers accept records
while the broker that FindCoordinator (key type 2) names as the share coordinator of the
topic's partition is SIGKILLed. The partition leader reads and writes the share-partition
state through whichever broker coordinates it next, so afterwards every record is accepted
exactly once and none is handed over again after its acknowledgement was confirmed
(compat_tests/share_workers.py logs both, record by record).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from helpers import call, create_topic, wait_for
from local_cluster import LocalCluster

from compat_tests.share_workers import ShareWorkers, accepted_counts, assert_at_least_once
from compat_tests.support import require
from compat_tests.zookeeper_process import java_available
from controller.zk_paths import kafka_uuid
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

RECORDS = 3000
LOCK_MS = 5000


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """conftest's cluster, with a minimum lock duration low enough for the group's 5 s."""
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    local = LocalCluster(
        tmp_path_factory.mktemp("cluster"),
        overrides={"group.share.min.record.lock.duration.ms": "1000"},
    )
    try:
        local.start()
        yield local
    finally:
        local.kill_all()


@pytest.fixture
def workers(cluster: LocalCluster, tmp_path: Path) -> Iterator[ShareWorkers]:
    found = ShareWorkers.compile(tmp_path / "jvm", cluster.bootstrap, tmp_path / "workers")
    yield found
    found.kill_all()


def _running(cluster: LocalCluster) -> int:
    return next(i for i, b in cluster.brokers.items() if b.running())


def share_coordinator(cluster: LocalCluster, group: str, topic: str) -> int | None:
    """The broker FindCoordinator names for the share partition `group`:`topic`:0."""
    metadata = asyncio.run(
        call(
            cluster,
            ApiKey.METADATA,
            MetadataRequest(topics=[MetadataRequestTopic(name=topic)]),
            _running(cluster),
        )
    )
    key = f"{group}:{kafka_uuid(metadata.topics[0].topic_id)}:0"
    request = FindCoordinatorRequest(key_type=2, coordinator_keys=[key])
    response = asyncio.run(call(cluster, ApiKey.FIND_COORDINATOR, request, _running(cluster)))
    found = response.coordinators[0]
    return found.node_id if found.error_code == ErrorCode.NONE else None


def test_share_consumers_survive_their_share_coordinators_kill(
    cluster: LocalCluster, workers: ShareWorkers
) -> None:
    topic = f"share-failover-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "batch.num.messages": 100}
    )
    for i in range(RECORDS):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(60) == 0
    group = f"share-failover-{uuid.uuid4().hex[:6]}"
    workers.configure(
        group,
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS)},
    )
    consumers = [
        workers.start(f"c{i}", group, topic, max_poll_records="50", work_us="2000")
        for i in range(2)
    ]
    workers.wait_until(lambda: len(accepted_counts(consumers)) >= 500, 240, "500 accepted")
    coordinator = wait_for(
        lambda: share_coordinator(cluster, group, topic), 60, "the share coordinator"
    )
    cluster.brokers[coordinator].kill()
    try:
        killed_with = len(accepted_counts(consumers))
        everything = [(0, offset) for offset in range(RECORDS)]
        workers.wait_until(
            lambda: sorted(accepted_counts(consumers)) == everything, 400, "all records accepted"
        )
        workers.stop_all()
    finally:
        # Cluster tests leave every broker running.
        cluster.brokers[coordinator].start(timeout=120)
    assert killed_with < RECORDS, "the coordinator was killed after the consumers had finished"
    assert_at_least_once(consumers, everything)
