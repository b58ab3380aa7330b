"""Topic administration through confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient: CreateTopics, Metadata, DescribeConfigs, DeleteTopics and their errors."""

from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, OffsetSpec
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from compat_tests.support import base_timestamp_ms, wait_for_leaders, wait_until

pytestmark = pytest.mark.timeout(60)

TOPIC_CONFIGS = {
    "retention.ms": "3600000",
    "cleanup.policy": "delete",
    "max.message.bytes": "2000000",
}


def kafka_error(future_result: Callable[[], object]) -> KafkaError:
    """The KafkaError an admin future fails with."""
    with pytest.raises(KafkaException) as info:
        future_result()
    err = info.value.args[0]
    assert isinstance(err, KafkaError)
    return err


def confluent_topics(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


def test_confluent_create_list_describe_delete(
    admin: AdminClient, unique_topic: Callable[[], str]
) -> None:
    name = unique_topic()
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=3, replication_factor=1, config=TOPIC_CONFIGS)],
        operation_timeout=10,
    )
    assert futures[name].result(timeout=20) is None
    wait_for_leaders(admin, name, 3)
    assert name in confluent_topics(admin)

    described = admin.describe_topics(TopicCollection([name]))[name].result(timeout=20)
    assert described.name == name
    assert not described.is_internal
    assert [p.id for p in described.partitions] == [0, 1, 2]
    for p in described.partitions:
        assert p.leader is not None and p.leader.id >= 0
        assert [n.id for n in p.replicas] == [p.leader.id]
        assert [n.id for n in p.isr] == [p.leader.id]

    resource = ConfigResource("TOPIC", name)
    configs = admin.describe_configs([resource])[resource].result(timeout=20)
    for key, value in TOPIC_CONFIGS.items():
        assert configs[key].value == value, key
        assert configs[key].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, key
    # A config left alone reports the default, not an override.
    assert configs["segment.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    assert admin.delete_topics([name], operation_timeout=10)[name].result(timeout=20) is None
    wait_until(lambda: name not in confluent_topics(admin), 15.0, f"{name} to disappear")


def test_confluent_create_errors(
    admin: AdminClient, create_topic: Callable[..., str], unique_topic: Callable[[], str]
) -> None:
    existing = create_topic()
    err = kafka_error(admin.create_topics([NewTopic(existing, 1, 1)])[existing].result)
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS

    bad_config = unique_topic()
    err = kafka_error(
        admin.create_topics([NewTopic(bad_config, 1, 1, config={"no.such.config": "1"})])[
            bad_config
        ].result
    )
    assert err.code() == KafkaError.INVALID_CONFIG

    bad_value = unique_topic()
    err = kafka_error(
        admin.create_topics([NewTopic(bad_value, 1, 1, config={"retention.ms": "soon"})])[
            bad_value
        ].result
    )
    assert err.code() == KafkaError.INVALID_CONFIG

    too_many_replicas = unique_topic()
    err = kafka_error(
        admin.create_topics([NewTopic(too_many_replicas, 1, 100)])[too_many_replicas].result
    )
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR

    topics = confluent_topics(admin)
    assert not {bad_config, bad_value, too_many_replicas} & topics


def test_confluent_validate_only_creates_nothing(
    admin: AdminClient, unique_topic: Callable[[], str]
) -> None:
    name = unique_topic()
    futures = admin.create_topics([NewTopic(name, 2, 1)], validate_only=True)
    assert futures[name].result(timeout=20) is None
    assert name not in confluent_topics(admin)


def test_confluent_delete_unknown_topic(
    admin: AdminClient, unique_topic: Callable[[], str]
) -> None:
    name = unique_topic()
    err = kafka_error(admin.delete_topics([name], operation_timeout=10)[name].result)
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_list_offsets(
    admin: AdminClient, bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    base = base_timestamp_ms()
    # Timestamps out of order: the max timestamp is not the last record's.
    stamps = [base, base + 1000, base + 5000, base + 2000, base + 3000]
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, ts in enumerate(stamps):
        producer.produce(topic, value=b"%d" % i, partition=0, timestamp=ts)
    assert producer.flush(20) == 0
    tp = TopicPartition(topic, 0)

    def offset_for(spec: OffsetSpec) -> tuple[int, int]:
        info = admin.list_offsets({tp: spec})[tp].result(timeout=20)
        return info.offset, info.timestamp

    assert offset_for(OffsetSpec.earliest())[0] == 0
    assert offset_for(OffsetSpec.latest())[0] == 5
    assert offset_for(OffsetSpec.for_timestamp(base + 1500)) == (2, base + 5000)
    assert offset_for(OffsetSpec.max_timestamp()) == (2, base + 5000)


@pytest.fixture
def kp_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    yield client
    client.close()


def test_kafka_python_create_list_describe_delete(
    kp_admin: KafkaAdminClient, unique_topic: Callable[[], str]
) -> None:
    name = unique_topic()
    result = kp_admin.create_topics(
        {name: {"num_partitions": 2, "replication_factor": 1, "configs": TOPIC_CONFIGS}},
        timeout_ms=10_000,
        wait_for_metadata=True,
    )
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(name, 0)]
    assert name in kp_admin.list_topics()

    (described,) = kp_admin.describe_topics([name])
    assert described["name"] == name and described["error_code"] == 0
    partitions = sorted(described["partitions"], key=lambda p: p["partition_index"])
    assert [p["partition_index"] for p in partitions] == [0, 1]
    assert all(p["leader_id"] >= 0 and p["error_code"] == 0 for p in partitions)

    resource = KpConfigResource(ConfigResourceType.TOPIC, name, configs=list(TOPIC_CONFIGS))
    configs = kp_admin.describe_configs([resource], config_filter="all")["topic"][name]
    assert {key: configs[key]["value"] for key in TOPIC_CONFIGS} == TOPIC_CONFIGS

    deleted = kp_admin.delete_topics([name], timeout_ms=10_000)
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(name, 0)]
    wait_until(lambda: name not in kp_admin.list_topics(), 15.0, f"{name} to disappear")


def test_kafka_python_errors(
    kp_admin: KafkaAdminClient, create_topic: Callable[..., str], unique_topic: Callable[[], str]
) -> None:
    existing = create_topic()
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics({existing: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_topics({unique_topic(): {"num_partitions": 0, "replication_factor": 1}})
    with pytest.raises(InvalidConfigurationError):
        kp_admin.create_topics(
            {
                unique_topic(): {
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "configs": {"cleanup.policy": "sometimes"},
                }
            }
        )
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.delete_topics([unique_topic()])
