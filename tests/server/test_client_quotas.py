"""AlterClientQuotas / DescribeClientQuotas over the wire, every version, and throttling
of a producer and a consumer over quota (issue 13, item 4)."""

from __future__ import annotations

import struct
import time
from pathlib import Path

from kbroker.broker import Broker
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_data_path import create_topic, fetch, produce, records
from tests.server.test_request_memory import StartBroker, start_broker  # noqa: F401
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.frame import decode_response, encode_request
from wire.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from wire.messages.describe_client_quotas_request import (
    ComponentData,
    DescribeClientQuotasRequest,
)
from wire.messages.metadata_request import MetadataRequest
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.produce_response import ProduceResponse
from wire.messages.request_header import RequestHeader
from wire.records.record import build_batch


def _entry(entity: dict[str, str | None], **ops: float | None) -> EntryData:
    return EntryData(
        entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[
            OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()
        ],
    )


async def _describe(
    client: RawClient, version: int, *components: tuple[str, int, str | None], strict: bool = False
) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    request = DescribeClientQuotasRequest(
        components=[ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components],
        strict=strict,
    )
    response = await client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, request)
    assert response.error_code == ErrorCode.NONE, response
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


async def test_alter_and_describe_every_version(broker: Broker, client: RawClient) -> None:
    for version in range(0, 2):
        user = f"alice{version}"
        request = AlterClientQuotasRequest(
            entries=[
                _entry({"user": user}, producer_byte_rate=1024, consumer_byte_rate=2048),
                _entry({"user": user, "client-id": None}, request_percentage=50),
                _entry({"client-id": "app"}, producer_byte_rate=3.5),  # not a whole number
                _entry({"user": user}, foo=1),  # unknown key
                _entry({"group": "g"}, producer_byte_rate=1),  # unknown entity type
            ]
        )
        response = await client.call(ApiKey.ALTER_CLIENT_QUOTAS, version, request)
        codes = [e.error_code for e in response.entries]
        assert codes == [0, 0, 42, 42, 42], response
        exact = await _describe(client, version, ("user", 0, user))
        assert exact == {
            (("user", user),): {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0},
            (("client-id", None), ("user", user)): {"request_percentage": 50.0},
        }
        strict = await _describe(client, version, ("user", 0, user), strict=True)
        assert list(strict) == [(("user", user),)]
        defaults = await _describe(client, version, ("user", 0, user), ("client-id", 1, None))
        assert list(defaults) == [(("client-id", None), ("user", user))]
        # Removing the last key removes the entity.
        remove = AlterClientQuotasRequest(
            entries=[_entry({"user": user, "client-id": None}, request_percentage=None)]
        )
        await client.call(ApiKey.ALTER_CLIENT_QUOTAS, version, remove)
        users = await _describe(client, version, ("user", 2, None))
        assert (("user", user),) in users
        assert (("client-id", None), ("user", user)) not in users


async def test_validate_only_changes_nothing(broker: Broker, client: RawClient) -> None:
    request = AlterClientQuotasRequest(
        entries=[_entry({"client-id": "x"}, producer_byte_rate=10)], validate_only=True
    )
    response = await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
    assert response.entries[0].error_code == ErrorCode.NONE
    assert await _describe(client, 1) == {}


async def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    config = broker_config(tmp_path / "data", free_port())
    first = Broker(config)
    await first.start()
    client = await RawClient.connect(first.port)
    request = AlterClientQuotasRequest(entries=[_entry({"user": None}, consumer_byte_rate=99)])
    await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
    await client.close()
    await first.stop()
    second = Broker(config)
    await second.start()
    try:
        client = await RawClient.connect(second.port)
        assert await _describe(client, 1) == {(("user", None),): {"consumer_byte_rate": 99.0}}
        await client.close()
    finally:
        await second.stop()


