"""Who may create and change mirror links, with the authorizer on (kbroker/mirror/access.py):
ALTER on the cluster, besides the topic's own CREATE or ALTER_CONFIGS. The client is
User:ANONYMOUS (a PLAINTEXT connection); ACLs name it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.mirror.link_configs import MIRROR_LINK_RESOURCE
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
from wire.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

TOPIC = 2
# Nothing listens there: the fetchers only back off.
LINK = {
    "kbroker.mirror.source.bootstrap": "127.0.0.1:1",
    "kbroker.mirror.link": "eu",
}


def allow(resource_type: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(
        resource_type,
        name,
        PatternType.LITERAL,
        "User:ANONYMOUS",
        "*",
        operation,
        PermissionType.ALLOW,
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
    await broker.metadata.alter_acls(
        [
            allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE),
            allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE_CONFIGS),
            allow(ResourceType.TOPIC, "*", AclOperation.ALTER_CONFIGS),
        ],
        [],
    )
    client = await RawClient.connect(broker.port)
    try:
        yield broker, client
    finally:
        await client.close()
        await broker.stop()


async def create(client: RawClient, name: str, configs: dict[str, str]) -> tuple[int, str]:
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=1,
                replication_factor=1,
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        timeout_ms=30000,
    )
    response = await client.call(ApiKey.CREATE_TOPICS, 7, request)
    result = response.topics[0]
    return result.error_code, result.error_message or ""


async def alter(client: RawClient, resource_type: int, name: str, configs: dict[str, str]) -> int:
    request = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()
                ],
            )
        ]
    )
    response = await client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
    return int(response.responses[0].error_code)


async def describe_link(client: RawClient, name: str) -> int:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=MIRROR_LINK_RESOURCE, resource_name=name, configuration_keys=None
            )
        ]
    )
    response = await client.call(ApiKey.DESCRIBE_CONFIGS, 4, request)
    return int(response.results[0].error_code)


async def test_links_need_alter_on_the_cluster(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # CREATE on the cluster makes ordinary topics, not mirror topics nor links.
    assert (await create(client, "plain", {}))[0] == ErrorCode.NONE
    code, message = await create(client, "mirrored", LINK)
    assert (code, message) == (
        refused,
        "mirror topic mirrored: changing a mirror link needs ALTER on the cluster",
    )
    assert broker.metadata.topic("mirrored") is None
    assert await alter(client, MIRROR_LINK_RESOURCE, "eu", LINK) == refused
    assert broker.metadata.mirror_links() == {}
    # ALTER_CONFIGS on a topic does not make it a mirror either.
    assert await alter(client, TOPIC, "plain", LINK) == refused
    assert await describe_link(client, "eu") == ErrorCode.NONE

    alter_cluster = allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALTER)
    await broker.metadata.alter_acls([alter_cluster], [])
    assert (await create(client, "mirrored", LINK))[0] == ErrorCode.NONE
    link = {"kbroker.mirror.source.bootstrap": "127.0.0.1:1"}
    assert await alter(client, MIRROR_LINK_RESOURCE, "eu", link) == ErrorCode.NONE

    await broker.metadata.alter_acls([], [alter_cluster])
    # Promoting changes the link: refused; the topic's own configs are not the link's.
    assert await alter(client, TOPIC, "mirrored", {"kbroker.mirror.state": "promoted"}) == refused
    assert await alter(client, TOPIC, "mirrored", {"retention.ms": "60000"}) == ErrorCode.NONE
    assert (
        await alter(client, MIRROR_LINK_RESOURCE, "eu", {"kbroker.mirror.topic.regex": "orders-.*"})
        == refused
    )
