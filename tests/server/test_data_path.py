"""Produce, Fetch and ListOffsets through the broker at every protocol version."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kbroker.broker import Broker
from kbroker.dispatch import served_versions
from tests.server.conftest import RawClient
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from wire.messages.fetch_response import FetchResponse
from wire.messages.init_producer_id_request import InitProducerIdRequest
from wire.messages.init_producer_id_response import InitProducerIdResponse
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.messages.list_offsets_response import ListOffsetsResponse
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from wire.messages.metadata_response import MetadataResponse
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.produce_response import ProduceResponse
from wire.primitives import ZERO_UUID
from wire.records.legacy import build_message_set
from wire.records.record import Record, build_batch, decode_records


async def create_topic(client: RawClient, name: str, partitions: int = 1, **configs: str) -> None:
    from wire.messages.create_topics_request import CreatableTopicConfig

    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                configs=[
                    CreatableTopicConfig(name=k.replace("_", "."), value=v)
                    for k, v in configs.items()
                ],
            )
        ],
        timeout_ms=5000,
    )
    response = await client.call(ApiKey.CREATE_TOPICS, 4, request)
    assert response.topics[0].error_code == ErrorCode.NONE, response


def records(start: int, count: int, ts: int = 1_700_000_000_000) -> list[Record]:
    return [
        Record(
            offset=i,
            timestamp=ts + i,
            key=f"k{i}".encode(),
            value=f"v{start + i}".encode(),
            headers=[("h", b"x")],
        )
        for i in range(count)
    ]


async def produce(
    client: RawClient,
    topic: str,
    data: bytes,
    version: int = 9,
    acks: int = -1,
    partition: int = 0,
    topic_id: uuid.UUID = ZERO_UUID,
) -> ProduceResponse:
    """Produce v13+ names the topic by ``topic_id``."""
    request = ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=topic if version < 13 else "",
                topic_id=topic_id,
                partition_data=[PartitionProduceData(index=partition, records=data)],
            )
        ],
    )
    response = await client.call(ApiKey.PRODUCE, version, request)
    assert isinstance(response, ProduceResponse)
    return response


def fetch_request(
    broker: Broker,
    topic: str,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    partition_max_bytes: int = 1 << 20,
    max_bytes: int = 50 << 20,
    isolation_level: int = 0,
) -> FetchRequest:
    info = broker.metadata.topic(topic)
    assert info is not None
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        topics=[
            FetchTopic(
                topic=topic,
                topic_id=info.topic_id,
                partitions=[
                    FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes
                    )
                ],
            )
        ],
    )


async def fetch(
    client: RawClient,
    broker: Broker,
    topic: str,
    offset: int,
    version: int = 12,
    **options: int,
) -> FetchResponse:
    """A Fetch of partition 0 (`options`: those of `fetch_request`)."""
    request = fetch_request(broker, topic, offset, **options)
    response = await client.call(ApiKey.FETCH, version, request)
    assert isinstance(response, FetchResponse)
    return response


async def test_produce_then_fetch_every_version(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "every-version")
    info = broker.metadata.topic("every-version")
    assert info is not None
    expected: list[bytes] = []
    for version in served_versions(ApiKey.PRODUCE):
        batch_records = records(len(expected), 3)
        if version < 3:
            magic = 0 if version < 2 else 1
            data = build_message_set(batch_records, magic, 0)
        else:
            data = build_batch(batch_records)
        response = await produce(
            client, "every-version", data, version=version, topic_id=info.topic_id
        )
        partition = response.responses[0].partition_responses[0]
        assert partition.error_code == ErrorCode.NONE, (version, partition)
        assert partition.base_offset == len(expected)
        expected += [r.value for r in batch_records]
    for version in served_versions(ApiKey.FETCH):
        response = await fetch(client, broker, "every-version", 0, version=version)
        data = response.responses[0].partitions[0]
        assert data.error_code == ErrorCode.NONE, version
        assert data.high_watermark == len(expected)
        got = decode_records(bytes(data.records))
        assert [r.value for r in got] == expected, version
        assert [r.offset for r in got] == list(range(len(expected)))


async def test_follower_with_an_older_high_watermark_is_answered_at_once(
    broker: Broker, client: RawClient
) -> None:
    # KIP-1166 (Fetch v18): a follower that reports an older high watermark than the leader's
    # is answered without waiting for records; one that is up to date waits as before.
    await create_topic(client, "hw")
    await produce(client, "hw", build_batch(records(0, 3)), acks=1)
    partition = broker.partition("hw", 0)
    assert partition is not None and partition.high_watermark == 3

    def follower_fetch(known_high_watermark: int) -> FetchRequest:
        request = fetch_request(broker, "hw", 3, max_wait_ms=30_000, min_bytes=1)
        request.replica_state = ReplicaState(replica_id=1, replica_epoch=-1)
        request.topics[0].partitions[0].high_watermark = known_high_watermark
        return request

    answered = await asyncio.wait_for(client.call(ApiKey.FETCH, 18, follower_fetch(1)), timeout=20)
    assert isinstance(answered, FetchResponse)
    assert answered.responses[0].partitions[0].high_watermark == 3
    waiting = asyncio.ensure_future(client.call(ApiKey.FETCH, 18, follower_fetch(3)))
    done, _ = await asyncio.wait([waiting], timeout=1.0)
    assert not done, "an up-to-date follower waits for records"
    waiting.cancel()


async def test_metadata_by_topic_id(broker: Broker, client: RawClient) -> None:
    """Metadata v12+ names topics by id with a null name (the Java consumer does, for topics
    a consumer group assigns it): answered by id as Kafka 4.3 answers, an unknown id with
    UNKNOWN_TOPIC_ID and a null name."""
    await create_topic(client, "named-by-id")
    info = broker.metadata.topic("named-by-id")
    assert info is not None
    unknown = uuid.uuid4()
    for version in (12, 13):
        request = MetadataRequest(
            topics=[
                MetadataRequestTopic(topic_id=topic_id, name=None)
                for topic_id in (info.topic_id, unknown)
            ],
            allow_auto_topic_creation=False,
        )
        response = await client.call(ApiKey.METADATA, version, request)
        assert isinstance(response, MetadataResponse)
        assert [(t.topic_id, t.name, t.error_code, len(t.partitions)) for t in response.topics] == [
            (info.topic_id, "named-by-id", ErrorCode.NONE, 1),
            (unknown, None, ErrorCode.UNKNOWN_TOPIC_ID, 0),
        ]


async def test_produce_by_unknown_topic_id_is_refused(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "by-id")
    info = broker.metadata.topic("by-id")
    assert info is not None
    unknown = uuid.uuid4()
    request = ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                topic_id=topic_id,
                partition_data=[PartitionProduceData(index=0, records=build_batch(records(0, 1)))],
            )
            for topic_id in (unknown, info.topic_id)
        ],
    )
    response = await client.call(ApiKey.PRODUCE, 13, request)
    assert isinstance(response, ProduceResponse)
    answers = {t.topic_id: t.partition_responses[0].error_code for t in response.responses}
    assert answers == {unknown: ErrorCode.UNKNOWN_TOPIC_ID, info.topic_id: ErrorCode.NONE}
    partition = broker.partition("by-id", 0)
    assert partition is not None and partition.high_watermark == 1


async def test_fetch_beyond_end_is_out_of_range(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "range")
    await produce(client, "range", build_batch(records(0, 2)))
    data = (await fetch(client, broker, "range", 5)).responses[0].partitions[0]
    assert data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert data.high_watermark == 2


async def test_fetch_first_batch_larger_than_limits_is_returned_whole(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "kip74")
    big = [Record(offset=0, timestamp=1, key=None, value=b"x" * 5000, headers=[])]
    await produce(client, "kip74", build_batch(big))
    data = (
        (await fetch(client, broker, "kip74", 0, partition_max_bytes=100, max_bytes=100))
        .responses[0]
        .partitions[0]
    )
    assert [r.value for r in decode_records(bytes(data.records))] == [b"x" * 5000]


async def _produce_values(client: RawClient, topic: str, count: int, size: int) -> list[bytes]:
    """`count` records of `size` bytes in batches of about 256 KB; their values."""
    values = [bytes([i % 251]) * size for i in range(count)]
    per_batch = max(1, (256 << 10) // size)
    for first in range(0, count, per_batch):
        chunk = values[first : first + per_batch]
        batch_records = [
            Record(offset=i, timestamp=1, key=None, value=v, headers=[])
            for i, v in enumerate(chunk)
        ]
        response = await produce(client, topic, build_batch(batch_records))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    return values


async def test_file_data_on_an_idle_connection_skips_asyncio_sendfile(
    broker: Broker, client: RawClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(client, "direct")
    values = await _produce_values(client, "direct", 200, 1000)
    loop = asyncio.get_running_loop()
    calls: list[int] = []
    real = loop.sendfile

    async def counted(*args: object, **kwargs: object) -> int:
        calls.append(1)
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loop, "sendfile", counted)
    data = (await fetch(client, broker, "direct", 0)).responses[0].partitions[0]
    assert [r.value for r in decode_records(bytes(data.records))] == values
    assert calls == []  # 200 KB fit the socket: os.sendfile sent it all at once


async def test_file_data_larger_than_the_socket_takes_arrives_whole_and_in_order(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "large", partitions=1)
    values = await _produce_values(client, "large", 6000, 1000)
    # A fetch of ~6 MB, and a request pipelined behind it; the client reads nothing for a
    # while, so the socket fills and the rest of the file data waits for it to drain.
    fetch_id = await client.send(
        ApiKey.FETCH, 12, fetch_request(broker, "large", 0, partition_max_bytes=8 << 20)
    )
    metadata_id = await client.send(ApiKey.METADATA, 12, MetadataRequest(topics=None))
    await asyncio.sleep(0.3)
    response = await client.receive(ApiKey.FETCH, 12, fetch_id)
    assert isinstance(response, FetchResponse)
    got = decode_records(bytes(response.responses[0].partitions[0].records))
    assert [r.value for r in got] == values
    after = await client.receive(ApiKey.METADATA, 12, metadata_id)
    assert isinstance(after, MetadataResponse)


async def test_long_poll_wakes_on_append(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "poll")
    producer = await RawClient.connect(broker.port)

    async def produce_later() -> None:
        await asyncio.sleep(0.3)
        await produce(producer, "poll", build_batch(records(0, 1)))

    started = time.monotonic()
    task = asyncio.create_task(produce_later())
    response = await fetch(client, broker, "poll", 0, max_wait_ms=5000, min_bytes=1)
    elapsed = time.monotonic() - started
    await task
    await producer.close()
    assert 0.25 < elapsed < 3
    assert len(decode_records(bytes(response.responses[0].partitions[0].records))) == 1


async def test_long_poll_times_out_empty(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "quiet")
    started = time.monotonic()
    response = await fetch(client, broker, "quiet", 0, max_wait_ms=400, min_bytes=1)
    assert 0.35 < time.monotonic() - started < 3
    assert bytes(response.responses[0].partitions[0].records) == b""


async def test_acks_zero_sends_no_response(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "fire")
    request = ProduceRequest(
        acks=0,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(
                name="fire",
                partition_data=[PartitionProduceData(index=0, records=build_batch(records(0, 2)))],
            )
        ],
    )
    await client.send(ApiKey.PRODUCE, 9, request)
    # The next response on the connection is the metadata one.
    response = await client.call(
        ApiKey.METADATA, 9, MetadataRequest(topics=[MetadataRequestTopic(name="fire")])
    )
    assert isinstance(response, MetadataResponse)
    partition = broker.partition("fire", 0)
    assert partition is not None and partition.high_watermark == 2


async def test_produce_errors(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "small", max_message_bytes="1000")
    cases = [
        ("missing", 0, build_batch(records(0, 1)), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("small", 7, build_batch(records(0, 1)), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (
            "small",
            0,
            build_batch([Record(offset=0, timestamp=1, key=None, value=b"y" * 2000, headers=[])]),
            ErrorCode.MESSAGE_TOO_LARGE,
        ),
    ]
    corrupt = bytearray(build_batch(records(0, 1)))
    corrupt[-1] ^= 0xFF
    cases.append(("small", 0, bytes(corrupt), ErrorCode.CORRUPT_MESSAGE))
    for topic, index, data, code in cases:
        response = await produce(client, topic, data, partition=index)
        assert response.responses[0].partition_responses[0].error_code == code, (topic, code)
    bad_acks = await produce(client, "small", build_batch(records(0, 1)), acks=2)
    assert (
        bad_acks.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    )
    legacy_in_v3 = await produce(client, "small", build_message_set(records(0, 1), 1, 0), version=3)
    assert legacy_in_v3.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    partition = broker.partition("small", 0)
    assert partition is not None and partition.high_watermark == 0


async def test_min_insync_replicas_is_capped_at_the_replica_count(
    broker: Broker, client: RawClient
) -> None:
    """Kafka 3.9 and 4.3 take acks=all writes to a one-replica topic whose
    min.insync.replicas is 2 (Kafka's effective min ISR is capped at the replica count);
    librdkafka's 0081 DeleteRecords produces so on a cluster with min.insync.replicas=2."""
    await create_topic(client, "strict", min_insync_replicas="2")
    partition = broker.partition("strict", 0)
    assert partition is not None and len(partition.replicas) == 1
    answered = await produce(client, "strict", build_batch(records(0, 1)), acks=-1)
    assert answered.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert partition.high_watermark == 1


async def test_idempotent_duplicates_and_gaps(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "idem")
    init = await client.call(
        ApiKey.INIT_PRODUCER_ID,
        4,
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000),
    )
    assert isinstance(init, InitProducerIdResponse) and init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch

    def batch(sequence: int) -> bytes:
        return build_batch(
            records(sequence, 2), producer_id=pid, producer_epoch=epoch, base_sequence=sequence
        )

    first = await produce(client, "idem", batch(0))
    again = await produce(client, "idem", batch(0))
    assert first.responses[0].partition_responses[0].base_offset == 0
    assert again.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert again.responses[0].partition_responses[0].base_offset == 0
    gap = await produce(client, "idem", batch(5))
    assert (
        gap.responses[0].partition_responses[0].error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    nxt = await produce(client, "idem", batch(2))
    assert nxt.responses[0].partition_responses[0].base_offset == 2
    partition = broker.partition("idem", 0)
    assert partition is not None and partition.high_watermark == 4
    second = await client.call(
        ApiKey.INIT_PRODUCER_ID,
        4,
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000),
    )
    assert isinstance(second, InitProducerIdResponse) and second.producer_id != pid


