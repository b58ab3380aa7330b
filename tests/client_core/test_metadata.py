"""Leader and coordinator moves, byte level: responses come through a ClientConnection from
a fake broker and are handed to ClusterMetadata, as the shells do."""

from __future__ import annotations

from typing import Any

import pytest

from kbroker.client_core.connection import ClientConnection, Response
from kbroker.client_core.metadata import (
    GROUP,
    TRANSACTION,
    ClusterMetadata,
    find_coordinator_answer,
    find_coordinator_request,
    metadata_request,
    topic_partitions,
)
from tests.client_core.fake_broker import FakeBroker
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from wire.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from wire.messages.offset_commit_request import OffsetCommitRequest
from wire.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from wire.messages.produce_request import ProduceRequest
from wire.messages.produce_response import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)

BROKERS = [MetadataResponseBroker(node_id=n, host=f"b{n}", port=9090 + n) for n in (1, 2, 3)]


def connected() -> tuple[FakeBroker, ClientConnection]:
    broker = FakeBroker()
    client = ClientConnection("test")
    [(header, _)] = broker.receive(client.data_to_send())
    client.receive_data(broker.answer(header, broker.api_versions()))
    return broker, client


def exchange(
    broker: FakeBroker,
    client: ClientConnection,
    api_key: int,
    request: Any,
    answer: Any,
    version: int | None = None,
) -> Response:
    sent = client.send(api_key, request, version)
    [(header, _)] = broker.receive(client.data_to_send())
    [event] = client.receive_data(broker.answer(header, answer))
    assert isinstance(event, Response) and event.correlation_id == sent.correlation_id
    return event


def metadata(
    leader: int, epoch: int, brokers: list[MetadataResponseBroker] = BROKERS
) -> MetadataResponse:
    partition = MetadataResponsePartition(partition_index=0, leader_id=leader, leader_epoch=epoch)
    return MetadataResponse(
        brokers=brokers,
        topics=[MetadataResponseTopic(name="t", partitions=[partition])],
    )


def produce_error(
    error: int, hint: tuple[int, int] | None, endpoints: list[NodeEndpoint]
) -> ProduceResponse:
    partition = PartitionProduceResponse(index=0, error_code=error, base_offset=-1)
    if hint is not None:
        partition.current_leader = LeaderIdAndEpoch(leader_id=hint[0], leader_epoch=hint[1])
    return ProduceResponse(
        responses=[TopicProduceResponse(name="t", partition_responses=[partition])],
        node_endpoints=endpoints,
    )


def partition_error(cache: ClusterMetadata, response: ProduceResponse) -> bool:
    """What a shell does with a Produce answer (KIP-951 fields included)."""
    p = response.responses[0].partition_responses[0]
    hint = (p.current_leader.leader_id, p.current_leader.leader_epoch)
    endpoints = [(e.node_id, e.host, e.port) for e in response.node_endpoints]
    return cache.partition_error(("t", 0), p.error_code, hint, endpoints)


def test_metadata_request_versions() -> None:
    assert metadata_request(None, 0).topics == []
    assert metadata_request(None, 1).topics is None
    assert metadata_request(["a"], 12).allow_auto_topic_creation is False
    assert metadata_request(["a"], 3).allow_auto_topic_creation is True


def test_leader_move_without_hint_refreshes_metadata() -> None:
    broker, client = connected()
    cache = ClusterMetadata()
    answer = exchange(broker, client, ApiKey.METADATA, metadata_request(["t"], 12), metadata(1, 5))
    cache.update(answer.body)
    assert topic_partitions(answer.body) == {"t": [0]}
    assert cache.leader_address(("t", 0)) == ("b1", 9091)
    # Produce v9 knows nothing of KIP-951: NOT_LEADER_OR_FOLLOWER alone.
    failed = exchange(
        broker,
        client,
        ApiKey.PRODUCE,
        ProduceRequest(acks=-1, timeout_ms=1),
        produce_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, None, []),
        version=9,
    )
    assert partition_error(cache, failed.body)
    assert cache.leader(("t", 0)) is None
    answer = exchange(broker, client, ApiKey.METADATA, metadata_request(["t"], 12), metadata(2, 6))
    cache.update(answer.body)
    assert cache.leader_address(("t", 0)) == ("b2", 9092)


