"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs handlers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kbroker.config_defs import BROKER_DEFS, TOPIC_DEFS, ConfigSource, ConfigType
from kbroker.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from tests.handlers_admin.conftest import header, make_broker, roundtrip
from wire.errors import ErrorCode
from wire.messages import alter_configs_request as ac
from wire.messages import incremental_alter_configs_request as iac
from wire.messages.alter_configs_response import AlterConfigsResponse
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.describe_configs_response import DescribeConfigsResponse
from wire.messages.incremental_alter_configs_response import IncrementalAlterConfigsResponse

DESCRIBE, ALTER, INCREMENTAL = 32, 33, 44
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def describe(
    broker: Any, version: int, *resources: DescribeConfigsResource, synonyms: bool = False
) -> DescribeConfigsResponse:
    request = DescribeConfigsRequest(resources=list(resources))
    if version >= 1:
        request.include_synonyms = synonyms
    if version >= 3:
        request.include_documentation = True
    request = roundtrip(request, version)
    response = await handle_describe_configs(broker, header(DESCRIBE, version), request, version)
    return roundtrip(response, version)


def resource(kind: int, name: str, keys: list[str] | None = None) -> DescribeConfigsResource:
    return DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=keys)


async def alter(
    broker: Any, version: int, *resources: ac.AlterConfigsResource, validate_only: bool = False
) -> AlterConfigsResponse:
    request = roundtrip(
        ac.AlterConfigsRequest(resources=list(resources), validate_only=validate_only), version
    )
    response = await handle_alter_configs(broker, header(ALTER, version), request, version)
    return roundtrip(response, version)


def alter_resource(kind: int, name: str, **configs: str | None) -> ac.AlterConfigsResource:
    return ac.AlterConfigsResource(
        resource_type=kind,
        resource_name=name,
        configs=[ac.AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()],
    )


async def incremental(
    broker: Any, version: int, *resources: iac.AlterConfigsResource, validate_only: bool = False
) -> IncrementalAlterConfigsResponse:
    request = roundtrip(
        iac.IncrementalAlterConfigsRequest(resources=list(resources), validate_only=validate_only),
        version,
    )
    response = await handle_incremental_alter_configs(
        broker, header(INCREMENTAL, version), request, version
    )
    return roundtrip(response, version)


def ops(kind: int, name: str, *changes: tuple[str, int, str | None]) -> iac.AlterConfigsResource:
    return iac.AlterConfigsResource(
        resource_type=kind,
        resource_name=name,
        configs=[iac.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in changes],
    )


@pytest.fixture
async def with_topic(broker: Any) -> Any:
    await broker.metadata.create_topic("t", 1, 1, configs={"retention.ms": "1000"})
    return broker


# --- DescribeConfigs ------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 5))
async def test_describe_topic_every_version(with_topic: Any, version: int) -> None:
    response = await describe(with_topic, version, resource(TOPIC, "t"), synonyms=True)
    [result] = response.results
    assert (result.error_code, result.resource_type, result.resource_name) == (0, TOPIC, "t")
    configs = {c.name: c for c in result.configs}
    assert set(configs) == set(TOPIC_DEFS)
    retention, segment = configs["retention.ms"], configs["segment.bytes"]
    assert retention.value == "1000" and segment.value == "1073741824"
    assert not retention.read_only and not retention.is_sensitive
    if version == 0:
        assert (retention.is_default, segment.is_default) == (False, True)
        assert retention.synonyms == []
    else:
        assert retention.config_source == ConfigSource.TOPIC_CONFIG
        assert segment.config_source == ConfigSource.DEFAULT_CONFIG
        assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
            ("retention.ms", "1000", ConfigSource.TOPIC_CONFIG),
            ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
        ]
    if version >= 3:
        assert retention.config_type == ConfigType.LONG
        assert configs["cleanup.policy"].config_type == ConfigType.LIST
        assert retention.documentation is None


async def test_describe_without_synonyms_and_with_key_filter(with_topic: Any) -> None:
    response = await describe(with_topic, 4, resource(TOPIC, "t", ["retention.ms", "no.such.key"]))
    [config] = response.results[0].configs
    assert config.name == "retention.ms" and config.synonyms == []
    # An empty key list asks for every config, as Kafka 4.3 answers it.
    response = await describe(with_topic, 4, resource(TOPIC, "t", []))
    everything = await describe(with_topic, 4, resource(TOPIC, "t"))
    assert response.results[0].configs == everything.results[0].configs != []


