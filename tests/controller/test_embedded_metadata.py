"""EmbeddedMetadata: topic lifecycle, errors, persistence across restarts."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from controller.embedded import (
    META_PROPERTIES,
    METADATA_FILE,
    EmbeddedMetadata,
    MetadataStoreError,
    kafka_uuid_string,
    random_kafka_uuid,
)
from controller.interface import BrokerInfo, PartitionInfo, TopicInfo
from kbroker.config import BrokerConfig, ConfigError, parse_properties
from wire.errors import ErrorCode, KafkaError


def make_config(tmp_path: Path, **extra: str) -> BrokerConfig:
    props = {
        "log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}",
        "broker.id": "3",
        "listeners": "PLAINTEXT://:9092",
        "broker.rack": "r1",
    }
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return BrokerConfig.from_properties(props)


async def started(config: BrokerConfig) -> EmbeddedMetadata:
    md = EmbeddedMetadata(config)
    await md.start()
    return md


async def expect_error(code: ErrorCode, coro: object) -> KafkaError:
    with pytest.raises(KafkaError) as info:
        await coro  # type: ignore[misc]
    assert info.value.code == code, info.value.message
    return info.value


async def test_cluster_identity_and_broker(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    assert len(md.cluster_id) == 22 and not md.cluster_id.startswith("-")
    assert md.controller_id() == 3
    assert md.brokers() == [BrokerInfo(3, "127.0.0.1", 9092, "r1")]
    for d in ("a", "b"):
        props = parse_properties((tmp_path / d / META_PROPERTIES).read_text())
        assert props == {"version": "0", "broker.id": "3", "cluster.id": md.cluster_id}
    again = await started(make_config(tmp_path))
    assert again.cluster_id == md.cluster_id


async def test_create_topic_defaults_and_shape(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path, num_partitions="3"))
    topic = await md.create_topic("orders", -1, -1, configs={"retention.ms": "1000"})
    assert topic.topic_id != uuid.UUID(int=0)
    assert topic.topic_id.version == 4
    assert topic.configs == {"retention.ms": "1000"}
    assert not topic.internal
    assert topic.partitions == tuple(
        PartitionInfo(i, leader=3, leader_epoch=0, replicas=(3,), isr=(3,)) for i in range(3)
    )
    assert md.topic("orders") == topic
    assert md.topic_by_id(topic.topic_id) == topic
    assert md.topics() == {"orders": topic}
    internal = await md.create_topic("__consumer_offsets", 2, 1)
    assert internal.internal


async def test_create_topic_with_assignments(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    topic = await md.create_topic("t", -1, -1, assignments={0: [3], 1: [3]})
    assert [p.replicas for p in topic.partitions] == [(3,), (3,)]


@pytest.mark.parametrize(
    ("name", "partitions", "rf", "kwargs", "code"),
    [
        ("", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        (".", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("a" * 250, 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("bad name", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("ünï", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("t", 0, 1, {}, ErrorCode.INVALID_PARTITIONS),
        ("t", -5, 1, {}, ErrorCode.INVALID_PARTITIONS),
        ("t", 1, 2, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("t", 1, 0, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("t", 1, -1, {"assignments": {0: [3]}}, ErrorCode.INVALID_REQUEST),
        ("t", -1, -1, {"assignments": {1: [3]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", -1, -1, {"assignments": {0: [4]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", -1, -1, {"assignments": {0: [3, 3]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", -1, -1, {"assignments": {0: []}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", 1, 1, {"configs": {"retention.ms": "x"}}, ErrorCode.INVALID_CONFIG),
        ("t", 1, 1, {"configs": {"no.such": "1"}}, ErrorCode.INVALID_CONFIG),
    ],
)
async def test_create_topic_errors(
    tmp_path: Path, name: str, partitions: int, rf: int, kwargs: dict, code: ErrorCode
) -> None:
    md = await started(make_config(tmp_path))
    await expect_error(code, md.create_topic(name, partitions, rf, **kwargs))
    assert md.topics() == {}


async def test_longest_legal_name(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    await md.create_topic("a" * 249, 1, 1)


async def test_default_replication_factor_above_broker_count(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path, default_replication_factor="3"))
    error = await expect_error(ErrorCode.INVALID_REPLICATION_FACTOR, md.create_topic("t", 1, -1))
    assert "1 broker(s)" in str(error.message)


async def test_existing_and_colliding_names(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    await md.create_topic("a.b", 1, 1)
    await expect_error(ErrorCode.TOPIC_ALREADY_EXISTS, md.create_topic("a.b", 1, 1))
    error = await expect_error(ErrorCode.INVALID_TOPIC_EXCEPTION, md.create_topic("a_b", 1, 1))
    assert "collides" in str(error.message)


async def test_validate_only_changes_nothing(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    seen: list[str] = []
    md.add_listener(lambda info, name: seen.append(name))
    topic = await md.create_topic("t", 2, 1, validate_only=True)
    assert len(topic.partitions) == 2
    assert md.topics() == {} and seen == []
    await md.create_topic("t", 1, 1)
    grown = await md.create_partitions("t", 4, validate_only=True)
    assert len(grown.partitions) == 4
    assert len(md.topic("t").partitions) == 1  # type: ignore[union-attr]
    assert seen == ["t"]


async def test_delete_topic(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    events: list[tuple[TopicInfo | None, str]] = []
    md.add_listener(lambda info, name: events.append((info, name)))
    topic = await md.create_topic("t", 1, 1)
    await md.delete_topic("t")
    assert md.topic("t") is None and md.topic_by_id(topic.topic_id) is None
    assert events == [(topic, "t"), (None, "t")]
    await expect_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, md.delete_topic("t"))


async def test_create_partitions(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    topic = await md.create_topic("t", 2, 1)
    grown = await md.create_partitions("t", 4)
    assert grown.topic_id == topic.topic_id
    assert [p.partition for p in grown.partitions] == [0, 1, 2, 3]
    assert grown.partitions[3] == PartitionInfo(3, 3, 0, (3,), (3,))
    grown = await md.create_partitions("t", 5, assignments=[[3]])
    assert len(grown.partitions) == 5


@pytest.mark.parametrize(
    ("total", "assignments", "code", "message"),
    [
        (1, None, ErrorCode.INVALID_PARTITIONS, "higher than the requested 1"),
        (2, None, ErrorCode.INVALID_PARTITIONS, "already has 2"),
        (4, [[3]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "by 2 but 1 assignments"),
        (3, [[7]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "unknown broker"),
        (3, [[3, 3]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "more than once"),
    ],
)
async def test_create_partitions_errors(
    tmp_path: Path, total: int, assignments: list[list[int]] | None, code: ErrorCode, message: str
) -> None:
    md = await started(make_config(tmp_path))
    await md.create_topic("t", 2, 1)
    error = await expect_error(code, md.create_partitions("t", total, assignments=assignments))
    assert message in str(error.message)
    await expect_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, md.create_partitions("u", 3))


async def test_topic_and_broker_configs(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    await md.create_topic("t", 1, 1, configs={"retention.ms": "1"})
    changed: list[str] = []
    md.add_listener(lambda info, name: changed.append(name))
    updated = await md.set_topic_configs("t", {"segment.bytes": "2048"})
    assert updated.configs == {"segment.bytes": "2048"}
    assert md.topic("t").configs == {"segment.bytes": "2048"}  # type: ignore[union-attr]
    await expect_error(ErrorCode.INVALID_CONFIG, md.set_topic_configs("t", {"x": "1"}))
    await expect_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, md.set_topic_configs("u", {}))
    await md.set_broker_configs({"log.retention.ms": "5"})
    assert md.broker_configs() == {"log.retention.ms": "5"}
    await expect_error(ErrorCode.INVALID_REQUEST, md.set_broker_configs({"broker.id": "2"}))
    assert md.broker_configs() == {"log.retention.ms": "5"}
    # A broker config change may change every topic's effective config.
    assert changed == ["t", "t"]
    told: list[bool] = []
    md.add_broker_config_listener(lambda: told.append(True))
    await md.set_default_broker_configs({"log.cleaner.threads": "2"})
    assert md.default_broker_configs() == {"log.cleaner.threads": "2"}
    assert changed == ["t", "t", "t"] and told == [True]
    await expect_error(
        ErrorCode.INVALID_REQUEST,
        md.set_default_broker_configs({"listener.name.ssl.ssl.keystore.location": "/k"}),
    )


async def test_state_survives_restart(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    a = await md.create_topic("a", 2, 1, configs={"cleanup.policy": "compact"})
    await md.create_topic("b", 1, 1)
    await md.create_topic("c", 1, 1)
    await md.delete_topic("b")
    await md.create_partitions("c", 3)
    await md.set_topic_configs("c", {"retention.bytes": "100"})
    await md.set_broker_configs({"message.max.bytes": "5000"})
    await md.set_default_broker_configs({"log.cleaner.threads": "2"})
    await md.stop()

    again = await started(make_config(tmp_path))
    assert again.cluster_id == md.cluster_id
    assert again.topics() == md.topics()
    assert again.topic_by_id(a.topic_id) == a
    assert set(again.topics()) == {"a", "c"}
    assert len(again.topic("c").partitions) == 3  # type: ignore[union-attr]
    assert again.broker_configs() == {"message.max.bytes": "5000"}
    assert again.default_broker_configs() == {"log.cleaner.threads": "2"}
    state = json.loads((tmp_path / "a" / METADATA_FILE).read_text())
    assert state["version"] == 1 and state["cluster_id"] == md.cluster_id
    assert not (tmp_path / "a" / (METADATA_FILE + ".tmp")).exists()


async def test_a_listener_failure_does_not_stop_the_change(tmp_path: Path) -> None:
    md = await started(make_config(tmp_path))
    calls: list[str] = []

    def broken(info: TopicInfo | None, name: str) -> None:
        raise RuntimeError("boom")

    md.add_listener(broken)
    md.add_listener(lambda info, name: calls.append(name))
    await md.create_topic("t", 1, 1)
    assert calls == ["t"] and md.topic("t") is not None


async def test_broker_id_mismatch_stops_start(tmp_path: Path) -> None:
    await started(make_config(tmp_path))
    with pytest.raises(ConfigError, match="broker.id"):
        await started(make_config(tmp_path, broker_id="4"))


async def test_corrupt_metadata_file_stops_start(tmp_path: Path) -> None:
    await started(make_config(tmp_path))
    (tmp_path / "a" / METADATA_FILE).write_text("{not json")
    with pytest.raises(MetadataStoreError, match="cannot read"):
        await started(make_config(tmp_path))


async def test_log_dirs_from_different_clusters(tmp_path: Path) -> None:
    await started(make_config(tmp_path))
    (tmp_path / "b" / META_PROPERTIES).write_text("version=0\nbroker.id=3\ncluster.id=other\n")
    with pytest.raises(MetadataStoreError, match="different clusters"):
        await started(make_config(tmp_path))


def test_random_uuids() -> None:
    for _ in range(200):
        value = random_kafka_uuid()
        assert value != uuid.UUID(int=0)
        assert not kafka_uuid_string(value).startswith("-")
    assert kafka_uuid_string(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
