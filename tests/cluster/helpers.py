"""Helpers for the cluster tests: waiting, metadata look-ups, producing and reading back."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from local_cluster import LocalCluster

from kbroker.client import BrokerConnection
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from wire.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.records.record import Record, build_batch

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except KafkaException:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


@dataclass(frozen=True)
class PartitionView:
    leader: int
    replicas: list[int]
    isr: list[int]


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 10000})


def partition_view(cluster: LocalCluster, topic: str, partition: int = 0) -> PartitionView | None:
    md = admin(cluster).list_topics(topic, timeout=10)
    info = md.topics.get(topic)
    if info is None or info.error is not None or partition not in info.partitions:
        return None
    p = info.partitions[partition]
    return PartitionView(p.leader, list(p.replicas), list(p.isrs))


def controller_id(cluster: LocalCluster) -> int:
    return int(admin(cluster).list_topics(timeout=10).controller_id)


def create_topic(
    cluster: LocalCluster, name: str, partitions: int = 1, replication: int = 3, **configs: str
) -> None:
    client = admin(cluster)
    futures = client.create_topics(
        [NewTopic(name, partitions, replication, config=dict(configs))], request_timeout=30
    )
    futures[name].result(60)
    wait_for(
        lambda: all(
            (v := partition_view(cluster, name, p)) is not None and len(v.isr) == replication
            for p in range(partitions)
        ),
        60,
        f"{name} fully in sync",
    )


def full_isr(cluster: LocalCluster, topic: str, partition: int = 0) -> PartitionView | None:
    view = partition_view(cluster, topic, partition)
    return view if view is not None and view.leader >= 0 and len(view.isr) == 3 else None


@dataclass
class BackgroundProducer:
    """An idempotent acks=all librdkafka producer writing increasing numbers in a thread."""

    cluster: LocalCluster
    topic: str
    acked: list[tuple[int, int]] = field(default_factory=list)
    # The partition of each acknowledged value (the topic may have several).
    partition_of: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.cluster.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )

        def delivered(err: object, msg: object) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                value = int(msg.value())  # type: ignore[attr-defined]
                self.acked.append((value, msg.offset()))  # type: ignore[attr-defined]
                self.partition_of[value] = msg.partition()  # type: ignore[attr-defined]

        i = 0
        while not self._stop.is_set():
            producer.produce(self.topic, str(i).encode(), on_delivery=delivered)
            i += 1
            producer.poll(0.01)
        remaining = producer.flush(150)
        if remaining:
            self.errors.append(f"{remaining} messages not delivered")

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(200)


def read_all(cluster: LocalCluster, topic: str, partition: int = 0) -> list[tuple[bytes, int]]:
    """(value, offset) of every record from the log start to the high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "cluster-test-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out: list[tuple[bytes, int]] = []
        deadline = time.monotonic() + 60
        while (not out or out[-1][1] < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            out.append((msg.value(), msg.offset()))
        return out
    finally:
        consumer.close()


def log_bytes(cluster: LocalCluster, broker_id: int, topic: str, partition: int = 0) -> bytes:
    """The concatenated segment files of a replica (whole batches as replicated)."""
    directory = cluster.brokers[broker_id].log_dir / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(Path(directory).glob("*.log")))


def pause(cluster: LocalCluster, broker_id: int) -> None:
    pid = cluster.brokers[broker_id].pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)


def resume(cluster: LocalCluster, broker_id: int) -> None:
    pid = cluster.brokers[broker_id].pid
    assert pid is not None
    os.kill(pid, signal.SIGCONT)


def produce_raw(
    cluster: LocalCluster,
    broker_id: int,
    topic: str,
    acks: int,
    count: int,
    value: bytes = b"raw",
    partition: int = 0,
    until_leading: bool = False,
) -> int:
    """Produce ``count`` records in one batch straight to ``broker_id``; the error code.

    ``until_leading``: ``broker_id`` is the leader the metadata names, but a broker learns its
    leadership from the controller a moment after other brokers may report it and refuses
    writes with NOT_LEADER_OR_FOLLOWER meanwhile (nothing is appended), so that answer is
    retried for up to 30 s."""
    deadline = time.monotonic() + 30
    while True:
        error = asyncio.run(_produce_raw(cluster, broker_id, topic, acks, count, value, partition))
        if (
            not until_leading
            or error != ErrorCode.NOT_LEADER_OR_FOLLOWER
            or time.monotonic() > deadline
        ):
            return error
        time.sleep(0.2)


async def _produce_raw(
    cluster: LocalCluster,
    broker_id: int,
    topic: str,
    acks: int,
    count: int,
    value: bytes,
    partition: int,
) -> int:
    broker = cluster.brokers[broker_id]
    connection = await BrokerConnection.open((broker.host, broker.port), "cluster-test")
    try:
        now = int(time.time() * 1000)
        batch = build_batch(
            [
                Record(offset=i, timestamp=now, key=None, value=value, headers=[])
                for i in range(count)
            ]
        )
        request = ProduceRequest(
            acks=acks,
            timeout_ms=5000,
            topic_data=[
                TopicProduceData(
                    name=topic,
                    partition_data=[PartitionProduceData(index=partition, records=batch)],
                )
            ],
        )
        response, _ = await connection.request(ApiKey.PRODUCE, request, 9)
        return int(response.responses[0].partition_responses[0].error_code)
    finally:
        await connection.close()


def reassign(cluster: LocalCluster, topic: str, replicas: list[int] | None) -> int:
    """AlterPartitionReassignments for partition 0; the partition's error code."""
    request = AlterPartitionReassignmentsRequest(
        topics=[
            ReassignableTopic(
                name=topic, partitions=[ReassignablePartition(partition_index=0, replicas=replicas)]
            )
        ]
    )
    response = asyncio.run(call(cluster, ApiKey.ALTER_PARTITION_REASSIGNMENTS, request))
    return int(response.responses[0].partitions[0].error_code)


def reassignments(cluster: LocalCluster) -> dict[tuple[str, int], list[int]]:
    """ListPartitionReassignments: partition -> replicas while moving."""
    request = ListPartitionReassignmentsRequest(topics=None)
    response = asyncio.run(call(cluster, ApiKey.LIST_PARTITION_REASSIGNMENTS, request))
    return {(t.name, p.partition_index): p.replicas for t in response.topics for p in t.partitions}


async def call(
    cluster: LocalCluster, api_key: int, request: object, broker_id: int | None = None
) -> Any:
    """Send ``request`` to ``broker_id``; by default to the controller, where clients send
    controller requests (reassignments, elections)."""
    broker = cluster.brokers[controller_id(cluster) if broker_id is None else broker_id]
    connection = await BrokerConnection.open((broker.host, broker.port), "cluster-test")
    try:
        response, _ = await connection.request(api_key, request)
        return response
    finally:
        await connection.close()
