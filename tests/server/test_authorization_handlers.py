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
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.describe_cluster_request import DescribeClusterRequest
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic

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
