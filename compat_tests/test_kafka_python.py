"""kafka-python producer and consumer against the broker.

Consumers run without a group (group_id=None) and use assign()/seek() only.
kafka-python enables idempotence by default since 3.0; tests that are not about it turn it
off so that each test exercises one thing.
"""

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import codec as kafka_codec
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import MessageSizeTooLargeError
from kafka.producer.future import RecordMetadata

from compat_tests.broker_process import api_versions_error
from compat_tests.support import (
    CLIENT_MAX_REQUEST_BYTES,
    CODECS,
    NEAR_LIMIT_VALUE_SIZE,
    OVER_LIMIT_VALUE_SIZE,
    assert_stored_codec,
    base_timestamp_ms,
    require,
    round_trip_records,
)

pytestmark = pytest.mark.timeout(90)

CODEC_AVAILABLE: dict[str, Callable[[], bool]] = {
    "none": lambda: True,
    "gzip": kafka_codec.has_gzip,
    "snappy": kafka_codec.has_snappy,
    "lz4": kafka_codec.has_lz4,
    "zstd": kafka_codec.has_zstd,
}
CODEC_PACKAGES = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}


def make_producer(bootstrap: str, **conf: Any) -> KafkaProducer:
    settings: dict[str, Any] = {"enable_idempotence": False, "acks": 1, "linger_ms": 5}
    settings.update(conf)
    return KafkaProducer(bootstrap_servers=bootstrap, **settings)


def make_consumer(bootstrap: str, **conf: Any) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **conf,
    )


def produce_all(
    producer: KafkaProducer, topic: str, records: list[dict[str, Any]]
) -> list[RecordMetadata]:
    """Send each record (kwargs of KafkaProducer.send), flush, return the metadata in order."""
    futures = [producer.send(topic, **record) for record in records]
    producer.flush(timeout=30)
    return [f.get(timeout=30) for f in futures]


def consume(consumer: KafkaConsumer, count: int, timeout: float = 20.0) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500, max_records=count - len(out)).values():
            out.extend(batch)
    assert len(out) == count, f"consumed {len(out)} of {count} records in {timeout} s"
    return out


def consume_from(
    bootstrap: str, topic: str, partition: int, offset: int, count: int
) -> list[ConsumerRecord]:
    consumer = make_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        return consume(consumer, count)
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_preserves_keys_headers_timestamps(
    bootstrap: str, create_topic: Callable[..., str], log_dir: Path | None, codec: str
) -> None:
    require(
        CODEC_AVAILABLE[codec](),
        f"kafka-python cannot use {codec}: pip package {CODEC_PACKAGES.get(codec)} is missing",
    )
    topic = create_topic()
    base = base_timestamp_ms()
    records = round_trip_records(codec, base, "timestamp_ms")
    producer = make_producer(
        bootstrap, compression_type=None if codec == "none" else codec, linger_ms=50
    )
    try:
        meta = produce_all(producer, topic, records)
    finally:
        producer.close()
    assert [m.offset for m in meta] == list(range(200))

    got = consume_from(bootstrap, topic, 0, 0, 200)
    assert [r.offset for r in got] == list(range(200))
    for rec, sent in zip(got, records, strict=True):
        assert rec.key == sent["key"]
        assert rec.value == sent["value"]
        assert rec.headers == sent["headers"]
        assert (rec.timestamp_type, rec.timestamp) == (0, sent["timestamp_ms"])
    assert_stored_codec(log_dir, topic, 0, codec)


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(bootstrap: str, create_topic: Callable[..., str], acks: int | str) -> None:
    topic = create_topic()
    records = [{"value": f"acks-{acks}-{i}".encode()} for i in range(50)]
    producer = make_producer(bootstrap, acks=acks)
    try:
        meta = produce_all(producer, topic, records)
    finally:
        producer.close()
    if acks != 0:
        # acks=0 gets no answer, so the client cannot know the offsets.
        assert [m.offset for m in meta] == list(range(50))
    got = consume_from(bootstrap, topic, 0, 0, 50)
    assert [r.value for r in got] == [r["value"] for r in records]


