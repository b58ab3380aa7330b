"""confluent-kafka (librdkafka) producer and consumer against the broker.

Consumers use assign() with explicit offsets only: no group membership and no commits
(group coordination is a later milestone). librdkafka insists on a group.id even then;
it is set but never joined.
"""

import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from compat_tests.broker_process import api_versions_error
from compat_tests.support import (
    CLIENT_MAX_REQUEST_BYTES,
    CODECS,
    NEAR_LIMIT_VALUE_SIZE,
    OVER_LIMIT_VALUE_SIZE,
    assert_stored_codec,
    base_timestamp_ms,
    round_trip_records,
)

pytestmark = pytest.mark.timeout(90)


def make_producer(bootstrap: str, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})


def make_consumer(bootstrap: str, **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compat-unjoined-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            **conf,
        }
    )


class Deliveries:
    """Collects delivery reports: (error, message) in the order librdkafka reports them."""

    def __init__(self) -> None:
        self.reports: list[tuple[KafkaError | None, Message]] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        self.reports.append((err, msg))

    def ok(self) -> list[Message]:
        errors = [err for err, _ in self.reports if err is not None]
        assert not errors, f"delivery failed: {errors[:5]}"
        return [msg for _, msg in self.reports]


def produce_all(producer: Producer, topic: str, records: list[dict[str, Any]]) -> list[Message]:
    """Produce each record (kwargs of Producer.produce), flush, return the delivery reports."""
    deliveries = Deliveries()
    for record in records:
        producer.produce(topic, on_delivery=deliveries, **record)
        producer.poll(0)
    assert producer.flush(30) == 0, "messages still undelivered after 30 s"
    assert len(deliveries.reports) == len(records)
    return deliveries.ok()


def consume(consumer: Consumer, count: int, timeout: float = 20.0) -> list[Message]:
    """Consume exactly `count` messages from the current assignment (errors fail the test)."""
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=count - len(out), timeout=0.5):
            assert msg.error() is None, f"consumer error: {msg.error()}"
            out.append(msg)
    assert len(out) == count, f"consumed {len(out)} of {count} messages in {timeout} s"
    return out


def consume_from(
    bootstrap: str, topic: str, partition: int, offset: int, count: int, **conf: Any
) -> list[Message]:
    consumer = make_consumer(bootstrap, **conf)
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        return consume(consumer, count)
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_preserves_keys_headers_timestamps(
    bootstrap: str, create_topic: Callable[..., str], log_dir: Path | None, codec: str
) -> None:
    topic = create_topic()
    base = base_timestamp_ms()
    records = round_trip_records(codec, base, "timestamp")
    producer = make_producer(bootstrap, **{"compression.type": codec, "linger.ms": 50})
    delivered = produce_all(producer, topic, records)
    assert [m.offset() for m in delivered] == list(range(200))

    got = consume_from(bootstrap, topic, 0, OFFSET_BEGINNING, 200)
    assert [m.offset() for m in got] == list(range(200))
    for msg, rec in zip(got, records, strict=True):
        assert msg.key() == rec["key"]
        assert msg.value() == rec["value"]
        assert msg.headers() == rec["headers"]
        assert msg.timestamp() == (TIMESTAMP_CREATE_TIME, rec["timestamp"])
    assert_stored_codec(log_dir, topic, 0, codec)


