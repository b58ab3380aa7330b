"""A mirror topic's link as kbroker.mirror.* topic configs: validation, the read-only answer,
the changes refused, and how DescribeConfigs shows them."""

from __future__ import annotations

import pytest

from kbroker.config import BrokerConfig, describe_topic_configs, validate_topic_configs
from kbroker.config_defs import ConfigType
from kbroker.mirror.topic_configs import (
    GROUP_FILTER,
    GROUP_SYNC_MS,
    LINK,
    SOURCE_BOOTSTRAP,
    SOURCE_CONFIG,
    STATE,
    check_mirror_change,
    mirror_spec,
    read_only_error,
    synced_configs,
)
from wire.errors import ErrorCode, KafkaError

MIRROR = {SOURCE_BOOTSTRAP: "src:9092", LINK: "dc1", STATE: "active"}


def test_mirror_configs_are_valid_topic_configs() -> None:
    validate_topic_configs({**MIRROR, SOURCE_CONFIG + "security.protocol": "SASL_PLAINTEXT"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (STATE, "running"),
        (SOURCE_BOOTSTRAP, "no-port"),
        ("kbroker.mirror.unknown", "x"),
        (SOURCE_CONFIG + "security.protocol", "CARRIER_PIGEON"),
        (GROUP_FILTER, "app(?=x)"),
        (GROUP_SYNC_MS, "0"),
    ],
)
def test_bad_mirror_configs_are_refused(name: str, value: str) -> None:
    with pytest.raises(KafkaError) as refused:
        validate_topic_configs({**MIRROR, name: value})
    assert refused.value.code == ErrorCode.INVALID_CONFIG


def test_spec_defaults_to_the_same_topic_name_and_active() -> None:
    spec = mirror_spec("orders", {SOURCE_BOOTSTRAP: "a:1,b:2"})
    assert spec is not None
    assert (spec.source_topic, spec.state, spec.link) == ("orders", "active", "default")
    assert mirror_spec("orders", {"retention.ms": "1"}) is None


def test_produce_is_refused_until_promoted() -> None:
    error = read_only_error("orders", MIRROR)
    assert error is not None and error.code == ErrorCode.INVALID_REQUEST
    assert "read-only mirror" in (error.message or "")
    assert read_only_error("orders", {**MIRROR, STATE: "paused"}) is not None
    assert read_only_error("orders", {**MIRROR, STATE: "promoted"}) is None
    assert read_only_error("orders", {}) is None


def test_a_mirror_ends_only_by_promotion() -> None:
    with pytest.raises(KafkaError):
        check_mirror_change("orders", MIRROR, {LINK: "dc1"})
    with pytest.raises(KafkaError):
        check_mirror_change("orders", MIRROR, {**MIRROR, SOURCE_BOOTSTRAP: "other:9092"})
    check_mirror_change("orders", MIRROR, {**MIRROR, STATE: "promoted"})
    check_mirror_change("orders", MIRROR, {**MIRROR, STATE: "paused", "retention.ms": "5"})


def test_a_promoted_mirror_never_follows_again() -> None:
    promoted = {**MIRROR, STATE: "promoted"}
    with pytest.raises(KafkaError):
        check_mirror_change("orders", promoted, {**MIRROR, STATE: "active"})
    check_mirror_change("orders", promoted, {})


def test_describe_lists_mirror_configs_only_where_set_and_masks_secrets() -> None:
    broker = BrokerConfig.from_properties({})
    plain = {e.name for e in describe_topic_configs({}, broker)}
    assert not any(n.startswith("kbroker.mirror.") for n in plain)
    secret = SOURCE_CONFIG + "sasl.jaas.config"
    entries = {e.name: e for e in describe_topic_configs({**MIRROR, secret: "pw"}, broker)}
    assert entries[SOURCE_BOOTSTRAP].value == "src:9092"
    assert entries[secret].value is None and entries[secret].sensitive
    assert entries[secret].type == ConfigType.PASSWORD


def test_copied_configs_follow_the_source_and_the_others_stay() -> None:
    current = {**MIRROR, "retention.ms": "1000", "segment.bytes": "1048576"}
    synced = synced_configs(current, {"retention.ms": "5000", "cleanup.policy": "compact"})
    assert synced == {
        **MIRROR,
        "retention.ms": "5000",
        "cleanup.policy": "compact",
        "segment.bytes": "1048576",
    }
    # An override the source dropped is dropped here; nothing to do when all match.
    assert synced_configs(current, {}) == {**MIRROR, "segment.bytes": "1048576"}
    assert synced_configs(current, {"retention.ms": "1000", "flush.ms": "5"}) is None
