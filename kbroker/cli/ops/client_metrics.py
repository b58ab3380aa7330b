"""Client-metrics subscriptions over the protocol (KIP-714), for ``kbroker client-metrics``:
ListConfigResources (v1 asking for CLIENT_METRICS, or v0, KIP-714's
ListClientMetricsResources), DescribeConfigs and IncrementalAlterConfigs of ConfigResource
type CLIENT_METRICS, as Kafka's ``kafka-client-metrics.sh`` sends them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kbroker.cli.ops.admin import OP_DELETE, OP_SET, OpsError, _check, _controller
from kbroker.client import KafkaClient
from wire.api_keys import ApiKey
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from wire.messages.list_config_resources_request import ListConfigResourcesRequest

RESOURCE_CLIENT_METRICS = 16
CONFIGS = ("metrics", "interval.ms", "match")


async def list_subscriptions(client: KafkaClient) -> list[str]:
    connection = await client.any_connection()
    version = connection.version(ApiKey.LIST_CONFIG_RESOURCES)
    request = ListConfigResourcesRequest(
        resource_types=[RESOURCE_CLIENT_METRICS] if version >= 1 else []
    )
    response = await connection.call(ApiKey.LIST_CONFIG_RESOURCES, version, request)
    _check(response.error_code, None, "client metrics resources")
    return sorted(r.resource_name for r in response.config_resources)


async def describe_subscriptions(
    client: KafkaClient, names: Sequence[str]
) -> dict[str, dict[str, str]]:
    """The configs of each subscription (every config, defaults included)."""
    if not names:
        return {}
    connection = await client.any_connection()
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=RESOURCE_CLIENT_METRICS, resource_name=n, configuration_keys=None
            )
            for n in names
        ]
    )
    response, _ = await connection.request(ApiKey.DESCRIBE_CONFIGS, request)
    found: dict[str, dict[str, str]] = {}
    for result in response.results:
        _check(result.error_code, result.error_message, f"client metrics {result.resource_name!r}")
        found[result.resource_name] = {c.name: c.value or "" for c in result.configs}
    return found


async def alter_subscription(client: KafkaClient, name: str, changes: Mapping[str, str]) -> None:
    """Set each config to its value; an empty value deletes it (back to its default)."""
    if not changes:
        raise OpsError("nothing to alter: give --metrics, --interval or --match")
    configs = [
        AlterableConfig(name=k, config_operation=OP_SET, value=v)
        if v
        else AlterableConfig(name=k, config_operation=OP_DELETE, value=None)
        for k, v in changes.items()
    ]
    await _incremental(client, name, configs)


async def delete_subscription(client: KafkaClient, name: str) -> None:
    configs = [AlterableConfig(name=k, config_operation=OP_DELETE, value=None) for k in CONFIGS]
    await _incremental(client, name, configs)


async def _incremental(client: KafkaClient, name: str, configs: list[AlterableConfig]) -> None:
    connection = await _controller(client)
    request = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=RESOURCE_CLIENT_METRICS, resource_name=name, configs=configs
            )
        ]
    )
    response, _ = await connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
    result = response.responses[0]
    _check(result.error_code, result.error_message, f"client metrics {name!r}")