async def test_list_offsets_every_version(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "offsets")
    await produce(client, "offsets", build_batch(records(0, 5, ts=1000)))
    await produce(client, "offsets", build_batch(records(5, 5, ts=2000)))
    for version in served_versions(ApiKey.LIST_OFFSETS):
        targets = {-2: 0, -1: 10}
        if version >= 1:
            targets.update({1002: 2, 2000: 5, 9999: -1})
        if version >= 7:
            targets[-3] = 9
        if version >= 8:
            targets[-4] = 0  # earliest local: the log start, nothing being tiered
        if version >= 9:
            targets[-5] = -1  # latest tiered: none, as Kafka answers without remote storage
        if version >= 11:
            targets[-6] = -1  # earliest pending upload: none either
        for timestamp, offset in targets.items():
            request = ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsTopic(
                        name="offsets",
                        partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)],
                    )
                ],
            )
            response = await client.call(ApiKey.LIST_OFFSETS, version, request)
            assert isinstance(response, ListOffsetsResponse)
            answer = response.topics[0].partitions[0]
            assert answer.error_code == ErrorCode.NONE
            got = answer.old_style_offsets[0] if version == 0 else answer.offset
            assert got == offset, (version, timestamp)
            if version >= 4:
                # No offset, no epoch (Kafka 4.3 answers -1 for both).
                assert (answer.leader_epoch == -1) == (offset == -1), (version, timestamp)


async def test_data_and_topics_survive_restart(tmp_path, client: RawClient, broker: Broker) -> None:
    from tests.server.conftest import broker_config, free_port

    await create_topic(client, "durable", partitions=2)
    await produce(client, "durable", build_batch(records(0, 4)))
    await client.close()
    await broker.stop()
    again = Broker(broker_config(broker.config.log_dirs[0], free_port()))
    await again.start()
    try:
        other = await RawClient.connect(again.port)
        data = (await fetch(other, again, "durable", 0)).responses[0].partitions[0]
        assert [r.offset for r in decode_records(bytes(data.records))] == [0, 1, 2, 3]
        info = again.metadata.topic("durable")
        assert info is not None and len(info.partitions) == 2
        await other.close()
    finally:
        await again.stop()