async def test_producer_and_consumer_over_quota_get_throttle_times(
    start_broker: StartBroker,  # noqa: F811
) -> None:
    # Two one-second samples: the rate is measured over one second at least.
    broker = await start_broker(quota_window_num="2")
    client = await RawClient.connect(broker.port)
    await create_topic(client, "quoted")
    batch = build_batch(records(0, 200))
    # One batch a second is 1.5 times the quota: half a second's throttle.
    quota = float(len(batch) * 2 // 3)
    request = AlterClientQuotasRequest(
        entries=[
            _entry(
                {"client-id": "kbroker-tests"}, producer_byte_rate=quota, consumer_byte_rate=quota
            )
        ]
    )
    await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
    produced = await produce(client, "quoted", batch)
    assert 300 <= produced.throttle_time_ms <= 700
    started = time.monotonic()
    fetched = await fetch(client, broker, "quoted", 0)
    # The channel was muted for the produce's throttle time before the fetch was read.
    assert time.monotonic() - started >= 0.25
    assert fetched.throttle_time_ms > 0
    # KIP-219: over its quota, the consumer gets an empty response (Kafka's behaviour).
    assert fetched.responses == []
    # Another client id is not throttled.
    other = await RawClient.connect(broker.port)
    other_response = await _produce_as(other, "other-client", batch)
    assert other_response.throttle_time_ms == 0
    for c in (client, other):
        await c.close()


async def _produce_as(
    client: RawClient, client_id: str, batch: bytes, topic: str = "quoted"
) -> ProduceResponse:
    request = ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    header = RequestHeader(
        request_api_key=ApiKey.PRODUCE, request_api_version=9, correlation_id=1, client_id=client_id
    )
    client.writer.write(encode_request(header, request, 9))
    size = struct.unpack(">i", await client.reader.readexactly(4))[0]
    _, response = decode_response(await client.reader.readexactly(size), ApiKey.PRODUCE, 9)
    assert isinstance(response, ProduceResponse)
    return response


async def test_throttles_and_limits_are_on_the_metrics_endpoint(
    start_broker: StartBroker,  # noqa: F811
) -> None:
    from kbroker.metrics import BrokerMetrics

    broker = await start_broker(quota_window_num="2")
    client = await RawClient.connect(broker.port)
    await create_topic(client, "metered")
    batch = build_batch(records(0, 200))
    request = AlterClientQuotasRequest(
        entries=[_entry({"client-id": None}, producer_byte_rate=float(len(batch) // 2))]
    )
    await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
    response = await _produce_as(client, "any-client", batch, topic="metered")
    assert response.throttle_time_ms > 0
    text = BrokerMetrics(broker).render()
    assert 'kbroker_quota_throttled_total{quota="producer_byte_rate"} 1' in text
    assert "kbroker_quota_throttle_time_ms_total" in text
    assert 'kbroker_connections{listener="PLAINTEXT"} 1' in text
    assert "kbroker_request_memory_bytes " in text
    await client.close()


async def test_request_percentage_charges_handler_time_not_waiting(
    start_broker: StartBroker,  # noqa: F811
) -> None:
    """KIP-124: request_percentage meters the time the broker works on a client's requests.
    A long-polling fetch that waits half a second costs next to nothing; a client that keeps
    the broker busy is throttled (throttle_time_ms, then a muted channel); others are not."""
    broker = await start_broker(quota_window_num="2")
    client = await RawClient.connect(broker.port)
    await create_topic(client, "polled")
    request = AlterClientQuotasRequest(
        entries=[_entry({"client-id": "kbroker-tests"}, request_percentage=2.0)]
    )
    await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
    # Waiting in the purgatory is not work: were the 0.5 s charged, that is 25% of the
    # two-second window, far over 2%.
    polled = await fetch(client, broker, "polled", 0, max_wait_ms=500, min_bytes=1)
    assert polled.throttle_time_ms == 0
    # Metadata requests, each a little work: within a second they add up to over 2% of it.
    throttled = None
    started = time.monotonic()
    while throttled is None and time.monotonic() - started < 10:
        response = await client.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        if response.throttle_time_ms > 0:
            throttled = response.throttle_time_ms
    assert throttled is not None and throttled <= 2000
    # The channel is muted for the throttle time before the next request is read.
    before = time.monotonic()
    await client.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))
    assert time.monotonic() - before >= throttled / 1000 * 0.8
    other = await RawClient.connect(broker.port)
    other_response = await _produce_as(other, "other-client", build_batch(records(0, 1)), "polled")
    assert other_response.throttle_time_ms == 0
    for c in (client, other):
        await c.close()
