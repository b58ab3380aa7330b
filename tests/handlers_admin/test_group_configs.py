"""GROUP config resources (type 32) in DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
and ListConfigResources, each request and response through the wire at its version; the
answers (codes and messages) are Kafka 4.3's, asked the same (../shared/kafka-4.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.embedded import EmbeddedMetadata
from kbroker.config_defs import ConfigSource, ConfigType
from kbroker.group.group_configs import duration_ms
from kbroker.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from kbroker.handlers.telemetry import handle_list_config_resources
from tests.handlers_admin.conftest import header, make_broker, roundtrip
from wire.errors import ErrorCode as E
from wire.messages import alter_configs_request as ac
from wire.messages import incremental_alter_configs_request as iac
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.list_config_resources_request import ListConfigResourcesRequest

GROUP = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def incremental(
    broker: Any, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False
) -> tuple[int, str | None]:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=GROUP,
                resource_name=name,
                configs=[
                    iac.AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops
                ],
            )
        ],
        validate_only=validate_only,
    )
    response = await handle_incremental_alter_configs(
        broker, header(44, 1), roundtrip(request, 1), 1
    )
    result = roundtrip(response, 1).responses[0]
    return result.error_code, result.error_message


async def describe(broker: Any, name: str, keys: list[str] | None = None) -> Any:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=GROUP, resource_name=name, configuration_keys=keys
            )
        ],
        include_synonyms=True,
    )
    response = await handle_describe_configs(broker, header(32, 4), roundtrip(request, 4), 4)
    return roundtrip(response, 4).results[0]


@pytest.mark.parametrize(
    ("op", "answer"),
    [
        (("consumer.heartbeat.interval.ms", SET, "6000"), (0, None)),
        (
            ("consumer.heartbeat.interval.ms", SET, "1000"),
            (
                E.INVALID_CONFIG,
                "consumer.heartbeat.interval.ms must be greater than or equal to "
                "group.consumer.min.heartbeat.interval.ms",
            ),
        ),
        (
            ("consumer.session.timeout.ms", SET, "61000"),
            (
                E.INVALID_CONFIG,
                "consumer.session.timeout.ms must be less than or equal to "
                "group.consumer.max.session.timeout.ms",
            ),
        ),
        (
            ("consumer.heartbeat.interval.ms", APPEND, "7000"),
            (
                E.INVALID_CONFIG,
                "Can't APPEND to key consumer.heartbeat.interval.ms because its type is not LIST.",
            ),
        ),
        (
            ("consumer.heartbeat.interval.ms", SET, None),
            (E.INVALID_REQUEST, "Null value not supported for : consumer.heartbeat.interval.ms"),
        ),
        (("foo.bar", SET, "1"), (E.INVALID_CONFIG, "Unknown group config name: foo.bar")),
        (
            ("share.record.lock.duration.ms", SET, "1"),
            (
                E.INVALID_CONFIG,
                "Invalid value 1 for configuration share.record.lock.duration.ms: Value must be "
                "at least 1000",
            ),
        ),
        (
            ("share.record.lock.duration.ms", SET, "14000"),
            (
                E.INVALID_CONFIG,
                "share.record.lock.duration.ms must be greater than or equal to "
                "group.share.min.record.lock.duration.ms",
            ),
        ),
        (
            ("share.delivery.count.limit", SET, "11"),
            (
                E.INVALID_CONFIG,
                "share.delivery.count.limit must be less than or equal to "
                "group.share.max.delivery.count.limit",
            ),
        ),
        (
            ("consumer.session.timeout.ms", SET, "abc"),
            (
                E.INVALID_CONFIG,
                "Invalid value abc for configuration consumer.session.timeout.ms: Not a number "
                "of type INT",
            ),
        ),
        (
            ("consumer.session.timeout.ms", SET, "99999999999"),
            (
                E.INVALID_CONFIG,
                "Invalid value 99999999999 for configuration consumer.session.timeout.ms: Not "
                "a number of type INT",
            ),
        ),
        (
            ("share.isolation.level", SET, "serializable"),
            (
                E.INVALID_CONFIG,
                "Invalid value serializable for configuration share.isolation.level: String "
                "must be one of: read_committed, read_uncommitted",
            ),
        ),
        (
            ("share.auto.offset.reset", SET, "by_duration:-PT1H"),
            (
                E.INVALID_CONFIG,
                "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: "
                "Invalid value `by_duration:-PT1H` for configuration share.auto.offset.reset. "
                "The value must be either 'earliest', 'latest' or of the format "
                "'by_duration:<PnDTnHnMn.nS>'.",
            ),
        ),
        (("share.auto.offset.reset", SET, "by_duration:PT1H"), (0, None)),
        (
            ("share.renew.acknowledge.enable", SET, "maybe"),
            (
                E.INVALID_CONFIG,
                "Invalid value maybe for configuration share.renew.acknowledge.enable: "
                "Expected value to be either true or false",
            ),
        ),
        (
            ("streams.num.standby.replicas", SET, "3"),
            (
                E.INVALID_CONFIG,
                "streams.num.standby.replicas must be less than or equal to "
                "group.streams.max.standby.replicas",
            ),
        ),
        (("share.partition.max.record.locks", SET, "100"), (0, None)),
    ],
)
async def test_incremental_alter_answers_as_kafka(
    tmp_path: Path, op: tuple[str, int, str | None], answer: tuple[int, str | None]
) -> None:
    broker = await make_broker(tmp_path)
    assert await incremental(broker, "g", op) == answer
    stored = broker.metadata.group_configs().get("g", {})
    assert (op[0] in stored) == (answer[0] == 0)


async def test_the_default_group_and_empty_names_are_refused(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path)
    assert await incremental(broker, "", ("consumer.heartbeat.interval.ms", SET, "6000")) == (
        E.INVALID_REQUEST,
        "Default group resources are not allowed.",
    )
    result = await describe(broker, "")
    assert (result.error_code, result.error_message) == (
        E.INVALID_REQUEST,
        "Group name must not be empty",
    )


async def test_describe_shows_overrides_and_the_broker_defaults(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path, **{"group.consumer.session.timeout.ms": "50000"})
    assert await incremental(broker, "g", ("consumer.heartbeat.interval.ms", SET, "7000")) == (
        0,
        None,
    )
    result = await describe(broker, "g")
    assert result.error_code == 0
    by_name = {c.name: c for c in result.configs}
    heartbeat = by_name["consumer.heartbeat.interval.ms"]
    assert (heartbeat.value, heartbeat.config_source, heartbeat.config_type) == (
        "7000",
        ConfigSource.GROUP_CONFIG,
        ConfigType.INT,
    )
    assert [(s.name, s.value, s.source) for s in heartbeat.synonyms] == [
        ("consumer.heartbeat.interval.ms", "7000", ConfigSource.GROUP_CONFIG),
        ("group.consumer.heartbeat.interval.ms", "5000", ConfigSource.DEFAULT_CONFIG),
    ]
    session = by_name["consumer.session.timeout.ms"]
    assert (session.value, session.config_source) == ("50000", ConfigSource.DEFAULT_CONFIG)
    assert [(s.name, s.source) for s in session.synonyms] == [
        ("group.consumer.session.timeout.ms", ConfigSource.STATIC_BROKER_CONFIG),
        ("group.consumer.session.timeout.ms", ConfigSource.DEFAULT_CONFIG),
    ]
    reset = by_name["share.auto.offset.reset"]
    assert (reset.value, reset.config_type) == ("latest", ConfigType.STRING)
    assert [(s.name, s.value) for s in reset.synonyms] == [("share.auto.offset.reset", "latest")]
    assert by_name["share.renew.acknowledge.enable"].config_type == ConfigType.BOOLEAN
    # Any group name describes, whether or not the group exists.
    assert len((await describe(broker, "nobody")).configs) == len(result.configs)


async def test_alter_configs_replaces_and_delete_removes(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path)
    await incremental(
        broker,
        "g",
        ("consumer.session.timeout.ms", SET, "50000"),
        ("share.delivery.count.limit", SET, "3"),
    )
    request = ac.AlterConfigsRequest(
        resources=[
            ac.AlterConfigsResource(
                resource_type=GROUP,
                resource_name="g",
                configs=[ac.AlterableConfig(name="consumer.heartbeat.interval.ms", value="7000")],
            )
        ]
    )
    response = await handle_alter_configs(broker, header(33, 2), roundtrip(request, 2), 2)
    assert roundtrip(response, 2).responses[0].error_code == 0
    assert broker.metadata.group_configs() == {"g": {"consumer.heartbeat.interval.ms": "7000"}}
    assert await incremental(broker, "g", ("consumer.heartbeat.interval.ms", DELETE, None)) == (
        0,
        None,
    )
    assert broker.metadata.group_configs() == {}


async def test_validate_only_and_a_failed_op_change_nothing(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path)
    ok = ("consumer.session.timeout.ms", SET, "50000")
    assert await incremental(broker, "g", ok, validate_only=True) == (0, None)
    assert await incremental(broker, "g", ok, ("bad", SET, "1")) == (
        E.INVALID_CONFIG,
        "Unknown group config name: bad",
    )
    assert broker.metadata.group_configs() == {}


async def test_group_configs_are_listed_and_survive_a_restart(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path)
    await incremental(broker, "a/b", ("share.isolation.level", SET, "read_committed"))
    request = ListConfigResourcesRequest(resource_types=[GROUP])
    response = await handle_list_config_resources(broker, header(74, 1), roundtrip(request, 1), 1)
    listed = roundtrip(response, 1).config_resources
    assert [(r.resource_name, r.resource_type) for r in listed] == [("a/b", GROUP)]
    again = EmbeddedMetadata(broker.config)
    await again.start()
    assert again.group_configs() == {"a/b": {"share.isolation.level": "read_committed"}}


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("P1D", 86_400_000),
        ("PT1M30.5S", 90_500),
        ("pt2s", 2000),
        ("-PT1S", -1000),
        ("PT", None),
        ("P", None),
        ("1H", None),
        ("PT1X", None),
    ],
)
def test_iso_durations_as_java_reads_them(text: str, ms: int | None) -> None:
    assert duration_ms(text) == ms