def test_null_key_null_value_and_null_header_value(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    records: list[dict[str, Any]] = [
        {"key": None, "value": b"no key"},
        {"key": b"tombstone", "value": None},
        {"key": b"k", "value": b"", "headers": [("nothing", None)]},
    ]
    produce_all(make_producer(bootstrap), topic, records)
    got = consume_from(bootstrap, topic, 0, OFFSET_BEGINNING, 3)
    assert [(m.key(), m.value()) for m in got] == [
        (None, b"no key"),
        (b"tombstone", None),
        (b"k", b""),
    ]
    assert got[2].headers() == [("nothing", None)]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(bootstrap: str, create_topic: Callable[..., str], acks: str) -> None:
    topic = create_topic()
    records = [{"value": f"acks-{acks}-{i}".encode()} for i in range(50)]
    delivered = produce_all(make_producer(bootstrap, acks=acks), topic, records)
    if acks != "0":
        # acks=0 gets no answer, so librdkafka cannot know the offsets.
        assert [m.offset() for m in delivered] == list(range(50))
    got = consume_from(bootstrap, topic, 0, OFFSET_BEGINNING, 50)
    assert [m.value() for m in got] == [r["value"] for r in records]


def test_idempotent_producer_keeps_order_without_duplicates(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    partitions = 3
    topic = create_topic(partitions=partitions)
    # Small batches and 5 in flight: many concurrent sequence-numbered batches per partition.
    producer = make_producer(
        bootstrap,
        **{
            "enable.idempotence": True,
            "batch.num.messages": 20,
            "linger.ms": 1,
            "max.in.flight.requests.per.connection": 5,
        },
    )
    n = 3000
    records = [{"value": f"{i}".encode(), "partition": i % partitions} for i in range(n)]
    delivered = produce_all(producer, topic, records)
    for p in range(partitions):
        offsets = [m.offset() for m in delivered if m.partition() == p]
        assert sorted(offsets) == list(range(n // partitions)), f"partition {p} offsets"
        got = consume_from(bootstrap, topic, p, OFFSET_BEGINNING, n // partitions)
        values = [int(m.value()) for m in got]
        assert values == list(range(p, n, partitions)), f"partition {p}: order or duplicates"


def test_offsets_for_times_and_watermarks(bootstrap: str, create_topic: Callable[..., str]) -> None:
    topic = create_topic()
    base = base_timestamp_ms()
    records = [{"value": f"t{i}".encode(), "timestamp": base + i * 1000} for i in range(10)]
    produce_all(make_producer(bootstrap), topic, records)
    consumer = make_consumer(bootstrap)
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
        # One partition per request: ListOffsets answers per partition, not per query.
        for ts, offset in {base - 1: 0, base: 0, base + 3000: 3, base + 3500: 4}.items():
            (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            assert found.error is None and found.offset == offset, (ts, found)
        # Past the newest timestamp there is no such offset: Kafka answers -1.
        (past,) = consumer.offsets_for_times([TopicPartition(topic, 0, base + 60_000)], timeout=10)
        assert past.offset == -1
    finally:
        consumer.close()


def test_replay_from_old_offset(bootstrap: str, create_topic: Callable[..., str]) -> None:
    topic = create_topic()
    records = [{"value": f"r{i}".encode()} for i in range(30)]
    produce_all(make_producer(bootstrap), topic, records)
    consumer = make_consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert [m.offset() for m in consume(consumer, 30)] == list(range(30))
        consumer.seek(TopicPartition(topic, 0, 7))
        again = consume(consumer, 23)
        assert [m.offset() for m in again] == list(range(7, 30))
        assert [m.value() for m in again] == [r["value"] for r in records[7:]]
    finally:
        consumer.close()
    # A fresh assignment at an old offset reads the same records.
    assert [m.value() for m in consume_from(bootstrap, topic, 0, 25, 5)] == [
        r["value"] for r in records[25:]
    ]


def big_value_producer(bootstrap: str) -> Producer:
    # Client limits above the broker's, so the broker (not librdkafka) judges the size.
    return make_producer(
        bootstrap,
        **{
            "message.max.bytes": CLIENT_MAX_REQUEST_BYTES,
            "batch.size": CLIENT_MAX_REQUEST_BYTES,
            "compression.type": "none",
            "enable.idempotence": False,
        },
    )


def test_record_near_size_limit_is_accepted(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    value = os.urandom(NEAR_LIMIT_VALUE_SIZE)
    produce_all(big_value_producer(bootstrap), topic, [{"key": b"big", "value": value}])
    (msg,) = consume_from(bootstrap, topic, 0, OFFSET_BEGINNING, 1)
    assert msg.value() == value


def test_record_over_size_limit_is_rejected_and_broker_survives(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    producer = big_value_producer(bootstrap)
    deliveries = Deliveries()
    producer.produce(topic, value=os.urandom(OVER_LIMIT_VALUE_SIZE), on_delivery=deliveries)
    assert producer.flush(30) == 0
    ((err, _),) = deliveries.reports
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
    # The same producer (same connection) and a new probe both still work.
    (small,) = produce_all(producer, topic, [{"value": b"after"}])
    assert small.offset() == 0
    host, port = bootstrap.rsplit(":", 1)
    assert api_versions_error(host, int(port)) == 0


def test_topic_max_message_bytes_override(bootstrap: str, create_topic: Callable[..., str]) -> None:
    topic = create_topic(config={"max.message.bytes": "2000000"})
    value = os.urandom(1_500_000)
    produce_all(big_value_producer(bootstrap), topic, [{"value": value}])
    (msg,) = consume_from(bootstrap, topic, 0, OFFSET_BEGINNING, 1)
    assert msg.value() == value


def test_log_append_time_topic(bootstrap: str, create_topic: Callable[..., str]) -> None:
    topic = create_topic(config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce_all(make_producer(bootstrap), topic, [{"value": b"x", "timestamp": 1000}])
    after = int(time.time() * 1000)
    (msg,) = consume_from(bootstrap, topic, 0, OFFSET_BEGINNING, 1)
    ts_type, ts = msg.timestamp()
    assert ts_type == TIMESTAMP_LOG_APPEND_TIME
    assert before - 1000 <= ts <= after + 1000


def test_long_poll_on_empty_topic_wakes_on_produce(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    # A long max wait: a broker that does not wake parked fetches on append answers ~5 s late.
    consumer = make_consumer(bootstrap, **{"fetch.wait.max.ms": 5000, "fetch.min.bytes": 1})
    producer = make_producer(bootstrap, **{"linger.ms": 0})
    produced_at: list[float] = []

    def produce_later() -> None:
        time.sleep(1.0)
        produced_at.append(time.monotonic())
        produce_all(producer, topic, [{"value": b"late"}])

    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert consumer.consume(num_messages=1, timeout=0.5) == []
        thread = threading.Thread(target=produce_later)
        thread.start()
        (msg,) = consume(consumer, 1, timeout=15.0)
        received_at = time.monotonic()
        thread.join()
    finally:
        consumer.close()
    assert msg.value() == b"late"
    assert received_at - produced_at[0] < 2.5, "fetch was not woken by the append"


def test_compacted_topic_fails_exactly_the_keyless_records(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    """KIP-467: the broker names the keyless records of a batch (record_errors), and
    librdkafka fails those with INVALID_RECORD and the others as collateral."""
    topic = create_topic(config={"cleanup.policy": "compact"})
    reports: dict[int, KafkaError | None] = {}

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        reports[int(msg.value())] = err

    # The six records must travel in one batch whatever the machine's load: the batch
    # closes when the sixth is queued (or at flush), never on a linger timer.
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 60_000,
            "batch.num.messages": 6,
            "retries": 0,
            "acks": "all",
        }
    )
    for i in range(6):
        key = None if i in (1, 4) else f"k{i}".encode()
        producer.produce(topic, value=str(i).encode(), key=key, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(reports) == 6
    invalid = {i for i, err in reports.items() if err and err.code() == KafkaError.INVALID_RECORD}
    assert invalid == {1, 4}
    assert all(reports[i] is not None for i in (0, 2, 3, 5))


def test_producer_over_its_quota_is_told_its_throttle_time(bootstrap: str) -> None:
    """KIP-219: throttle_time_ms in the response; librdkafka reports it (throttle_cb), and
    a client without a quota sees none."""
    client_id = f"quoted-{uuid.uuid4().hex[:8]}"
    _alter_client_quota(bootstrap, client_id, producer_byte_rate=10_000)
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    throttles: dict[str, list[float]] = {client_id: [], "unquoted": []}
    for name in throttles:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": name,
                "linger.ms": 100,
                "throttle_cb": lambda event, name=name: throttles[name].append(event.throttle_time),
            }
        )
        for _ in range(300):
            producer.produce(topic, b"x" * 1000)
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 5
        while name == client_id and not throttles[name] and time.monotonic() < deadline:
            producer.poll(0.1)
    assert throttles[client_id] and max(throttles[client_id]) > 0
    assert throttles["unquoted"] == []


def _alter_client_quota(bootstrap: str, client_id: str, **quotas: float) -> None:
    """AlterClientQuotas through kbroker's own admin code (confluent-kafka has no API)."""
    import asyncio

    from kbroker.cli.ops.admin import parse_bootstrap
    from kbroker.cli.ops.quotas import alter_quotas
    from kbroker.client import KafkaClient

    async def alter() -> None:
        async with KafkaClient(parse_bootstrap(bootstrap), timeout=30) as client:
            await alter_quotas(client, [("client-id", client_id)], quotas, [])

    asyncio.run(alter())
