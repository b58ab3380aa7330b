"""The connection layer: negotiation, bad input, ordering, acks=0."""

from __future__ import annotations

import asyncio
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.broker import Broker
from kbroker.dispatch import HANDLERS, SERVED_MAX
from tests.server.conftest import RawClient
from wire.api_keys import REQUEST_CLASSES, ApiKey
from wire.errors import ErrorCode
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.api_versions_response import ApiVersionsResponse
from wire.messages.metadata_request import MetadataRequest
from wire.messages.request_header import RequestHeader

IMPLEMENTED = set(HANDLERS)


async def assert_serving(broker: Broker) -> None:
    other = await RawClient.connect(broker.port)
    try:
        response = await other.call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        assert isinstance(response, ApiVersionsResponse)
        assert response.error_code == ErrorCode.NONE
    finally:
        await other.close()


async def test_api_versions_every_version_advertises_exactly_the_handlers(
    client: RawClient,
) -> None:
    for version in range(ApiVersionsRequest.MIN_VERSION, ApiVersionsRequest.MAX_VERSION + 1):
        request = ApiVersionsRequest(
            client_software_name="kbroker-tests", client_software_version="1.0"
        )
        response = await client.call(ApiKey.API_VERSIONS, version, request)
        assert isinstance(response, ApiVersionsResponse)
        assert response.error_code == ErrorCode.NONE
        advertised = {v.api_key: (v.min_version, v.max_version) for v in response.api_keys}
        assert set(advertised) == IMPLEMENTED
        assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.LIST_OFFSETS} <= IMPLEMENTED
        for key, (low, high) in advertised.items():
            assert (low, high) == (
                REQUEST_CLASSES[key].MIN_VERSION,
                SERVED_MAX.get(key, REQUEST_CLASSES[key].MAX_VERSION),
            )
        assert advertised[ApiKey.PRODUCE][0] == 0


async def test_api_versions_reports_features(client: RawClient) -> None:
    # KIP-584 (v3+): transaction.version 2 is finalized, so Kafka 4.x clients use KIP-890's
    # second part, and group.version / share.version 1 (KIP-848, KIP-932); features not
    # implemented are listed at level 0 and not finalized.
    request = ApiVersionsRequest(client_software_name="kbroker-tests", client_software_version="1")
    response = await client.call(ApiKey.API_VERSIONS, 3, request)
    assert isinstance(response, ApiVersionsResponse)
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert supported["transaction.version"] == (0, 2)
    assert supported["group.version"] == (0, 1)
    assert supported["streams.version"] == (0, 0)
    finalized = {
        f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features
    }
    assert finalized == {
        "transaction.version": (2, 2),
        "group.version": (1, 1),
        "share.version": (1, 1),
    }


async def test_api_versions_bad_software_name_is_invalid_request(client: RawClient) -> None:
    request = ApiVersionsRequest(client_software_name="-bad-", client_software_version="1")
    response = await client.call(ApiKey.API_VERSIONS, 3, request)
    assert isinstance(response, ApiVersionsResponse)
    assert response.error_code == ErrorCode.INVALID_REQUEST


async def test_unknown_api_versions_version_gets_v0_answer(client: RawClient) -> None:
    # KIP-511: header v2 with version 99, answered in v0 with our ranges.
    header = (
        struct.pack(">hhi", ApiKey.API_VERSIONS, 99, 7) + struct.pack(">h", 5) + b"tests" + b"\x00"
    )
    client.writer.write(struct.pack(">i", len(header)) + header)
    size = struct.unpack(">i", await client.reader.readexactly(4))[0]
    frame = await client.reader.readexactly(size)
    correlation_id, error_code = struct.unpack_from(">ih", frame)
    assert correlation_id == 7
    assert error_code == ErrorCode.UNSUPPORTED_VERSION
    response = ApiVersionsResponse.decode(memoryview(frame)[4:], 0)
    assert {v.api_key for v in response.api_keys} == IMPLEMENTED