def test_idempotent_producer_keeps_order_without_duplicates(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    partitions = 3
    topic = create_topic(partitions=partitions)
    producer = make_producer(
        bootstrap,
        enable_idempotence=True,
        acks="all",
        batch_size=512,
        linger_ms=1,
        max_in_flight_requests_per_connection=5,
    )
    n = 3000
    try:
        meta = produce_all(
            producer,
            topic,
            [{"value": f"{i}".encode(), "partition": i % partitions} for i in range(n)],
        )
    finally:
        producer.close()
    for p in range(partitions):
        assert sorted(m.offset for m in meta if m.partition == p) == list(range(n // partitions))
        values = [int(r.value) for r in consume_from(bootstrap, topic, p, 0, n // partitions)]
        assert values == list(range(p, n, partitions)), f"partition {p}: order or duplicates"


def test_offsets_for_times_and_beginning_end(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    base = base_timestamp_ms()
    producer = make_producer(bootstrap)
    try:
        produce_all(
            producer,
            topic,
            [{"value": f"t{i}".encode(), "timestamp_ms": base + i * 1000} for i in range(10)],
        )
    finally:
        producer.close()
    tp = TopicPartition(topic, 0)
    consumer = make_consumer(bootstrap)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 10}
        for ts, offset in {base - 1: 0, base: 0, base + 3000: 3, base + 3500: 4}.items():
            found = consumer.offsets_for_times({tp: ts})[tp]
            assert found is not None and found.offset == offset, (ts, found)
            assert found.timestamp == base + offset * 1000
        # No record at or after the timestamp: kafka-python reports None.
        assert consumer.offsets_for_times({tp: base + 60_000})[tp] is None
    finally:
        consumer.close()


def test_replay_from_old_offset(bootstrap: str, create_topic: Callable[..., str]) -> None:
    topic = create_topic()
    records = [{"value": f"r{i}".encode()} for i in range(30)]
    producer = make_producer(bootstrap)
    try:
        produce_all(producer, topic, records)
    finally:
        producer.close()
    tp = TopicPartition(topic, 0)
    consumer = make_consumer(bootstrap)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        assert [r.offset for r in consume(consumer, 30)] == list(range(30))
        consumer.seek(tp, 7)
        again = consume(consumer, 23)
        assert [r.offset for r in again] == list(range(7, 30))
        assert [r.value for r in again] == [r["value"] for r in records[7:]]
    finally:
        consumer.close()


def big_value_producer(bootstrap: str) -> KafkaProducer:
    # max_request_size above the broker's limit, so the broker (not the client) judges it.
    return make_producer(bootstrap, max_request_size=CLIENT_MAX_REQUEST_BYTES)


def test_record_near_size_limit_is_accepted(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    value = os.urandom(NEAR_LIMIT_VALUE_SIZE)
    producer = big_value_producer(bootstrap)
    try:
        produce_all(producer, topic, [{"key": b"big", "value": value}])
    finally:
        producer.close()
    (rec,) = consume_from(bootstrap, topic, 0, 0, 1)
    assert rec.value == value


def test_record_over_size_limit_is_rejected_and_broker_survives(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    producer = big_value_producer(bootstrap)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, value=os.urandom(OVER_LIMIT_VALUE_SIZE)).get(timeout=30)
        (after,) = produce_all(producer, topic, [{"value": b"after"}])
    finally:
        producer.close()
    assert after.offset == 0
    host, port = bootstrap.rsplit(":", 1)
    assert api_versions_error(host, int(port)) == 0


def test_long_poll_on_empty_topic_wakes_on_produce(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    tp = TopicPartition(topic, 0)
    # A long max wait: a broker that does not wake parked fetches on append answers ~5 s late.
    consumer = make_consumer(bootstrap, fetch_max_wait_ms=5000, fetch_min_bytes=1)
    producer = make_producer(bootstrap, linger_ms=0)
    produced_at: list[float] = []

    def produce_later() -> None:
        time.sleep(1.0)
        produced_at.append(time.monotonic())
        produce_all(producer, topic, [{"value": b"late"}])

    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        assert consumer.poll(timeout_ms=500) == {}
        thread = threading.Thread(target=produce_later)
        thread.start()
        (rec,) = consume(consumer, 1, timeout=15.0)
        received_at = time.monotonic()
        thread.join()
    finally:
        consumer.close()
        producer.close()
    assert rec.value == b"late"
    assert received_at - produced_at[0] < 2.5, "fetch was not woken by the append"
