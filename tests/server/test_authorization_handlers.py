"""Handlers ask the authorizer what Kafka's ask it, and answer Kafka's errors (issue 12,
item 4). The client is User:ANONYMOUS (a PLAINTEXT connection); ACLs name it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_data_path import fetch, fetch_request, produce, records
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.describe_cluster_request import DescribeClusterRequest
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.records.record import build_batch

Op = AclOperation
DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def allow(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(
        resource_type, name, pattern, "User:ANONYMOUS", "*", operation, PermissionType.ALLOW
    )


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[tuple[Broker, RawClient]]:
    broker = Broker(
        broker_config(
            tmp_path / "data",
            free_port(),
            authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        )
    )
    await broker.start()
    for name in ("a", "b"):
        await broker.metadata.create_topic(name, 1, 1)
    client = await RawClient.connect(broker.port)
    try:
        yield broker, client
    finally:
        await client.close()
        await broker.stop()


async def _metadata(
    client: RawClient, names: list[str] | None, version: int = 12, **flags: bool
) -> dict[str, tuple[int, int]]:
    """Topic -> (error, authorized operations)."""
    request = MetadataRequest(
        topics=None if names is None else [MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=True,
        **flags,
    )
    response = await client.call(ApiKey.METADATA, version, request)
    return {t.name: (t.error_code, t.topic_authorized_operations) for t in response.topics}


async def test_metadata_shows_describable_topics_only(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "a", Op.READ)], [])
    not_requested = -(2**31)
    assert await _metadata(client, None) == {"a": (0, not_requested)}
    assert await _metadata(client, ["a", "b", "c"]) == {
        "a": (0, not_requested),
        "b": (DENIED, not_requested),
        "c": (DENIED, not_requested),
    }
    # Auto-creation needs CREATE on the cluster or the topic, besides DESCRIBE.
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "c", Op.DESCRIBE)], [])
    assert (await _metadata(client, ["c"]))["c"][0] == DENIED
    assert broker.metadata.topic("c") is None
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "c", Op.CREATE)], [])
    assert (await _metadata(client, ["c"]))["c"][0] == ErrorCode.NONE
    assert broker.metadata.topic("c") is not None

    with_ops = await _metadata(client, ["a"], include_topic_authorized_operations=True)
    assert with_ops == {"a": (0, (1 << Op.READ) | (1 << Op.DESCRIBE))}


async def test_cluster_authorized_operations(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    request = MetadataRequest(topics=[], include_cluster_authorized_operations=True)
    assert (await client.call(ApiKey.METADATA, 8, request)).cluster_authorized_operations == 0
    await broker.metadata.alter_acls([allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.ALTER)], [])
    expected = (1 << Op.ALTER) | (1 << Op.DESCRIBE)
    response = await client.call(ApiKey.METADATA, 8, request)
    assert response.cluster_authorized_operations == expected
    describe = DescribeClusterRequest(include_cluster_authorized_operations=True)
    response = await client.call(ApiKey.DESCRIBE_CLUSTER, 0, describe)
    assert response.cluster_authorized_operations == expected


async def test_produce_fetch_and_list_offsets_need_their_operations(
    secured: tuple[Broker, RawClient],
) -> None:
    broker, client = secured
    batch = build_batch(records(0, 3))
    # No ACL: nothing is allowed (allow.everyone.if.no.acl.found is false).
    response = await produce(client, "a", batch)
    assert response.responses[0].partition_responses[0].error_code == DENIED
    await broker.metadata.alter_acls(
        [allow(ResourceType.TOPIC, "a", Op.WRITE), allow(ResourceType.TOPIC, "b", Op.READ)], []
    )
    response = await produce(client, "a", batch)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert (await produce(client, "b", batch)).responses[0].partition_responses[0].error_code == (
        DENIED
    )
    transactional = ProduceRequest(
        transactional_id="tx",
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name="a", partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    response = await client.call(ApiKey.PRODUCE, 9, transactional)
    assert response.responses[0].partition_responses[0].error_code == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )

    # WRITE does not allow reading; READ on b does.
    fetched = await fetch(client, broker, "a", 0)
    assert fetched.responses[0].partitions[0].error_code == DENIED
    assert fetched.responses[0].partitions[0].records == b""
    fetched = await fetch(client, broker, "a", 0, version=13)
    assert fetched.responses[0].partitions[0].error_code == DENIED
    assert (await fetch(client, broker, "b", 0)).responses[0].partitions[0].error_code == 0

    # ListOffsets needs DESCRIBE, which WRITE and READ both imply.
    await broker.metadata.create_topic("c", 1, 1)
    for topic, expected in (("a", ErrorCode.NONE), ("b", ErrorCode.NONE), ("c", DENIED)):
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsTopic(
                    name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)]
                )
            ],
        )
        response = await client.call(ApiKey.LIST_OFFSETS, 5, request)
        assert response.topics[0].partitions[0].error_code == expected, topic


async def test_follower_fetch_needs_cluster_action(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "a", Op.READ)], [])
    request = fetch_request(broker, "a", 0)
    request.replica_id = 2
    response = await client.call(ApiKey.FETCH, 12, request)
    assert response.responses[0].partitions[0].error_code == DENIED
    await broker.metadata.alter_acls(
        [allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)], []
    )
    response = await client.call(ApiKey.FETCH, 12, request)
    assert response.responses[0].partitions[0].error_code != DENIED
