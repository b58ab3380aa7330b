"""kbroker.share_consumer.ShareConsumer against an in-process broker: implicit and explicit
acknowledgement, RELEASE, REJECT, the delivery count limit, commits and close."""

from __future__ import annotations

import asyncio

from confluent_kafka import Producer

from kbroker.broker import Broker
from kbroker.share_consumer import AcknowledgeType, IllegalStateError, ShareConsumer, ShareRecord

TOPIC = "queue"
GROUP = "workers"


async def produce(broker: Broker, count: int, **group_configs: str) -> None:
    await broker.metadata.create_topic(TOPIC, 1, 1)
    configs = {"share.auto.offset.reset": "earliest", **group_configs}
    await broker.metadata.set_group_configs(GROUP, configs)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 20})
    for i in range(count):
        producer.produce(TOPIC, f"v{i}".encode())
    assert await asyncio.to_thread(producer.flush, 30) == 0


async def poll_until(consumer: ShareConsumer, count: int, deadline: float = 30.0) -> list[ShareRecord]:
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
