"""aiokafka producer and consumer against the broker.

aiokafka 0.14 only speaks old, non-flexible versions (Produce <= 8, Fetch <= 11,
ListOffsets <= 5, Metadata <= 5), so these tests keep those versions honest.
Consumers run without a group (group_id=None) and use assign()/seek() only.
"""

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord, RecordMetadata

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


@asynccontextmanager
async def producer_for(bootstrap: str, **conf: Any) -> AsyncIterator[AIOKafkaProducer]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **{"linger_ms": 5, **conf})
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


@asynccontextmanager
async def consumer_for(bootstrap: str, **conf: Any) -> AsyncIterator[AIOKafkaConsumer]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **conf,
    )
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


async def produce_all(
    producer: AIOKafkaProducer, topic: str, records: list[dict[str, Any]]
) -> list[RecordMetadata]:
    """Send each record (kwargs of send), then wait for all: one pipeline, in order."""
    futures = [await producer.send(topic, **record) for record in records]
    return list(await asyncio.gather(*futures))


async def consume(
    consumer: AIOKafkaConsumer, count: int, timeout: float = 20.0
) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        batches = await consumer.getmany(timeout_ms=500, max_records=count - len(out))
        for batch in batches.values():
            out.extend(batch)
    assert len(out) == count, f"consumed {len(out)} of {count} records in {timeout} s"
    return out


async def consume_from(
    bootstrap: str, topic: str, partition: int, offset: int, count: int
) -> list[ConsumerRecord]:
    async with consumer_for(bootstrap) as consumer:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        return await consume(consumer, count)


@pytest.mark.parametrize("codec", CODECS)
async def test_round_trip_preserves_keys_headers_timestamps(
    bootstrap: str, create_topic: Callable[..., str], log_dir: Path | None, codec: str
) -> None:
    topic = create_topic()
    base = base_timestamp_ms()
    records = round_trip_records(codec, base, "timestamp_ms")
    compression = None if codec == "none" else codec
    async with producer_for(bootstrap, compression_type=compression, linger_ms=50) as producer:
        meta = await produce_all(producer, topic, records)
    assert [m.offset for m in meta] == list(range(200))

    got = await consume_from(bootstrap, topic, 0, 0, 200)
    assert [r.offset for r in got] == list(range(200))
    for rec, sent in zip(got, records, strict=True):
        assert rec.key == sent["key"]
        assert rec.value == sent["value"]
        assert list(rec.headers) == sent["headers"]
        assert (rec.timestamp_type, rec.timestamp) == (0, sent["timestamp_ms"])
    assert_stored_codec(log_dir, topic, 0, codec)


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks(bootstrap: str, create_topic: Callable[..., str], acks: int | str) -> None:
    topic = create_topic()
    records = [{"value": f"acks-{acks}-{i}".encode()} for i in range(50)]
    async with producer_for(bootstrap, acks=acks) as producer:
        meta = await produce_all(producer, topic, records)
    if acks != 0:
        # acks=0 gets no answer, so the client cannot know the offsets.
        assert [m.offset for m in meta] == list(range(50))
    got = await consume_from(bootstrap, topic, 0, 0, 50)
    assert [r.value for r in got] == [r["value"] for r in records]


async def test_idempotent_producer_keeps_order_without_duplicates(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    partitions = 3
    topic = create_topic(partitions=partitions)
    n = 3000
    records = [{"value": f"{i}".encode(), "partition": i % partitions} for i in range(n)]
    async with producer_for(
        bootstrap, enable_idempotence=True, acks="all", max_batch_size=512, linger_ms=1
    ) as producer:
        meta = await produce_all(producer, topic, records)
    for p in range(partitions):
        assert sorted(m.offset for m in meta if m.partition == p) == list(range(n // partitions))
        values = [int(r.value) for r in await consume_from(bootstrap, topic, p, 0, n // partitions)]
        assert values == list(range(p, n, partitions)), f"partition {p}: order or duplicates"


async def test_offsets_for_times_and_beginning_end(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    base = base_timestamp_ms()
    records = [{"value": f"t{i}".encode(), "timestamp_ms": base + i * 1000} for i in range(10)]
    async with producer_for(bootstrap) as producer:
        await produce_all(producer, topic, records)
    tp = TopicPartition(topic, 0)
    async with consumer_for(bootstrap) as consumer:
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        assert await consumer.end_offsets([tp]) == {tp: 10}
        for ts, offset in {base - 1: 0, base: 0, base + 3000: 3, base + 3500: 4}.items():
            found = (await consumer.offsets_for_times({tp: ts}))[tp]
            assert found is not None and found.offset == offset, (ts, found)
            assert found.timestamp == base + offset * 1000
        assert (await consumer.offsets_for_times({tp: base + 60_000}))[tp] is None


async def test_replay_from_old_offset(bootstrap: str, create_topic: Callable[..., str]) -> None:
    topic = create_topic()
    records = [{"value": f"r{i}".encode()} for i in range(30)]
    async with producer_for(bootstrap) as producer:
        await produce_all(producer, topic, records)
    tp = TopicPartition(topic, 0)
    async with consumer_for(bootstrap) as consumer:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        assert [r.offset for r in await consume(consumer, 30)] == list(range(30))
        consumer.seek(tp, 7)
        again = await consume(consumer, 23)
    assert [r.offset for r in again] == list(range(7, 30))
    assert [r.value for r in again] == [r["value"] for r in records[7:]]


async def test_record_near_size_limit_is_accepted(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    value = os.urandom(NEAR_LIMIT_VALUE_SIZE)
    async with producer_for(bootstrap, max_request_size=CLIENT_MAX_REQUEST_BYTES) as producer:
        await produce_all(producer, topic, [{"key": b"big", "value": value}])
    (rec,) = await consume_from(bootstrap, topic, 0, 0, 1)
    assert rec.value == value


async def test_record_over_size_limit_is_rejected_and_broker_survives(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    # max_request_size above the broker's limit, so the broker (not the client) judges it.
    async with producer_for(bootstrap, max_request_size=CLIENT_MAX_REQUEST_BYTES) as producer:
        with pytest.raises(MessageSizeTooLargeError):
            await producer.send_and_wait(topic, value=os.urandom(OVER_LIMIT_VALUE_SIZE))
        after = await producer.send_and_wait(topic, value=b"after")
    assert after.offset == 0
    host, port = bootstrap.rsplit(":", 1)
    assert api_versions_error(host, int(port)) == 0


async def test_long_poll_on_empty_topic_wakes_on_produce(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    tp = TopicPartition(topic, 0)
    # A long max wait: a broker that does not wake parked fetches on append answers ~5 s late.
    async with (
        consumer_for(bootstrap, fetch_max_wait_ms=5000, fetch_min_bytes=1) as consumer,
        producer_for(bootstrap, linger_ms=0) as producer,
    ):
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        assert await consumer.getmany(timeout_ms=500) == {}

        async def produce_later() -> float:
            await asyncio.sleep(1.0)
            produced_at = time.monotonic()
            await producer.send_and_wait(topic, value=b"late")
            return produced_at

        sender = asyncio.create_task(produce_later())
        (rec,) = await consume(consumer, 1, timeout=15.0)
        received_at = time.monotonic()
        produced_at = await sender
    assert rec.value == b"late"
    assert received_at - produced_at < 2.5, "fetch was not woken by the append"
