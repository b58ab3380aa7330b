"""Topic-level configs: validation, broker-supplied defaults, DescribeConfigs views."""

from __future__ import annotations

import pytest

from kbroker.config import (
    BrokerConfig,
    ConfigEntry,
    ConfigSynonym,
    DynamicConfigs,
    describe_broker_configs,
    describe_default_broker_configs,
    describe_topic_configs,
    effective_topic_config,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from kbroker.config_defs import TOPIC_DEFS, ConfigSource, ConfigType
from wire.errors import ErrorCode, KafkaError

BRIEF_TOPIC_CONFIGS = """cleanup.policy compression.type delete.retention.ms file.delete.delay.ms
flush.messages flush.ms index.interval.bytes max.compaction.lag.ms max.message.bytes
message.timestamp.type message.timestamp.difference.max.ms message.timestamp.before.max.ms
message.timestamp.after.max.ms min.cleanable.dirty.ratio min.compaction.lag.ms
min.insync.replicas preallocate retention.bytes retention.ms segment.bytes segment.index.bytes
segment.jitter.ms segment.ms unclean.leader.election.enable message.downconversion.enable""".split()
# Kafka 3.9 accepts these too; kbroker accepts them without effect (issue 13, item 5).
ACCEPTED_WITHOUT_EFFECT = """message.format.version compression.gzip.level compression.lz4.level
compression.zstd.level leader.replication.throttled.replicas
follower.replication.throttled.replicas local.retention.ms local.retention.bytes
remote.storage.enable remote.log.copy.disable remote.log.delete.on.disable""".split()
# Confluent Server's broker-side schema validation (kbroker/schema_validation.py).
SCHEMA_VALIDATION = ["confluent.key.schema.validation", "confluent.value.schema.validation"]


def test_topic_config_names() -> None:
    assert sorted(TOPIC_DEFS) == sorted(
        BRIEF_TOPIC_CONFIGS + ACCEPTED_WITHOUT_EFFECT + SCHEMA_VALIDATION
    )


def test_deprecated_and_unsupported_configs_are_accepted_as_kafka_accepts_them() -> None:
    validate_topic_configs(
        {
            "message.format.version": "2.8",
            "compression.zstd.level": "9",
            "leader.replication.throttled.replicas": "0:1,1:2",
            "remote.storage.enable": "false",
        }
    )
    with pytest.raises(KafkaError, match="tiered storage") as info:
        validate_topic_configs({"remote.storage.enable": "true"})
    assert info.value.code == ErrorCode.INVALID_CONFIG


def test_stock_defaults_match_kafka() -> None:
    defaults = BrokerConfig.from_properties({}).topic_defaults()
    assert defaults["retention.ms"] == "604800000"
    assert defaults["segment.ms"] == "604800000"
    assert defaults["segment.bytes"] == "1073741824"
    assert defaults["max.message.bytes"] == "1048588"
    assert defaults["cleanup.policy"] == "delete"
    assert defaults["flush.ms"] == str(2**63 - 1)
    assert defaults["segment.jitter.ms"] == "0"
    for name, t in TOPIC_DEFS.items():
        t.definition.parse(defaults[name])


@pytest.mark.parametrize(
    ("props", "name", "value"),
    [
        ({"log.retention.hours": "1"}, "retention.ms", "3600000"),
        ({"log.retention.minutes": "2", "log.retention.hours": "1"}, "retention.ms", "120000"),
        ({"log.retention.ms": "5", "log.retention.minutes": "2"}, "retention.ms", "5"),
        ({"log.retention.hours": "-1"}, "retention.ms", "-1"),
        ({"log.roll.hours": "2"}, "segment.ms", "7200000"),
        ({"log.roll.jitter.hours": "1"}, "segment.jitter.ms", "3600000"),
        ({"log.flush.scheduler.interval.ms": "3000"}, "flush.ms", "3000"),
        (
            {"log.flush.interval.ms": "10", "log.flush.scheduler.interval.ms": "3000"},
            "flush.ms",
            "10",
        ),
        ({"message.max.bytes": "2000"}, "max.message.bytes", "2000"),
        ({"log.segment.bytes": "1024"}, "segment.bytes", "1024"),
        ({"log.cleanup.policy": "compact"}, "cleanup.policy", "compact"),
        ({"log.index.size.max.bytes": "4096"}, "segment.index.bytes", "4096"),
    ],
)
def test_broker_properties_supply_topic_defaults(
    props: dict[str, str], name: str, value: str
) -> None:
    assert BrokerConfig.from_properties(props).topic_defaults()[name] == value


def test_dynamic_broker_configs_win_over_static() -> None:
    broker = BrokerConfig.from_properties({"log.retention.hours": "1"})
    effective = effective_topic_config({}, broker, DynamicConfigs({"log.retention.ms": "42"}))
    assert effective["retention.ms"] == "42"
    # This broker's own dynamic config wins over the cluster-wide default.
    both = DynamicConfigs({"log.segment.bytes": "2000"}, {"log.segment.bytes": "3000"})
    assert effective_topic_config({}, broker, both)["segment.bytes"] == "2000"
    default_only = DynamicConfigs({}, {"log.segment.bytes": "3000"})
    assert effective_topic_config({}, broker, default_only)["segment.bytes"] == "3000"


def test_with_dynamic_keeps_the_static_properties() -> None:
    static = BrokerConfig.from_properties({"message.max.bytes": "1000", "broker.id": "1"})
    dynamic = DynamicConfigs(
        {"log.cleaner.threads": "3", "foo.bar": "kept, no value"},
        {"log.cleaner.threads": "2", "message.max.bytes": "5000"},
    )
    config = static.with_dynamic(dynamic)
    assert config.get("log.cleaner.threads") == 3
    assert config.get("message.max.bytes") == config.message_max_bytes == 5000
    assert config.props == static.props


def test_effective_topic_config_overrides_win() -> None:
    broker = BrokerConfig.from_properties({"log.segment.bytes": "2048"})
    effective = effective_topic_config({"segment.bytes": "4096"}, broker)
    assert effective["segment.bytes"] == "4096"
    assert effective["retention.ms"] == "604800000"
    assert set(effective) == set(TOPIC_DEFS)


def test_valid_topic_configs_pass() -> None:
    validate_topic_configs(
        {
            "cleanup.policy": "compact,delete",
            "compression.type": "zstd",
            "retention.ms": "-1",
            "min.cleanable.dirty.ratio": "0.1",
            "preallocate": "TRUE",
            "message.timestamp.type": "LogAppendTime",
        }
    )


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.hours": "1"}, "Unknown topic config name: retention.hours"),
        ({"retention.ms": None}, "Null value"),
        ({"retention.ms": "soon"}, "retention.ms"),
        ({"segment.bytes": "10"}, "at least 14"),
        ({"segment.bytes": "3000000000"}, "does not fit"),
        ({"cleanup.policy": "compact,archive"}, "'archive' is not one of"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"min.insync.replicas": "0"}, "at least 1"),
        ({"min.cleanable.dirty.ratio": "2"}, "at most 1"),
        ({"unclean.leader.election.enable": "maybe"}, "true or false"),
        ({"message.timestamp.type": "createtime"}, "not one of"),
    ],
)
def test_invalid_topic_configs(configs: dict[str, str | None], message: str) -> None:
    with pytest.raises(KafkaError) as info:
        validate_topic_configs(configs)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert message in str(info.value.message)


