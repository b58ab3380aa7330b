"""Client telemetry handlers (KIP-714): CLIENT_METRICS config resources in DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs, ListConfigResources v0-1, GetTelemetrySubscriptions
and PushTelemetry, each request and response through the wire at its version; the answers
are Kafka 4.3's (../shared/kafka-4.3, asked the same)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from controller.embedded import EmbeddedMetadata
from kbroker.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from kbroker.handlers.telemetry import (
    handle_get_telemetry_subscriptions,
    handle_list_config_resources,
    handle_push_telemetry,
)
from kbroker.telemetry.service import ClientTelemetry
from tests.handlers_admin.conftest import header, make_broker, roundtrip
from wire.errors import ErrorCode
from wire.messages import alter_configs_request as ac
from wire.messages import incremental_alter_configs_request as iac
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.get_telemetry_subscriptions_request import GetTelemetrySubscriptionsRequest
from wire.messages.list_config_resources_request import ListConfigResourcesRequest
from wire.messages.push_telemetry_request import PushTelemetryRequest
from wire.records.compression import ZSTD, compress

CLIENT_METRICS = 16
SET, DELETE, APPEND = 0, 1, 2


async def telemetry_broker(tmp_path: Path, now: list[int]) -> Any:
    broker = await make_broker(tmp_path)
    broker.telemetry = ClientTelemetry(
        1_048_576, broker.metadata.client_metrics, clock_ms=lambda: now[0]
    )
    return broker


async def incremental(
    broker: Any, name: str, *ops: tuple[str, int, str | None]
) -> tuple[int, str | None]:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=CLIENT_METRICS,
                resource_name=name,
                configs=[
                    iac.AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops
                ],
            )
        ]
    )
    response = await handle_incremental_alter_configs(
        broker, header(44, 1), roundtrip(request, 1), 1
    )
    result = roundtrip(response, 1).responses[0]
    return result.error_code, result.error_message


async def describe(broker: Any, name: str, synonyms: bool = False) -> Any:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None
            )
        ],
        include_synonyms=synonyms,
    )
    response = await handle_describe_configs(broker, header(32, 4), roundtrip(request, 4), 4)
    return roundtrip(response, 4).results[0]


async def list_resources(
    broker: Any, version: int, *types: int
) -> tuple[int, list[tuple[str, int]]]:
    request = ListConfigResourcesRequest(resource_types=list(types))
    response = await handle_list_config_resources(
        broker, header(74, version), roundtrip(request, version), version
    )
    response = roundtrip(response, version)
    return response.error_code, [
        (r.resource_name, r.resource_type) for r in response.config_resources
    ]


async def test_subscriptions_are_altered_described_listed_and_deleted(tmp_path: Path) -> None:
    broker = await telemetry_broker(tmp_path, [0])
    assert await incremental(
        broker, "prod", ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000")
    ) == (0, None)
    result = await describe(broker, "prod", synonyms=True)
    configs = {
        c.name: (c.value, c.config_source, [s.source for s in c.synonyms]) for c in result.configs
    }
    assert configs == {
        "interval.ms": ("1000", 7, [7]),
        "match": ("", 5, []),
        "metrics": ("org.apache.kafka.producer.", 7, [7]),
    }
    # A name never set describes with the defaults; the empty name is refused.
    assert [c.value for c in (await describe(broker, "nosuch")).configs] == ["300000", "", ""]
    empty = await describe(broker, "")
    assert (empty.error_code, empty.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Client metrics subscription name must not be empty",
    )
    assert await list_resources(broker, 0) == (0, [("prod", CLIENT_METRICS)])
    # Deleting every config deletes the subscription.
    await incremental(broker, "prod", ("metrics", DELETE, None), ("interval.ms", DELETE, None))
    assert await list_resources(broker, 0) == (0, [])


async def test_alter_errors_are_kafkas(tmp_path: Path) -> None:
    broker = await telemetry_broker(tmp_path, [0])
    assert await incremental(broker, "s", ("metrics", APPEND, "x.")) == (
        ErrorCode.INVALID_CONFIG,
        "Can't APPEND to key metrics because its type is not LIST.",
    )
    assert await incremental(broker, "s", ("foo", SET, "1")) == (
        ErrorCode.INVALID_REQUEST,
        "Unknown client metrics configuration: foo",
    )
    assert await incremental(broker, "", ("interval.ms", SET, "1000")) == (
        ErrorCode.INVALID_REQUEST,
        "Subscription name can't be empty",
    )
    assert (await incremental(broker, "s", ("match", SET, "client_id=[")))[0] == (
        ErrorCode.INVALID_CONFIG
    )
    assert broker.metadata.client_metrics() == {}


async def test_alter_configs_replaces_a_subscription_and_validate_only_changes_nothing(
    tmp_path: Path,
) -> None:
    broker = await telemetry_broker(tmp_path, [0])

    async def alter(name: str, validate_only: bool = False, **configs: str) -> int:
        request = ac.AlterConfigsRequest(
            resources=[
                ac.AlterConfigsResource(
                    resource_type=CLIENT_METRICS,
                    resource_name=name,
                    configs=[
                        ac.AlterableConfig(name=k.replace("_", "."), value=v)
                        for k, v in configs.items()
                    ],
                )
            ],
            validate_only=validate_only,
        )
        response = await handle_alter_configs(broker, header(33, 2), roundtrip(request, 2), 2)
        return roundtrip(response, 2).responses[0].error_code

    assert await alter("legacy", interval_ms="2000") == 0
    assert broker.metadata.client_metrics() == {"legacy": {"interval.ms": "2000"}}
    assert await alter("legacy") == 0  # no config: gone
    assert broker.metadata.client_metrics() == {}
    assert await alter("v", validate_only=True, interval_ms="2000") == 0
    assert await incremental(broker, "v", ("metrics", SET, "*")) == (0, None)
    assert broker.metadata.client_metrics() == {"v": {"metrics": "*"}}


async def test_list_config_resources_v1_lists_the_types_asked_for(tmp_path: Path) -> None:
    broker = await telemetry_broker(tmp_path, [0])
    await broker.metadata.create_topic("t1", 1, 1)
    await incremental(broker, "prod", ("metrics", SET, "*"))
    assert await list_resources(broker, 1) == (
        0,
        [("prod", CLIENT_METRICS), ("1", 8), ("1", 4), ("t1", 2)],
    )
    assert await list_resources(broker, 1, 2, 32, 4, 4) == (0, [("1", 4), ("t1", 2)])
    assert await list_resources(broker, 1, 1) == (ErrorCode.UNSUPPORTED_VERSION, [])


async def test_subscriptions_survive_a_restart(tmp_path: Path) -> None:
    broker = await telemetry_broker(tmp_path, [0])
    await incremental(broker, "a/b c*", ("metrics", SET, "org."), ("match", SET, "client_id=x"))
    again = EmbeddedMetadata(broker.config)
    await again.start()
    assert again.client_metrics() == {"a/b c*": {"metrics": "org.", "match": "client_id=x"}}


async def test_a_client_fetches_its_subscription_and_pushes(tmp_path: Path) -> None:
    now = [0]
    broker = await telemetry_broker(tmp_path, now)
    await incremental(
        broker, "prod", ("metrics", SET, "org.apache.kafka."), ("interval.ms", SET, "1000")
    )
    request = roundtrip(GetTelemetrySubscriptionsRequest(), 0)
    answer = roundtrip(
        await handle_get_telemetry_subscriptions(broker, header(71, 0), request, 0), 0
    )
    assert answer.error_code == 0 and answer.client_instance_id != uuid.UUID(int=0)
    assert answer.accepted_compression_types == [4, 3, 1, 2]
    assert (answer.push_interval_ms, answer.telemetry_max_bytes) == (1000, 1_048_576)
    assert answer.requested_metrics == ["org.apache.kafka."]
    assert answer.delta_temporality is False

    async def push(terminating: bool = False, subscription: int | None = None) -> int:
        request = PushTelemetryRequest(
            client_instance_id=answer.client_instance_id,
            subscription_id=answer.subscription_id if subscription is None else subscription,
            terminating=terminating,
            compression_type=ZSTD,
            metrics=compress(ZSTD, b""),
        )
        response = await handle_push_telemetry(broker, header(72, 0), roundtrip(request, 0), 0)
        return roundtrip(response, 0).error_code

    assert await push() == 0
    now[0] = 1000
    assert await push(subscription=answer.subscription_id + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    again = roundtrip(
        await handle_get_telemetry_subscriptions(
            broker,
            header(71, 0),
            GetTelemetrySubscriptionsRequest(client_instance_id=answer.client_instance_id),
            0,
        ),
        0,
    )
    assert again.error_code == 0 and again.subscription_id == answer.subscription_id
    assert await push(terminating=True) == 0
    assert await push() == ErrorCode.INVALID_REQUEST
