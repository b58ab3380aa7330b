"""The client connection core, byte level: client bytes in a fake broker, its bytes back in,
events out (framing, correlation ids, KIP-511 negotiation, version caps)."""

from __future__ import annotations

import struct

import pytest

from kbroker.client_core.connection import (
    ClientConnection,
    ProtocolError,
    Ready,
    Response,
    State,
)
from tests.client_core.fake_broker import FakeBroker
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.metadata_request import MetadataRequest
from wire.messages.metadata_response import MetadataResponse
from wire.messages.produce_request import ProduceRequest


def ready(broker: FakeBroker, **kw: object) -> ClientConnection:
    client = ClientConnection("test", **kw)  # type: ignore[arg-type]
    [(header, _)] = broker.receive(client.data_to_send())
    events = client.receive_data(broker.answer(header, broker.api_versions()))
    assert events == [Ready(client.versions, 0)]
    return client


def test_kip511_falls_back_to_the_brokers_apiversions_version() -> None:
    client = ClientConnection("test")
    [(header, request)] = FakeBroker().receive(client.data_to_send())
    assert (header.request_api_key, header.request_api_version) == (ApiKey.API_VERSIONS, 4)
    assert request.client_software_name == "kbroker"
    # A broker that knows ApiVersions up to v2 refuses v4 in version 0 (KIP-511): size,
    # correlation id, UNSUPPORTED_VERSION (35), one entry: api key 18, versions 0..2.
    refusal = struct.pack(">iihihhh", 16, header.correlation_id, 35, 1, 18, 0, 2)
    assert client.receive_data(refusal) == []
    [(retry, request)] = FakeBroker().receive(client.data_to_send())
    assert (retry.request_api_key, retry.request_api_version) == (ApiKey.API_VERSIONS, 2)
    assert retry.correlation_id != header.correlation_id
    # Version 2: the same with throttle_time_ms at the end.
    answer = struct.pack(">iihihhhhhhi", 26, retry.correlation_id, 0, 2, 18, 0, 2, 3, 0, 12, 0)
    assert client.receive_data(answer) == [Ready({18: (0, 2), 3: (0, 12)}, 0)]
    assert client.state is State.READY
    assert client.version(ApiKey.METADATA) == 12


def test_refusal_without_a_lower_version_fails() -> None:
    client = ClientConnection("test")
    [(header, _)] = FakeBroker().receive(client.data_to_send())
    refusal = struct.pack(">iihihhh", 16, header.correlation_id, 35, 1, 18, 4, 4)
    with pytest.raises(KafkaError) as exc:
        client.receive_data(refusal)
    assert exc.value.code == ErrorCode.UNSUPPORTED_VERSION
    assert client.state is State.CLOSED


def test_versions_respect_broker_caps_and_caller() -> None:
    broker = FakeBroker()
    client = ready(broker, caps={ApiKey.FETCH: (4, 12)})
    assert client.version(ApiKey.FETCH) == 12
    assert client.version(ApiKey.FETCH, highest=11) == 11
    assert client.version(ApiKey.PRODUCE) == 11
    with pytest.raises(KafkaError, match="does not support DELETE_TOPICS"):
        client.version(ApiKey.DELETE_TOPICS)
    capped = ready(FakeBroker(), caps={ApiKey.PRODUCE: (0, 2)})
    with pytest.raises(KafkaError, match="no common version of PRODUCE"):
        capped.version(ApiKey.PRODUCE)


def test_nothing_is_sent_before_negotiation() -> None:
    client = ClientConnection("test")
    with pytest.raises(RuntimeError):
        client.send(ApiKey.METADATA, MetadataRequest())


def test_pipelined_requests_are_matched_in_order_byte_by_byte() -> None:
    broker = FakeBroker()
    client = ready(broker)
    first = client.send(ApiKey.METADATA, MetadataRequest(topics=[]))
    second = client.send(ApiKey.METADATA, MetadataRequest(topics=[]), 1)
    assert (first.version, second.version) == (12, 1)
    requests = broker.receive(client.data_to_send())
    assert [h.correlation_id for h, _ in requests] == [first.correlation_id, second.correlation_id]
    data = b"".join(
        broker.answer(h, MetadataResponse(controller_id=h.request_api_version)) for h, _ in requests
    )
    events = []
    for i in range(len(data)):
        events += client.receive_data(data[i : i + 1])
    assert [
        (e.correlation_id, e.version, e.body.controller_id)
        for e in events
        if isinstance(e, Response)
    ] == [
        (first.correlation_id, 12, 12),
        (second.correlation_id, 1, 1),
    ]
    assert client.in_flight == 0


def test_a_response_out_of_order_breaks_the_connection() -> None:
    broker = FakeBroker()
    client = ready(broker)
    client.send(ApiKey.METADATA, MetadataRequest(topics=[]))
    client.send(ApiKey.METADATA, MetadataRequest(topics=[]))
    first, second = broker.receive(client.data_to_send())
    with pytest.raises(ProtocolError, match="response"):
        client.receive_data(broker.answer(second[0], MetadataResponse()))
    assert client.state is State.CLOSED


def test_unasked_response_breaks_the_connection() -> None:
    broker = FakeBroker()
    client = ready(broker)
    with pytest.raises(ProtocolError):
        client.receive_data(struct.pack(">ii", 4, 99))


def test_produce_with_acks_0_expects_no_answer() -> None:
    client = ready(FakeBroker())
    sent = client.send(ApiKey.PRODUCE, ProduceRequest(acks=0, timeout_ms=1))
    assert not sent.expects_response
    assert client.in_flight == 0
    assert client.send(ApiKey.PRODUCE, ProduceRequest(acks=1, timeout_ms=1)).expects_response
    assert client.in_flight == 1


def test_buffer_interface_reads_in_place() -> None:
    broker = FakeBroker()
    client = ClientConnection("test")
    [(header, _)] = broker.receive(client.data_to_send())
    data = broker.answer(header, broker.api_versions())
    events = []
    while data:
        buf = client.get_buffer()
        n = min(len(buf), len(data), 7)
        buf[:n] = data[:n]
        del buf
        data = data[n:]
        events += client.buffer_updated(n)
    assert [type(e) for e in events] == [Ready]