@pytest.mark.parametrize(
    ("res", "code"),
    [
        (resource(TOPIC, "missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (resource(TOPIC, "bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (resource(BROKER, "2"), ErrorCode.INVALID_REQUEST),
        (resource(BROKER, "one"), ErrorCode.INVALID_REQUEST),
        (resource(8, "1"), ErrorCode.INVALID_REQUEST),
    ],
)
@pytest.mark.parametrize("version", [0, 4])
async def test_describe_errors(
    broker: Any, res: DescribeConfigsResource, code: ErrorCode, version: int
) -> None:
    response = await describe(broker, version, res)
    [result] = response.results
    assert result.error_code == code and result.error_message and result.configs == []


@pytest.mark.parametrize("version", [0, 1, 4])
async def test_describe_broker(tmp_path: Path, version: int) -> None:
    broker = await make_broker(tmp_path, **{"num.partitions": "3"})
    await broker.metadata.set_broker_configs({"log.retention.ms": "99"})
    response = await describe(
        broker, version, resource(BROKER, "1"), resource(BROKER, ""), synonyms=True
    )
    own, defaults = response.results
    configs = {c.name: c for c in own.configs}
    assert set(configs) == set(BROKER_DEFS)
    assert configs["num.partitions"].value == "3" and configs["num.partitions"].read_only
    assert configs["log.retention.ms"].value == "99"
    assert not configs["log.retention.ms"].read_only
    if version >= 1:
        assert configs["num.partitions"].config_source == ConfigSource.STATIC_BROKER_CONFIG
        assert configs["log.retention.ms"].config_source == ConfigSource.DYNAMIC_BROKER_CONFIG
        assert configs["log.retention.ms"].synonyms[0].source == (
            ConfigSource.DYNAMIC_BROKER_CONFIG
        )
    assert (defaults.error_code, defaults.configs) == (0, [])


# --- AlterConfigs ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 3))
async def test_alter_topic_replaces_overrides(with_topic: Any, version: int) -> None:
    response = await alter(with_topic, version, alter_resource(TOPIC, "t", segment_bytes="2048"))
    [result] = response.responses
    assert (result.error_code, result.resource_type, result.resource_name) == (0, TOPIC, "t")
    assert result.error_message is None
    assert with_topic.metadata.topic("t").configs == {"segment.bytes": "2048"}


async def test_alter_validate_only(with_topic: Any) -> None:
    response = await alter(
        with_topic, 1, alter_resource(TOPIC, "t", segment_bytes="2048"), validate_only=True
    )
    assert response.responses[0].error_code == 0
    assert with_topic.metadata.topic("t").configs == {"retention.ms": "1000"}
    response = await alter(
        with_topic, 1, alter_resource(BROKER, "1", log_retention_ms="5"), validate_only=True
    )
    assert response.responses[0].error_code == 0
    assert with_topic.metadata.broker_configs() == {}


@pytest.mark.parametrize(
    ("res", "code"),
    [
        (alter_resource(TOPIC, "t", segment_bytes="1"), ErrorCode.INVALID_CONFIG),
        (alter_resource(TOPIC, "t", bogus="1"), ErrorCode.INVALID_CONFIG),
        (alter_resource(TOPIC, "t", segment_bytes=None), ErrorCode.INVALID_CONFIG),
        (
            alter_resource(TOPIC, "missing", segment_bytes="2048"),
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (alter_resource(BROKER, "1", broker_id="4"), ErrorCode.INVALID_REQUEST),
        (alter_resource(BROKER, "1", log_segment_bytes="1"), ErrorCode.INVALID_REQUEST),
        (alter_resource(BROKER, "7", log_retention_ms="1"), ErrorCode.INVALID_REQUEST),
        (alter_resource(BROKER, "", ssl_client_auth="required"), ErrorCode.INVALID_REQUEST),
        (alter_resource(8, "1", x="1"), ErrorCode.INVALID_REQUEST),
        (
            ac.AlterConfigsResource(
                resource_type=TOPIC,
                resource_name="t",
                configs=[
                    ac.AlterableConfig(name="segment.bytes", value="2048"),
                    ac.AlterableConfig(name="segment.bytes", value="4096"),
                ],
            ),
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
async def test_alter_errors(with_topic: Any, res: ac.AlterConfigsResource, code: ErrorCode) -> None:
    response = await alter(with_topic, 2, res)
    assert response.responses[0].error_code == code
    assert response.responses[0].error_message
    assert with_topic.metadata.topic("t").configs == {"retention.ms": "1000"}
    assert with_topic.metadata.broker_configs() == {}


async def test_alter_broker_and_duplicate_resources(with_topic: Any) -> None:
    response = await alter(with_topic, 0, alter_resource(BROKER, "1", message_max_bytes="5000"))
    assert response.responses[0].error_code == 0
    assert with_topic.metadata.broker_configs() == {"message.max.bytes": "5000"}
    response = await alter(
        with_topic,
        0,
        alter_resource(TOPIC, "t", segment_bytes="2048"),
        alter_resource(TOPIC, "t", segment_bytes="4096"),
    )
    assert [r.error_code for r in response.responses] == [ErrorCode.INVALID_REQUEST] * 2
    assert with_topic.metadata.topic("t").configs == {"retention.ms": "1000"}


# --- IncrementalAlterConfigs ----------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
async def test_incremental_set_and_delete(with_topic: Any, version: int) -> None:
    response = await incremental(
        with_topic,
        version,
        ops(TOPIC, "t", ("segment.bytes", SET, "2048"), ("retention.ms", DELETE, None)),
    )
    [result] = response.responses
    assert (result.error_code, result.resource_name, result.error_message) == (0, "t", None)
    assert with_topic.metadata.topic("t").configs == {"segment.bytes": "2048"}


async def test_incremental_append_and_subtract(with_topic: Any) -> None:
    await incremental(with_topic, 1, ops(TOPIC, "t", ("cleanup.policy", APPEND, "compact")))
    # Appended to the value in effect (the broker default "delete").
    assert with_topic.metadata.topic("t").configs["cleanup.policy"] == "delete,compact"
    await incremental(with_topic, 1, ops(TOPIC, "t", ("cleanup.policy", APPEND, "compact")))
    assert with_topic.metadata.topic("t").configs["cleanup.policy"] == "delete,compact"
    await incremental(with_topic, 1, ops(TOPIC, "t", ("cleanup.policy", SUBTRACT, "delete")))
    assert with_topic.metadata.topic("t").configs["cleanup.policy"] == "compact"


async def test_incremental_broker(with_topic: Any) -> None:
    response = await incremental(
        with_topic,
        1,
        ops(
            BROKER, "1", ("log.cleanup.policy", APPEND, "compact"), ("log.retention.ms", SET, "10")
        ),
    )
    assert response.responses[0].error_code == 0
    assert with_topic.metadata.broker_configs() == {
        "log.cleanup.policy": "delete,compact",
        "log.retention.ms": "10",
    }
    response = await incremental(
        with_topic, 1, ops(BROKER, "1", ("log.retention.ms", DELETE, None))
    )
    assert response.responses[0].error_code == 0
    assert with_topic.metadata.broker_configs() == {"log.cleanup.policy": "delete,compact"}


async def test_incremental_validate_only(with_topic: Any) -> None:
    response = await incremental(
        with_topic, 1, ops(TOPIC, "t", ("segment.bytes", SET, "2048")), validate_only=True
    )
    assert response.responses[0].error_code == 0
    assert with_topic.metadata.topic("t").configs == {"retention.ms": "1000"}


@pytest.mark.parametrize(
    ("res", "code"),
    [
        (ops(TOPIC, "t", ("retention.ms", APPEND, "5")), ErrorCode.INVALID_CONFIG),
        (ops(TOPIC, "t", ("retention.ms", SUBTRACT, "5")), ErrorCode.INVALID_CONFIG),
        (ops(TOPIC, "t", ("cleanup.policy", APPEND, "shred")), ErrorCode.INVALID_CONFIG),
        (ops(TOPIC, "t", ("retention.ms", SET, "soon")), ErrorCode.INVALID_CONFIG),
        (ops(TOPIC, "t", ("retention.ms", SET, None)), ErrorCode.INVALID_CONFIG),
        (ops(TOPIC, "t", ("nope", SET, "1")), ErrorCode.INVALID_CONFIG),
        (ops(TOPIC, "t", ("retention.ms", 9, "1")), ErrorCode.INVALID_REQUEST),
        (
            ops(TOPIC, "t", ("retention.ms", SET, "1"), ("retention.ms", DELETE, None)),
            ErrorCode.INVALID_REQUEST,
        ),
        (ops(TOPIC, "missing", ("retention.ms", SET, "1")), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (ops(BROKER, "1", ("num.partitions", SET, "2")), ErrorCode.INVALID_REQUEST),
        (ops(BROKER, "1", ("ssl.keystore.location", SET, "/k")), ErrorCode.INVALID_REQUEST),
        (ops(BROKER, "1", ("log.segment.bytes", SET, "1")), ErrorCode.INVALID_REQUEST),
        (ops(BROKER, "1", ("log.segment.bytes", APPEND, "1")), ErrorCode.INVALID_CONFIG),
        (ops(BROKER, "", ("sasl.jaas.config", SET, "x")), ErrorCode.INVALID_REQUEST),
        (ops(BROKER, "0", ("log.segment.bytes", SET, "2048")), ErrorCode.INVALID_REQUEST),
        (ops(16, "x", ("a", SET, "1")), ErrorCode.INVALID_REQUEST),
    ],
)
async def test_incremental_errors(
    with_topic: Any, res: iac.AlterConfigsResource, code: ErrorCode
) -> None:
    response = await incremental(with_topic, 1, res)
    assert response.responses[0].error_code == code
    assert response.responses[0].error_message
    assert with_topic.metadata.topic("t").configs == {"retention.ms": "1000"}
    assert with_topic.metadata.broker_configs() == {}


async def test_incremental_duplicate_resources(with_topic: Any) -> None:
    change = ops(TOPIC, "t", ("segment.bytes", SET, "2048"))
    response = await incremental(with_topic, 0, change, change)
    assert [r.error_code for r in response.responses] == [ErrorCode.INVALID_REQUEST] * 2


# --- dynamic broker configs (KIP-226) -------------------------------------------------------


async def test_librdkafka_0081_broker_config_is_accepted(with_topic: Any) -> None:
    """librdkafka's test 0081 sets this on a broker with AlterConfigs and expects success, as
    Kafka answers: it is one of Kafka's dynamic broker configs."""
    response = await alter(
        with_topic, 1, alter_resource(BROKER, "1", sasl_kerberos_min_time_before_relogin="58000")
    )
    assert response.responses[0].error_code == 0
    assert with_topic.metadata.broker_configs() == {
        "sasl.kerberos.min.time.before.relogin": "58000"
    }
    response = await incremental(
        with_topic,
        1,
        ops(
            BROKER, "1", ("background.threads", SET, "9"), ("log.cleanup.policy", APPEND, "compact")
        ),
    )
    assert response.responses[0].error_code == 0
    assert with_topic.metadata.broker_configs()["log.cleanup.policy"] == "delete,compact"


async def test_cluster_default_broker_configs(with_topic: Any) -> None:
    response = await incremental(
        with_topic,
        1,
        ops(BROKER, "", ("log.cleaner.threads", SET, "2"), ("message.max.bytes", SET, "5000")),
    )
    assert response.responses[0].error_code == 0
    assert with_topic.metadata.default_broker_configs() == {
        "log.cleaner.threads": "2",
        "message.max.bytes": "5000",
    }
    answer = await describe(with_topic, 4, resource(BROKER, ""), synonyms=True)
    assert [(c.name, c.value, c.config_source) for c in answer.results[0].configs] == [
        ("log.cleaner.threads", "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("message.max.bytes", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]
    answer = await describe(
        with_topic, 4, resource(BROKER, "1", ["message.max.bytes"]), synonyms=True
    )
    entry = answer.results[0].configs[0]
    assert (entry.value, entry.config_source) == (
        "5000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    # The topics take the new default.
    answer = await describe(with_topic, 4, resource(TOPIC, "t", ["max.message.bytes"]))
    assert answer.results[0].configs[0].value == "5000"


async def test_a_listener_key_store_that_does_not_load_is_refused(with_topic: Any) -> None:
    response = await incremental(
        with_topic,
        1,
        ops(
            BROKER,
            "1",
            ("listener.security.protocol.map", SET, "PLAINTEXT:SSL"),
            ("listener.name.plaintext.ssl.keystore.type", SET, "PEM"),
            ("listener.name.plaintext.ssl.keystore.location", SET, "/no/such/keystore.pem"),
        ),
    )
    assert response.responses[0].error_code == ErrorCode.INVALID_REQUEST
    assert "TLS settings" in str(response.responses[0].error_message)
    assert with_topic.metadata.broker_configs() == {}