def test_dynamic_broker_config_validation() -> None:
    # Kafka keeps names it does not know, and lets listener overrides name any listener.
    validate_dynamic_broker_configs(
        {
            "log.retention.ms": "1000",
            "message.max.bytes": "100",
            "sasl.kerberos.min.time.before.relogin": "58000",
            "background.threads": "9",
            "no.such.thing": "1",
            "listener.name.ssl.ssl.keystore.location": "/etc/keystore.pem",
        }
    )
    validate_dynamic_broker_configs(
        {"log.cleaner.threads": "2", "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN"},
        per_broker=False,
    )
    default = "Cannot update these configs at default cluster level, broker id must be specified"
    for configs, per_broker, message in [
        ({"broker.id": "4"}, True, "Cannot update these configs dynamically: broker.id"),
        ({"log.retention.hours": "1"}, True, "Cannot update these configs dynamically"),
        (
            {"ssl.keystore.location": "/x"},
            True,
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix: ssl.keystore.location",
        ),
        ({"log.segment.bytes": "1"}, True, "at least 14"),
        ({"listener.name.ssl.ssl.client.auth": "maybe"}, True, "is not one of"),
        ({"log.segment.bytes": None}, True, "Null value"),
        ({"sasl.kerberos.min.time.before.relogin": "1"}, False, default),
        ({"listener.name.ssl.ssl.keystore.location": "/x"}, False, default),
    ]:
        with pytest.raises(KafkaError) as info:
            validate_dynamic_broker_configs(configs, per_broker=per_broker)
        assert info.value.code == ErrorCode.INVALID_REQUEST
        assert message in str(info.value.message)


