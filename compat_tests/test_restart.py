"""Data, topics and topic configs survive a graceful broker restart (SIGTERM, start again)."""

from collections.abc import Callable

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource

from compat_tests.support import compressible_value, wait_for_leaders

pytestmark = pytest.mark.timeout(120)


def produce_values(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    offsets: list[int] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4"})
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert not errors, errors
    return offsets


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compat-unjoined", "enable.auto.commit": False}
    )
    out: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        for _ in range(60):
            for msg in consumer.consume(num_messages=count - len(out), timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append(msg.value())
            if len(out) >= count:
                break
    finally:
        consumer.close()
    return out


def test_graceful_restart_keeps_topics_configs_and_records(
    bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    restart_broker: Callable[[], None],
) -> None:
    topic = create_topic(partitions=2, config={"retention.ms": "7200000"})
    before = [compressible_value(i) for i in range(500)]
    assert produce_values(bootstrap, topic, before) == list(range(500))

    restart_broker()

    wait_for_leaders(admin, topic, 2)
    resource = ConfigResource("TOPIC", topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=20)
    assert configs["retention.ms"].value == "7200000"
    assert read_all(bootstrap, topic, 500) == before
    # The log end offset was recovered: new records continue after the old ones.
    after = [b"after-restart-%d" % i for i in range(10)]
    assert produce_values(bootstrap, topic, after) == list(range(500, 510))
    assert read_all(bootstrap, topic, 510) == before + after
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-unjoined"})
    try:
        low_high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    assert low_high == (0, 510)
