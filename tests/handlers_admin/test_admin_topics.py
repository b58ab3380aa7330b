"""CreateTopics, DeleteTopics, CreatePartitions handlers."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kbroker.config_defs import TOPIC_DEFS, ConfigSource
from kbroker.handlers.admin_topics import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from tests.handlers_admin.conftest import header, make_broker, roundtrip
from wire.errors import ErrorCode
from wire.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from wire.messages.create_partitions_response import CreatePartitionsResponse
from wire.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from wire.messages.create_topics_response import CreateTopicsResponse
from wire.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from wire.messages.delete_topics_response import DeleteTopicsResponse
from wire.primitives import ZERO_UUID

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


def topic(name: str, partitions: int = 1, rf: int = 1, **kwargs: Any) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf, **kwargs)


async def create(
    broker: Any, version: int, *topics: CreatableTopic, validate_only: bool = False
) -> CreateTopicsResponse:
    request = roundtrip(
        CreateTopicsRequest(topics=list(topics), validate_only=validate_only), version
    )
    response = await handle_create_topics(broker, header(CREATE_TOPICS, version), request, version)
    return roundtrip(response, version)


@pytest.mark.parametrize("version", range(0, 8))
async def test_create_topics_every_version(broker: Any, version: int) -> None:
    response = await create(
        broker,
        version,
        topic("t", 3, configs=[CreatableTopicConfig(name="retention.ms", value="1000")]),
    )
    [result] = response.topics
    assert (result.name, result.error_code) == ("t", ErrorCode.NONE)
    info = broker.metadata.topic("t")
    assert len(info.partitions) == 3 and info.configs == {"retention.ms": "1000"}
    if version >= 7:
        assert result.topic_id == info.topic_id != ZERO_UUID
    else:
        assert result.topic_id == ZERO_UUID
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        configs = {c.name: c for c in result.configs}
        assert set(configs) == set(TOPIC_DEFS)
        assert configs["retention.ms"].value == "1000"
        assert configs["retention.ms"].config_source == ConfigSource.TOPIC_CONFIG
        assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
        assert not configs["segment.bytes"].read_only
    else:
        assert result.num_partitions == -1 and result.configs == []


async def test_create_topics_broker_defaults(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path, **{"num.partitions": "4"})
    response = await create(broker, 7, topic("t", -1, -1))
    assert response.topics[0].error_code == ErrorCode.NONE
    assert response.topics[0].num_partitions == 4
    assert len(broker.metadata.topic("t").partitions) == 4


async def test_create_topics_with_assignments(broker: Any) -> None:
    assignments = [CreatableReplicaAssignment(partition_index=i, broker_ids=[1]) for i in (1, 0)]
    response = await create(broker, 4, topic("t", -1, -1, assignments=assignments))
    assert response.topics[0].error_code == ErrorCode.NONE
    assert len(broker.metadata.topic("t").partitions) == 2


@pytest.mark.parametrize(
    ("created", "code"),
    [
        (topic("bad/name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (topic("t", 0), ErrorCode.INVALID_PARTITIONS),
        (topic("t", 1, 3), ErrorCode.INVALID_REPLICATION_FACTOR),
        (
            topic(
                "t",
                1,
                1,
                assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[1])],
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            topic(
                "t",
                -1,
                -1,
                assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[9])],
            ),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            topic(
                "t",
                -1,
                -1,
                assignments=[
                    CreatableReplicaAssignment(partition_index=0, broker_ids=[1]),
                    CreatableReplicaAssignment(partition_index=0, broker_ids=[1]),
                ],
            ),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            topic("t", configs=[CreatableTopicConfig(name="retention.ms", value="x")]),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            topic("t", configs=[CreatableTopicConfig(name="nope", value="1")]),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            topic("t", configs=[CreatableTopicConfig(name="retention.ms", value=None)]),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            topic(
                "t",
                configs=[
                    CreatableTopicConfig(name="retention.ms", value="1"),
                    CreatableTopicConfig(name="retention.ms", value="2"),
                ],
            ),
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
@pytest.mark.parametrize("version", [0, 1, 7])
async def test_create_topics_errors(
    broker: Any, created: CreatableTopic, code: ErrorCode, version: int
) -> None:
    response = await create(broker, version, created)
    [result] = response.topics
    assert result.error_code == code
    if version >= 1:
        assert result.error_message
    assert (result.num_partitions, result.topic_id) == (-1, ZERO_UUID)
    assert broker.metadata.topics() == {}


async def test_create_existing_topic(broker: Any) -> None:
    await create(broker, 7, topic("t"))
    response = await create(broker, 7, topic("t"), topic("u"))
    assert [(r.name, r.error_code) for r in response.topics] == [
        ("t", ErrorCode.TOPIC_ALREADY_EXISTS),
        ("u", ErrorCode.NONE),
    ]


async def test_duplicate_topics_in_one_request(broker: Any) -> None:
    response = await create(broker, 6, topic("t"), topic("u"), topic("t", 2))
    assert [(r.name, r.error_code) for r in response.topics] == [
        ("t", ErrorCode.INVALID_REQUEST),
        ("u", ErrorCode.NONE),
    ]
    assert set(broker.metadata.topics()) == {"u"}


async def test_create_topics_validate_only(broker: Any) -> None:
    response = await create(broker, 7, topic("t", 2), validate_only=True)
    [result] = response.topics
    assert result.error_code == ErrorCode.NONE and result.num_partitions == 2
    assert broker.metadata.topics() == {}


# --- DeleteTopics ---------------------------------------------------------------------------


async def delete(broker: Any, version: int, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    request = roundtrip(request, version)
    response = await handle_delete_topics(broker, header(DELETE_TOPICS, version), request, version)
    return roundtrip(response, version)


@pytest.mark.parametrize("version", range(0, 6))
async def test_delete_topics_by_name(broker: Any, version: int) -> None:
    await create(broker, 7, topic("t"))
    response = await delete(broker, version, DeleteTopicsRequest(topic_names=["t", "u"]))
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("t", ErrorCode.NONE),
        ("u", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert broker.metadata.topic("t") is None
    if version >= 5:
        assert response.responses[1].error_message


async def test_delete_topics_v6_by_name_and_id(broker: Any) -> None:
    await create(broker, 7, topic("a"), topic("b"))
    a, b = broker.metadata.topic("a"), broker.metadata.topic("b")
    unknown = uuid.uuid4()
    response = await delete(
        broker,
        6,
        DeleteTopicsRequest(
            topics=[
                DeleteTopicState(name="a"),
                DeleteTopicState(topic_id=b.topic_id),
                DeleteTopicState(topic_id=unknown),
                DeleteTopicState(name="zz"),
                DeleteTopicState(name="a", topic_id=a.topic_id),
            ]
        ),
    )
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
        ("a", ZERO_UUID, ErrorCode.INVALID_REQUEST),  # named twice
        ("b", b.topic_id, ErrorCode.NONE),
        (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID),
        ("zz", ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("a", a.topic_id, ErrorCode.INVALID_REQUEST),
    ]
    assert set(broker.metadata.topics()) == {"a"}
    response = await delete(
        broker, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="a", topic_id=a.topic_id)])
    )
    assert response.responses[0].error_code == ErrorCode.INVALID_REQUEST
    response = await delete(broker, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="a")]))
    assert response.responses[0].error_code == ErrorCode.NONE


async def test_duplicate_ids_in_delete(broker: Any) -> None:
    await create(broker, 7, topic("a"))
    a = broker.metadata.topic("a")
    request = DeleteTopicsRequest(topics=[DeleteTopicState(topic_id=a.topic_id)] * 2)
    response = await delete(broker, 6, request)
    assert [r.error_code for r in response.responses] == [ErrorCode.INVALID_REQUEST] * 2
    assert broker.metadata.topic("a") is not None


@pytest.mark.parametrize(
    ("version", "code"), [(2, ErrorCode.INVALID_REQUEST), (3, ErrorCode.TOPIC_DELETION_DISABLED)]
)
async def test_delete_disabled(tmp_path: Path, version: int, code: ErrorCode) -> None:
    broker = await make_broker(tmp_path, **{"delete.topic.enable": "false"})
    await create(broker, 7, topic("t"))
    response = await delete(broker, version, DeleteTopicsRequest(topic_names=["t"]))
    assert response.responses[0].error_code == code
    assert broker.metadata.topic("t") is not None


# --- CreatePartitions -----------------------------------------------------------------------


async def grow(
    broker: Any, version: int, *topics: CreatePartitionsTopic, validate_only: bool = False
) -> CreatePartitionsResponse:
    request = roundtrip(
        CreatePartitionsRequest(topics=list(topics), validate_only=validate_only), version
    )
    response = await handle_create_partitions(
        broker, header(CREATE_PARTITIONS, version), request, version
    )
    return roundtrip(response, version)


@pytest.mark.parametrize("version", range(0, 4))
async def test_create_partitions_every_version(broker: Any, version: int) -> None:
    await create(broker, 7, topic("t", 1))
    response = await grow(
        broker,
        version,
        CreatePartitionsTopic(name="t", count=3, assignments=None),
        CreatePartitionsTopic(name="u", count=3, assignments=None),
    )
    assert [(r.name, r.error_code) for r in response.results] == [
        ("t", ErrorCode.NONE),
        ("u", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert response.results[0].error_message is None
    assert response.results[1].error_message
    assert len(broker.metadata.topic("t").partitions) == 3


@pytest.mark.parametrize(
    ("count", "assignments", "code"),
    [
        (2, None, ErrorCode.INVALID_PARTITIONS),
        (1, None, ErrorCode.INVALID_PARTITIONS),
        (4, [CreatePartitionsAssignment(broker_ids=[1])], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (3, [CreatePartitionsAssignment(broker_ids=[5])], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ],
)
async def test_create_partitions_errors(
    broker: Any,
    count: int,
    assignments: list[CreatePartitionsAssignment] | None,
    code: ErrorCode,
) -> None:
    await create(broker, 7, topic("t", 2))
    response = await grow(
        broker, 3, CreatePartitionsTopic(name="t", count=count, assignments=assignments)
    )
    assert response.results[0].error_code == code
    assert response.results[0].error_message
    assert len(broker.metadata.topic("t").partitions) == 2


async def test_create_partitions_with_assignment_and_validate_only(broker: Any) -> None:
    await create(broker, 7, topic("t", 1))
    wanted = CreatePartitionsTopic(
        name="t", count=2, assignments=[CreatePartitionsAssignment(broker_ids=[1])]
    )
    response = await grow(broker, 1, wanted, validate_only=True)
    assert response.results[0].error_code == ErrorCode.NONE
    assert len(broker.metadata.topic("t").partitions) == 1
    response = await grow(broker, 1, wanted)
    assert len(broker.metadata.topic("t").partitions) == 2


async def test_create_partitions_duplicate_topic(broker: Any) -> None:
    await create(broker, 7, topic("t", 1))
    response = await grow(
        broker,
        2,
        CreatePartitionsTopic(name="t", count=2, assignments=None),
        CreatePartitionsTopic(name="t", count=3, assignments=None),
    )
    assert [(r.name, r.error_code) for r in response.results] == [("t", ErrorCode.INVALID_REQUEST)]
    assert len(broker.metadata.topic("t").partitions) == 1


async def test_controller_mutation_rate_refuses_topics_past_the_quota(broker: Any) -> None:
    """KIP-599: strict for CreateTopics v6+ (THROTTLING_QUOTA_EXCEEDED once over the quota,
    with the throttle time), permissive before (served, then throttled)."""
    from kbroker.quotas import entity

    await broker.metadata.alter_client_quotas(
        [(entity(client_id=None), {"controller_mutation_rate": 1.0})]
    )
    # The header's client id is None: the default client id's quota applies. 10 partitions
    # at 1 per second (over at least 10 s) is at the quota; 11 is over.
    first = await create(broker, 7, topic("m1", partitions=11))
    assert first.topics[0].error_code == ErrorCode.NONE
    assert first.throttle_time_ms > 0
    second = await create(broker, 7, topic("m2"), topic("m3"))
    assert [t.error_code for t in second.topics] == [ErrorCode.THROTTLING_QUOTA_EXCEEDED] * 2
    assert second.throttle_time_ms > 0
    old = await create(broker, 5, topic("m4"))
    assert old.topics[0].error_code == ErrorCode.NONE and old.throttle_time_ms > 0