def test_leader_move_with_kip951_hint_needs_no_refresh() -> None:
    broker, client = connected()
    cache = ClusterMetadata()
    cache.update(metadata(1, 5, BROKERS[:2]))
    # Produce v10+ names the new leader and its endpoint with the error (KIP-951); broker 3
    # is not in our metadata yet.
    hint = produce_error(
        ErrorCode.NOT_LEADER_OR_FOLLOWER, (3, 6), [NodeEndpoint(node_id=3, host="b3", port=9093)]
    )
    failed = exchange(broker, client, ApiKey.PRODUCE, ProduceRequest(acks=-1, timeout_ms=1), hint)
    assert failed.version == 11
    assert partition_error(cache, failed.body)
    assert cache.leader_address(("t", 0)) == ("b3", 9093)
    # Metadata from a broker that still believes in epoch 5 does not undo it (KIP-320).
    cache.update(metadata(1, 5))
    assert cache.leader_address(("t", 0)) == ("b3", 9093)


def test_stale_or_unreachable_hints_are_ignored() -> None:
    cache = ClusterMetadata()
    cache.update(metadata(1, 5, BROKERS[:2]))
    assert partition_error(cache, produce_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, (2, 4), []))
    assert cache.leader(("t", 0)) is None
    cache.update(metadata(1, 5, BROKERS[:2]))
    # An unknown node without an endpoint: refresh instead.
    assert partition_error(cache, produce_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, (3, 6), []))
    assert cache.leader(("t", 0)) is None


def test_other_errors() -> None:
    cache = ClusterMetadata()
    cache.update(metadata(1, 5))
    assert not cache.partition_error(("t", 0), ErrorCode.INVALID_RECORD)
    assert cache.leader(("t", 0)) is not None
    assert cache.partition_error(("t", 0), ErrorCode.NOT_ENOUGH_REPLICAS)
    assert cache.leader(("t", 0)) is None
    gone = MetadataResponse(
        brokers=BROKERS,
        topics=[MetadataResponseTopic(name="t", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)],
    )
    cache.update(metadata(1, 5))
    cache.update(gone)
    assert topic_partitions(gone) == {}
    assert cache.leader(("t", 0)) is None


def test_internal_topics_are_optional() -> None:
    response = metadata(1, 5)
    response.topics.append(MetadataResponseTopic(name="__consumer_offsets", is_internal=True))
    assert topic_partitions(response, include_internal=False) == {"t": [0]}
    assert set(topic_partitions(response)) == {"t", "__consumer_offsets"}


@pytest.mark.parametrize("version", [3, 4])
def test_coordinator_move(version: int) -> None:
    broker, client = connected()
    cache = ClusterMetadata()
    cache.update(metadata(1, 5))

    def find(node: int) -> None:
        if version >= 4:
            answer_body = FindCoordinatorResponse(
                coordinators=[Coordinator(key="g", node_id=node, host=f"b{node}", port=9090 + node)]
            )
        else:
            answer_body = FindCoordinatorResponse(node_id=node, host=f"b{node}", port=9090 + node)
        request = find_coordinator_request("g", GROUP, version)
        answer = exchange(broker, client, ApiKey.FIND_COORDINATOR, request, answer_body, version)
        assert cache.coordinator_found("g", GROUP, find_coordinator_answer(answer.body, version))

    assert cache.coordinator("g") is None
    find(1)
    assert cache.coordinator("g") == ("b1", 9091)
    assert cache.coordinator("g", TRANSACTION) is None
    refused = OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name="t",
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=0, error_code=ErrorCode.NOT_COORDINATOR
                    )
                ],
            )
        ]
    )
    answer = exchange(
        broker, client, ApiKey.OFFSET_COMMIT, OffsetCommitRequest(group_id="g"), refused
    )
    error = answer.body.topics[0].partitions[0].error_code
    assert cache.coordinator_error("g", GROUP, error)
    assert cache.coordinator("g") is None
    find(2)
    assert cache.coordinator("g") == ("b2", 9092)
    # Still loading: retried, but the coordinator stays where it is.
    assert cache.coordinator_error("g", GROUP, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert cache.coordinator("g") == ("b2", 9092)
    assert not cache.coordinator_error("g", GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED)


def test_find_coordinator_error_answer() -> None:
    refusal = FindCoordinatorResponse(
        coordinators=[
            Coordinator(
                key="g", error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message="loading"
            )
        ]
    )
    answer = find_coordinator_answer(refusal, 4)
    assert answer.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert not ClusterMetadata().coordinator_found("g", GROUP, answer)
    assert find_coordinator_request("x", TRANSACTION, 4).coordinator_keys == ["x"]
