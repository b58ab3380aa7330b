"""A mirror link's record (kbroker/mirror/link_configs.py): which source topics a regex link
mirrors, what its topics carry, and the record through DescribeConfigs,
IncrementalAlterConfigs and ListConfigResources on kbroker's resource type, persisted by the
embedded metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.embedded import EmbeddedMetadata
from kbroker.handlers.configs import handle_describe_configs, handle_incremental_alter_configs
from kbroker.handlers.telemetry import handle_list_config_resources
from kbroker.mirror.link_configs import (
    MIRROR_LINK_RESOURCE,
    mirror_topic_configs,
    topics_to_create,
    validate_link_configs,
)
from tests.handlers_admin.conftest import header, make_broker, roundtrip
from wire.errors import ErrorCode, KafkaError
from wire.messages import incremental_alter_configs_request as iac
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.list_config_resources_request import ListConfigResourcesRequest

SET, DELETE = 0, 1
BOOTSTRAP = "kbroker.mirror.source.bootstrap"
REGEX = "kbroker.mirror.topic.regex"
JAAS = "kbroker.mirror.source.config.sasl.jaas.config"


def test_a_regex_link_creates_the_matching_topics_the_cluster_lacks() -> None:
    configs = {BOOTSTRAP: "src:9092", REGEX: "orders-.*"}
    source = {"orders-eu": 3, "orders-us": 1, "orders": 1, "payments": 2, "orders-new": 0}
    assert topics_to_create(configs, source, {"orders-eu"}) == {"orders-us": 1}
    # Only the topics named at creation: nothing follows.
    assert topics_to_create({BOOTSTRAP: "src:9092"}, source, set()) == {}


def test_the_topics_a_link_creates_carry_its_source() -> None:
    configs = {
        BOOTSTRAP: "src:9092",
        REGEX: "o.*",
        "kbroker.mirror.replication.factor": "3",
        "kbroker.mirror.group.filter": "billing",
        "kbroker.mirror.source.config.security.protocol": "SASL_PLAINTEXT",
    }
    assert mirror_topic_configs("eu", configs, "orders") == {
        BOOTSTRAP: "src:9092",
        "kbroker.mirror.group.filter": "billing",
        "kbroker.mirror.source.config.security.protocol": "SASL_PLAINTEXT",
        "kbroker.mirror.link": "eu",
        "kbroker.mirror.source.topic": "orders",
        "kbroker.mirror.state": "active",
    }


@pytest.mark.parametrize(
    "configs",
    [
        {REGEX: "o.*"},
        {BOOTSTRAP: "src:9092", REGEX: "("},
        {BOOTSTRAP: "src:9092", "kbroker.mirror.replication.factor": "0"},
        {BOOTSTRAP: "src:9092", "kbroker.mirror.state": "active"},
        {BOOTSTRAP: "nowhere"},
    ],
)
def test_bad_link_configs_are_refused(configs: dict[str, str]) -> None:
    with pytest.raises(KafkaError) as refused:
        validate_link_configs(configs)
    assert refused.value.code == ErrorCode.INVALID_CONFIG


async def alter(broker: Any, name: str, *ops: tuple[str, int, str | None]) -> int:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=MIRROR_LINK_RESOURCE,
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
    return int(roundtrip(response, 1).responses[0].error_code)


async def listed(broker: Any) -> list[str]:
    request = ListConfigResourcesRequest(resource_types=[MIRROR_LINK_RESOURCE])
    response = await handle_list_config_resources(broker, header(74, 1), roundtrip(request, 1), 1)
    return [r.resource_name for r in roundtrip(response, 1).config_resources]


async def test_a_link_record_is_listed_described_and_survives_a_restart(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path, **{"password.encoder.secret": "cluster-secret"})
    code = await alter(
        broker,
        "eu",
        (BOOTSTRAP, SET, "src:9092"),
        (REGEX, SET, "orders-.*"),
        (JAAS, SET, "org.apache.kafka.common.security.plain.PlainLoginModule required;"),
    )
    assert code == ErrorCode.NONE
    assert await listed(broker) == ["eu"]
    # A request for every type stays Kafka's answer: no link in it.
    every = await handle_list_config_resources(
        broker, header(74, 1), roundtrip(ListConfigResourcesRequest(resource_types=[]), 1), 1
    )
    assert MIRROR_LINK_RESOURCE not in {r.resource_type for r in every.config_resources}
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=MIRROR_LINK_RESOURCE, resource_name="eu", configuration_keys=None
            )
        ]
    )
    response = await handle_describe_configs(broker, header(32, 4), roundtrip(request, 4), 4)
    described = {c.name: (c.value, c.is_sensitive) for c in response.results[0].configs}
    assert described == {
        BOOTSTRAP: ("src:9092", False),
        REGEX: ("orders-.*", False),
        JAAS: (None, True),
    }
    assert await alter(broker, "eu", ("kbroker.mirror.bogus", SET, "1")) == (
        ErrorCode.INVALID_CONFIG
    )
    again = EmbeddedMetadata(broker.config)
    await again.start()
    assert again.mirror_links()["eu"][REGEX] == "orders-.*"
    # Deleting every config removes the link.
    assert (
        await alter(
            broker, "eu", (BOOTSTRAP, DELETE, None), (REGEX, DELETE, None), (JAAS, DELETE, None)
        )
        == 0
    )
    assert await listed(broker) == []
