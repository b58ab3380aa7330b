"""kbroker.share_consumer.ShareConsumer against an in-process broker: implicit and explicit
acknowledgement, RELEASE, REJECT, the delivery count limit, commits and close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.share.sessions import ShareSessions
from kbroker.share_consumer import AcknowledgeType, IllegalStateError, ShareConsumer, ShareRecord
from tests.group.conftest import free_port
from wire.errors import ErrorCode, KafkaError

TOPIC = "queue"
GROUP = "workers"


@pytest.fixture
async def share_broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """The share tests' broker, with a 500 ms share heartbeat interval (Kafka's default,
    5 s, is how long a new member may wait for its first assignment)."""
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "log.dirs": str(tmp_path / "data"),
        "offsets.topic.num.partitions": "3",
        "share.coordinator.state.topic.num.partitions": "3",
        "group.share.heartbeat.interval.ms": "500",
        "group.share.min.heartbeat.interval.ms": "500",
    }
    broker = Broker(BrokerConfig.from_properties(props))
    await broker.start()
    await broker.group_coordinator.wait_loaded()
    yield broker
    await broker.stop()


async def produce(broker: Broker, count: int, **group_configs: str) -> None:
    await broker.metadata.create_topic(TOPIC, 1, 1)
    configs = {"share.auto.offset.reset": "earliest", **group_configs}
    await broker.metadata.set_group_configs(GROUP, configs)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 20})
    for i in range(count):
        producer.produce(TOPIC, f"v{i}".encode())
    assert await asyncio.to_thread(producer.flush, 30) == 0


async def poll_until(
    consumer: ShareConsumer, count: int, deadline: float = 30.0
) -> list[ShareRecord]:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    got: list[ShareRecord] = []
    while len(got) < count and loop.time() < end:
        got.extend(await consumer.poll(0.5))
    return got


async def test_implicit_mode_reads_and_accepts_everything(share_broker: Broker) -> None:
    await produce(share_broker, 50)
    async with ShareConsumer(f"127.0.0.1:{share_broker.port}", GROUP) as consumer:
        consumer.subscribe([TOPIC])
        records = await poll_until(consumer, 50)
        assert [r.value for r in records] == [f"v{i}".encode() for i in range(50)]
        assert {r.delivery_count for r in records} == {1}
        assert await consumer.commit_sync() == {(TOPIC, 0): None}


async def test_explicit_mode_release_reject_and_the_delivery_limit(share_broker: Broker) -> None:
    await produce(share_broker, 3, **{"share.delivery.count.limit": "2"})
    outcomes: list[tuple[dict[tuple[str, int], set[int]], object]] = []
    consumer = ShareConsumer(
        f"127.0.0.1:{share_broker.port}",
        GROUP,
        acknowledgement_mode="explicit",
        acknowledgement_commit_callback=lambda offsets, error: outcomes.append((offsets, error)),
    )
    async with consumer:
        consumer.subscribe([TOPIC])
        first = await poll_until(consumer, 3)
        assert [(r.offset, r.delivery_count) for r in first] == [(0, 1), (1, 1), (2, 1)]
        consumer.acknowledge(first[0])
        # A poll with records of the last one unacknowledged is refused.
        try:
            await consumer.poll(0.1)
            raise AssertionError("poll with unacknowledged records")
        except IllegalStateError as exc:
            assert str(exc) == "All records must be acknowledged in explicit acknowledgement mode."
        consumer.acknowledge(first[1], AcknowledgeType.RELEASE)
        consumer.acknowledge(first[2], "reject")
        assert await consumer.commit_sync() == {(TOPIC, 0): None}
        assert outcomes == [({(TOPIC, 0): {0, 1, 2}}, None)]
        # Released: delivered again, with the next delivery count; rejected: never again.
        again = await poll_until(consumer, 1)
        assert [(r.offset, r.delivery_count) for r in again] == [(1, 2)]
        consumer.acknowledge(again[0], AcknowledgeType.RELEASE)
        # Released after the second delivery of a limit of 2: archived, not delivered.
        assert await consumer.poll(1.0) == []
        try:
            consumer.acknowledge(again[0])
            raise AssertionError("acknowledged twice")
        except IllegalStateError as exc:
            assert str(exc) == "The record cannot be acknowledged."
    state = await share_broker.share_persister.read(
        GROUP,
        share_broker.metadata.topic(TOPIC).topic_id,
        0,
        0,  # type: ignore[union-attr]
    )
    # Written as Kafka 4.3 writes it: from the start offset before the last acknowledgement
    # (1), with the records it finished, all archived: nothing is left to deliver.
    assert state.start_offset == 1
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in state.batches] == [
        (1, 1, 4),
        (2, 2, 4),
    ]


async def test_implicit_mode_refuses_acknowledge(share_broker: Broker) -> None:
    await produce(share_broker, 1)
    async with ShareConsumer(f"127.0.0.1:{share_broker.port}", GROUP) as consumer:
        consumer.subscribe([TOPIC])
        [record] = await poll_until(consumer, 1)
        try:
            consumer.acknowledge(record)
            raise AssertionError("acknowledge in implicit mode")
        except IllegalStateError as exc:
            assert str(exc) == "Implicit acknowledgement of delivery is being used."


async def test_close_releases_what_was_not_acknowledged(share_broker: Broker) -> None:
    await produce(share_broker, 4)
    bootstrap = f"127.0.0.1:{share_broker.port}"
    first = ShareConsumer(bootstrap, GROUP, acknowledgement_mode="explicit")
    first.subscribe([TOPIC])
    records = await poll_until(first, 4)
    first.acknowledge(records[0])
    first.acknowledge(records[1], AcknowledgeType.REJECT)
    await first.close()
    # The next member gets the two records the first held and did not settle, at once
    # (well within the 30 s lock), as second deliveries.
    async with ShareConsumer(bootstrap, GROUP) as second:
        second.subscribe([TOPIC])
        again = await poll_until(second, 2, deadline=10.0)
        assert [(r.offset, r.delivery_count) for r in again] == [(2, 2), (3, 2)]


async def test_commit_async_and_a_poll_limit(share_broker: Broker) -> None:
    await produce(share_broker, 30)
    async with ShareConsumer(
        f"127.0.0.1:{share_broker.port}", GROUP, max_poll_records=10
    ) as consumer:
        consumer.subscribe([TOPIC])
        seen: list[int] = []
        while len(seen) < 30:
            batch = await consumer.poll(5.0)
            assert 0 < len(batch) <= 10
            seen.extend(r.offset for r in batch)
        assert seen == list(range(30))
        assert await consumer.commit_async() == {(TOPIC, 0): None}
        assert await consumer.poll(0.5) == []


async def test_a_share_session_the_broker_lost_is_opened_again(share_broker: Broker) -> None:
    await produce(share_broker, 10)
    outcomes: list[tuple[dict[tuple[str, int], set[int]], object]] = []
    async with ShareConsumer(
        f"127.0.0.1:{share_broker.port}",
        GROUP,
        max_poll_records=5,
        acquire_mode="record_limit",
        acknowledgement_commit_callback=lambda offsets, error: outcomes.append((offsets, error)),
    ) as consumer:
        consumer.subscribe([TOPIC])
        assert [r.offset for r in await poll_until(consumer, 5)] == [0, 1, 2, 3, 4]
        # The broker forgets every share session (as after a restart).
        share_broker.share_partitions.sessions = ShareSessions(10)
        # The acceptance of 0-4 rode on a ShareFetch of the lost session and failed; the
        # consumer opens a new session (epoch 0) and goes on.
        assert [r.offset for r in await poll_until(consumer, 5)] == [5, 6, 7, 8, 9]
        [(offsets, error)] = outcomes
        assert offsets == {(TOPIC, 0): {0, 1, 2, 3, 4}}
        assert isinstance(error, KafkaError) and error.code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert await consumer.commit_sync() == {(TOPIC, 0): None}