async def test_unknown_version_of_other_api_closes(broker: Broker, client: RawClient) -> None:
    header = struct.pack(">hhi", ApiKey.METADATA, 99, 1) + struct.pack(">h", -1)
    client.writer.write(struct.pack(">i", len(header)) + header)
    assert await client.closed_by_peer()
    await assert_serving(broker)


async def test_version_in_the_specs_but_not_served_closes(client: RawClient) -> None:
    # A version the message classes know but the broker does not advertise is refused as
    # Kafka refuses any unsupported version: the connection closes, nothing is answered.
    key, served = next(iter(SERVED_MAX.items()))
    cls = REQUEST_CLASSES[key]
    assert served < cls.MAX_VERSION
    body = cls().encode(served + 1)
    header = RequestHeader(request_api_key=key, request_api_version=served + 1, correlation_id=3)
    frame = header.encode(2 if served + 1 >= (cls.FLEXIBLE_MIN or 99) else 1) + body
    client.writer.write(struct.pack(">i", len(frame)) + frame)
    assert await client.closed_by_peer()


async def test_unknown_api_key_closes(broker: Broker, client: RawClient) -> None:
    header = struct.pack(">hhi", 9999, 0, 1) + struct.pack(">h", -1)
    client.writer.write(struct.pack(">i", len(header)) + header)
    assert await client.closed_by_peer()
    await assert_serving(broker)


async def test_unimplemented_api_closes(broker: Broker, client: RawClient) -> None:
    assert ApiKey.CREATE_DELEGATION_TOKEN not in HANDLERS
    header = RequestHeader(
        request_api_key=ApiKey.CREATE_DELEGATION_TOKEN, request_api_version=1, correlation_id=1
    )
    body = REQUEST_CLASSES[ApiKey.CREATE_DELEGATION_TOKEN]().encode(1)
    payload = header.encode(1) + body
    client.writer.write(struct.pack(">i", len(payload)) + payload)
    assert await client.closed_by_peer()
    await assert_serving(broker)


async def test_sasl_handshake_on_a_plaintext_listener(broker: Broker, client: RawClient) -> None:
    """Kafka answers ILLEGAL_SASL_STATE where SASL is not enabled (and keeps serving)."""
    body = REQUEST_CLASSES[ApiKey.SASL_HANDSHAKE](mechanism="PLAIN")
    response = await client.call(ApiKey.SASL_HANDSHAKE, 1, body)
    assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE  # type: ignore[attr-defined]
    await assert_serving(broker)


async def test_negative_and_oversized_frames_close(broker: Broker) -> None:
    for size in (-5, broker.config.socket_request_max_bytes + 1):
        client = await RawClient.connect(broker.port)
        client.writer.write(struct.pack(">i", size) + b"\x00" * 8)
        assert await client.closed_by_peer()
        await client.close()
    await assert_serving(broker)


async def test_truncated_body_closes(broker: Broker, client: RawClient) -> None:
    header = RequestHeader(request_api_key=ApiKey.METADATA, request_api_version=1, correlation_id=3)
    full = MetadataRequest(topics=[]).encode(1)
    payload = header.encode(1) + full[:1]
    client.writer.write(struct.pack(">i", len(payload)) + payload)
    assert await client.closed_by_peer()
    await assert_serving(broker)


async def test_pipelined_requests_answer_in_order(client: RawClient) -> None:
    ids = [await client.send(ApiKey.METADATA, v, MetadataRequest(topics=[])) for v in (1, 4, 9, 12)]
    for correlation_id, version in zip(ids, (1, 4, 9, 12), strict=True):
        await client.receive(ApiKey.METADATA, version, correlation_id)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(payload=st.binary(min_size=0, max_size=200))
async def test_random_frames_never_take_the_broker_down(broker: Broker, payload: bytes) -> None:
    client = await RawClient.connect(broker.port)
    client.writer.write(struct.pack(">i", len(payload)) + payload)
    await client.writer.drain()
    # Either an answer or a close; never a hang of the whole broker.
    try:
        await asyncio.wait_for(client.reader.read(4), 0.5)
    except (TimeoutError, ConnectionError):
        pass
    await client.close()
    await assert_serving(broker)