def _entry(entries: list[ConfigEntry], name: str) -> ConfigEntry:
    return next(e for e in entries if e.name == name)


def test_describe_topic_config_sources_and_synonyms() -> None:
    broker = BrokerConfig.from_properties({"log.retention.hours": "24"})
    entries = describe_topic_configs(
        {"segment.bytes": "4096"}, broker, DynamicConfigs({"log.retention.ms": "5000"})
    )
    assert [e.name for e in entries] == sorted(TOPIC_DEFS)

    segment = _entry(entries, "segment.bytes")
    assert (segment.value, segment.source, segment.type) == (
        "4096",
        ConfigSource.TOPIC_CONFIG,
        ConfigType.INT,
    )
    assert segment.synonyms == (
        ConfigSynonym("segment.bytes", "4096", ConfigSource.TOPIC_CONFIG),
        ConfigSynonym("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    )
    assert not segment.read_only and not segment.sensitive

    retention = _entry(entries, "retention.ms")
    assert (retention.value, retention.source) == ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert retention.synonyms == (
        ConfigSynonym("log.retention.ms", "5000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    policy = _entry(entries, "cleanup.policy")
    assert (policy.value, policy.source, policy.type) == (
        "delete",
        ConfigSource.DEFAULT_CONFIG,
        ConfigType.LIST,
    )


def test_describe_broker_configs() -> None:
    broker = BrokerConfig.from_properties({"num.partitions": "3", "log.retention.hours": "5"})
    entries = describe_broker_configs(broker, DynamicConfigs({"log.retention.ms": "7"}))
    partitions = _entry(entries, "num.partitions")
    assert (partitions.value, partitions.source, partitions.read_only) == (
        "3",
        ConfigSource.STATIC_BROKER_CONFIG,
        True,
    )
    assert partitions.synonyms == (
        ConfigSynonym("num.partitions", "3", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("num.partitions", "1", ConfigSource.DEFAULT_CONFIG),
    )
    retention = _entry(entries, "log.retention.ms")
    assert (retention.value, retention.source, retention.read_only) == (
        "7",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        False,
    )
    assert [s.name for s in retention.synonyms] == [
        "log.retention.ms",
        "log.retention.hours",
        "log.retention.hours",
    ]
    rack = _entry(entries, "broker.rack")
    assert (rack.value, rack.source, rack.synonyms) == (None, ConfigSource.DEFAULT_CONFIG, ())


def test_describe_broker_configs_as_kafka_does() -> None:
    """What Kafka 3.9 answers for the same configs (seen with DescribeConfigs v4)."""
    broker = BrokerConfig.from_properties({})
    dynamic = DynamicConfigs(
        {
            "background.threads": "9",
            "listener.name.plaintext.ssl.keystore.type": "PEM",
            "foo.bar": "1",
        },
        {"background.threads": "7", "log.cleaner.threads": "2", "foo.baz": "x"},
    )
    entries = describe_broker_configs(broker, dynamic)
    threads = _entry(entries, "background.threads")
    assert (threads.value, threads.source, threads.read_only) == (
        "9",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        False,
    )
    assert threads.synonyms == (
        ConfigSynonym("background.threads", "9", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ConfigSynonym("background.threads", "7", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("background.threads", "10", ConfigSource.DEFAULT_CONFIG),
    )
    cleaner = _entry(entries, "log.cleaner.threads")
    assert (cleaner.value, cleaner.source) == ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    keystore = _entry(entries, "listener.name.plaintext.ssl.keystore.type")
    assert (keystore.value, keystore.source, keystore.read_only, keystore.type) == (
        "PEM",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        True,
        ConfigType.STRING,
    )
    assert keystore.synonyms == (
        ConfigSynonym(
            "listener.name.plaintext.ssl.keystore.type", "PEM", ConfigSource.DYNAMIC_BROKER_CONFIG
        ),
        ConfigSynonym("ssl.keystore.type", "JKS", ConfigSource.DEFAULT_CONFIG),
    )
    unknown = _entry(entries, "foo.bar")
    assert (unknown.value, unknown.sensitive, unknown.type, unknown.read_only) == (
        None,
        True,
        ConfigType.UNKNOWN,
        True,
    )
    assert _entry(entries, "foo.baz").source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    defaults = describe_default_broker_configs(dynamic)
    assert [(e.name, e.value, e.source) for e in defaults] == [
        ("background.threads", "7", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("foo.baz", None, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.cleaner.threads", "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]
