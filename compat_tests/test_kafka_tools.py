"""Apache Kafka 4.3's command-line tools against kbroker and against Kafka 4.3.

Each test runs one tool (one JVM per command, so a few commands per tool) against the
session's broker and checks what it prints; the same checks hold on both brokers, which is
the comparison (the README's table lists each tool's result on each). Topics, records,
groups and transactions the tools look at are set up with confluent-kafka, which costs no
JVM. kafka-acls needs an authorizer: its test starts a broker of its own with
StandardAuthorizer (kbroker accepts the class name and serves ACLs itself).

These tools are 4.3's: the module runs against kbroker and Kafka 4.3 (or the broker that
KBROKER_BOOTSTRAP names), not Kafka 3.9.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from compat_tests.broker_process import BrokerProcess, BrokerStartError
from compat_tests.kafka43_tools import Kafka43Tools, kafka43_tools
from compat_tests.kafka_process import KRaftKafkaProcess
from compat_tests.support import wait_for_leaders, wait_until

TOOL_BROKERS = ("kbroker", "kafka43", "external")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.broker_kinds(*TOOL_BROKERS),
]


@pytest.fixture(scope="session")
def tools(
    broker_kind: str, bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Kafka43Tools:
    return kafka43_tools(bootstrap, tmp_path_factory.mktemp(f"tools-{broker_kind}"))


@pytest.fixture(scope="session")
def broker_id(admin: AdminClient) -> int:
    return min(admin.list_topics(timeout=10).brokers)


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 20)
    finally:
        consumer.close()
    return [tp.offset for tp in found]


def table(lines: list[str]) -> list[list[str]]:
    """Rows of a tool's whitespace-aligned table."""
    return [line.split() for line in lines]


def test_kafka_topics(
    tools: Kafka43Tools, admin: AdminClient, unique_topic: Callable[[], str]
) -> None:
    topic = unique_topic()
    tools.ok(
        "kafka-topics",
        "--create",
        "--topic",
        topic,
        "--partitions",
        "2",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=3600000",
    )
    wait_for_leaders(admin, topic, 2)
    assert topic in tools.ok("kafka-topics", "--list").lines()
    described = tools.ok("kafka-topics", "--describe", "--topic", topic).stdout
    assert re.search(rf"Topic: {topic}\s+TopicId: \S+\s+PartitionCount: 2\s", described), described
    assert "retention.ms=3600000" in described
    assert (
        len(re.findall(r"Partition: \d+\s+Leader: \d+\s+Replicas: \d+\s+Isr: \d+", described)) == 2
    )

    tools.ok("kafka-topics", "--alter", "--topic", topic, "--partitions", "3")
    wait_for_leaders(admin, topic, 3)
    shrink = tools.run("kafka-topics", "--alter", "--topic", topic, "--partitions", "1")
    assert shrink.returncode != 0 and "InvalidPartitionsException" in shrink.stderr, shrink.report()

    tools.ok("kafka-topics", "--delete", "--topic", topic)
    wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 30.0, f"{topic} gone")
    missing = tools.run("kafka-topics", "--describe", "--topic", topic)
    assert missing.returncode != 0 and f"Topic '{topic}' does not exist" in missing.stderr, (
        missing.report()
    )


def test_kafka_configs_topic_and_broker(
    tools: Kafka43Tools, create_topic: Callable[..., str], broker_id: int
) -> None:
    topic = create_topic(config={"retention.ms": "3600000"})
    topic_entity = ("--entity-type", "topics", "--entity-name", topic)
    tools.ok("kafka-configs", *topic_entity, "--alter", "--add-config", "max.message.bytes=2000000")
    described = tools.ok("kafka-configs", *topic_entity, "--describe").stdout
    assert f"Dynamic configs for topic {topic} are:" in described
    assert (
        "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"
        in described
    )
    assert "max.message.bytes=2000000 sensitive=false" in described

    broker_entity = ("--entity-type", "brokers", "--entity-name", str(broker_id))
    tools.ok(
        "kafka-configs", *broker_entity, "--alter", "--add-config", "log.retention.ms=86400000"
    )
    described = tools.ok("kafka-configs", *broker_entity, "--describe", "--all").stdout
    assert f"All configs for broker {broker_id} are:" in described
    retention = "log.retention.ms=86400000"
    assert f"{retention} sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:{retention}" in described
    default = r"message\.max\.bytes=1048588"
    assert re.search(
        rf"{default} sensitive=false synonyms=\{{.*DEFAULT_CONFIG:{default}\}}", described
    )
    tools.ok("kafka-configs", *broker_entity, "--alter", "--delete-config", "log.retention.ms")


def test_kafka_console_producer_and_consumer(
    tools: Kafka43Tools, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    lines = [f"k{i}:value {i}" for i in range(20)]
    tools.ok(
        "kafka-console-producer",
        "--topic",
        topic,
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "key.separator=:",
        stdin="\n".join(lines) + "\n",
    )
    consumed = tools.ok(
        "kafka-console-consumer",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "20",
        "--group",
        f"console-{uuid.uuid4().hex[:8]}",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "key.separator=:",
        "--timeout-ms",
        "60000",
    )
    assert consumed.lines() == lines, consumed.report()


def test_kafka_consumer_groups(
    tools: Kafka43Tools, bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic(partitions=2)
    produce(bootstrap, topic, 20, partitions=2)
    group = f"tools-group-{uuid.uuid4().hex[:8]}"
    commit(bootstrap, group, [TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 10)])

    assert group in tools.ok("kafka-consumer-groups", "--list").lines()
    described = tools.ok("kafka-consumer-groups", "--describe", "--group", group).stdout
    rows = {(r[1], r[2]): r[3:6] for r in table(described.splitlines()) if r and r[0] == group}
    assert rows == {(topic, "0"): ["4", "10", "6"], (topic, "1"): ["10", "10", "0"]}, described

    reset = tools.ok(
        "kafka-consumer-groups",
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    )
    assert committed(bootstrap, group, topic, 2) == [0, 0], reset.report()

    deleted = tools.ok("kafka-consumer-groups", "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted.stdout
    assert group not in tools.ok("kafka-consumer-groups", "--list").lines()


def test_kafka_transactions(
    tools: Kafka43Tools, bootstrap: str, create_topic: Callable[..., str], broker_id: int
) -> None:
    topic = create_topic()
    transactional_id = f"tools-txn-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"in a transaction")
    producer.commit_transaction(30)

    listed = table(tools.ok("kafka-transactions", "list").lines())
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (row,) = [r for r in listed if r[0] == transactional_id]
    assert row[1] == str(broker_id) and row[3] == "CompleteCommit", listed

    described = table(
        tools.ok("kafka-transactions", "describe", "--transactional-id", transactional_id).lines()
    )
    assert described[0][:4] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch"]
    assert described[1][:2] == [str(broker_id), transactional_id]
    assert "CompleteCommit" in described[1], described

    hanging = tools.ok("kafka-transactions", "find-hanging", "--broker-id", str(broker_id))
    assert table(hanging.lines()) == [
        [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ]
    ], hanging.report()


def test_kafka_get_offsets_and_delete_records(
    tools: Kafka43Tools, bootstrap: str, create_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = create_topic(partitions=2)
    produce(bootstrap, topic, 10, partitions=2)
    latest = tools.ok("kafka-get-offsets", "--topic", topic).lines()
    assert sorted(latest) == [f"{topic}:0:5", f"{topic}:1:5"]

    offsets = tmp_path / "delete.json"
    offsets.write_text(
        json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 3}], "version": 1})
    )
    deleted = tools.ok("kafka-delete-records", "--offset-json-file", str(offsets))
    assert f"partition: {topic}-0\tlow_watermark: 3" in deleted.stdout, deleted.report()
    earliest = tools.ok("kafka-get-offsets", "--topic", topic, "--time", "earliest").lines()
    assert sorted(earliest) == [f"{topic}:0:3", f"{topic}:1:0"]


def test_kafka_log_dirs(
    tools: Kafka43Tools, bootstrap: str, create_topic: Callable[..., str], broker_id: int
) -> None:
    topic = create_topic()
    produce(bootstrap, topic, 10)
    run = tools.ok("kafka-log-dirs", "--describe", "--topic-list", topic)
    description = json.loads(run.lines()[-1])
    (broker,) = [b for b in description["brokers"] if b["broker"] == broker_id]
    replicas = [p for d in broker["logDirs"] for p in d["partitions"]]
    assert [(p["partition"], p["size"] > 0, p["isFuture"]) for p in replicas] == [
        (f"{topic}-0", True, False)
    ], run.report()


def test_kafka_reassign_partitions_and_leader_election(
    tools: Kafka43Tools, create_topic: Callable[..., str], broker_id: int, tmp_path: Path
) -> None:
    """One broker: the partition is "moved" to the broker it is on, and its preferred leader
    elected where it already leads, which both brokers answer as a no-op."""
    topic = create_topic()
    plan = tmp_path / "reassignment.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": topic, "partition": 0, "replicas": [broker_id]}],
            }
        )
    )
    executed = tools.ok(
        "kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--execute"
    )
    assert "Successfully started partition reassignment" in executed.stdout, executed.report()
    verified = tools.ok(
        "kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--verify"
    )
    assert f"Reassignment of partition {topic}-0 is completed." in verified.stdout, (
        verified.report()
    )

    elected = tools.run(
        "kafka-leader-election",
        "--election-type",
        "preferred",
        "--topic",
        topic,
        "--partition",
        "0",
    )
    assert elected.returncode == 0, elected.report()
    assert f"Valid replica already elected for partitions {topic}-0" in elected.stdout, (
        elected.report()
    )


def test_kafka_perf_tests(tools: Kafka43Tools, create_topic: Callable[..., str]) -> None:
    topic = create_topic()
    produced = tools.run_raw(
        "kafka-producer-perf-test",
        "--topic",
        topic,
        "--num-records",
        "2000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={tools.bootstrap}",
    )
    assert produced.returncode == 0, produced.report()
    assert re.search(r"^2000 records sent, .* records/sec", produced.stdout, re.M), (
        produced.report()
    )

    consumed = tools.ok(
        "kafka-consumer-perf-test",
        "--topic",
        topic,
        "--num-records",
        "2000",
        "--group",
        f"perf-{uuid.uuid4().hex[:8]}",
        "--timeout",
        "60000",
    )
    header, values = consumed.lines()[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], values.split(","), strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == 2000, consumed.report()


def test_kafka_features(authorizing_broker: BrokerProcess, tools: Kafka43Tools) -> None:
    # Against the module's own broker of this kind (see kafka-acls below): in CI the
    # session's shared broker was once a Kafka 3.9 one for a [kbroker] test.
    tools = Kafka43Tools(authorizing_broker.bootstrap, tools.log_dir)
    described = tools.ok("kafka-features", "describe")
    features = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r"Feature: (\S+)\s+SupportedMinVersion: \S+\s+SupportedMaxVersion: "
            r"\S+\s+FinalizedVersionLevel: (\S+)",
            described.stdout,
        )
    }
    # KIP-890's transaction version 2 is what Kafka 4.x finalizes for a new cluster.
    assert features.get("transaction.version") == "2", described.report()


def test_kafka_client_metrics(authorizing_broker: BrokerProcess, tools: Kafka43Tools) -> None:
    tools = Kafka43Tools(authorizing_broker.bootstrap, tools.log_dir)
    name = f"tools-metrics-{uuid.uuid4().hex[:8]}"
    tools.ok(
        "kafka-client-metrics",
        "--alter",
        "--name",
        name,
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval",
        "60000",
    )
    assert name in tools.ok("kafka-client-metrics", "--list").lines()
    described = tools.ok("kafka-client-metrics", "--describe", "--name", name).stdout
    assert f"Client metrics configs for {name} are:" in described, described
    assert "metrics=org.apache.kafka.producer." in described
    assert "interval.ms=60000" in described
    tools.ok("kafka-client-metrics", "--delete", "--name", name)


# kafka-acls needs a broker with an authorizer: one of its own, the tool's test user
# (ANONYMOUS over PLAINTEXT) a super user, as Kafka's brokers' own principal must be.
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture(scope="session")
def authorizing_broker(
    broker_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    if broker_kind == "external":
        pytest.skip("kafka-acls needs a broker with an authorizer, which this test starts")
    work = tmp_path_factory.mktemp(f"acl-{broker_kind}")
    broker = (
        BrokerProcess(work, overrides=AUTHORIZER)
        if broker_kind == "kbroker"
        else KRaftKafkaProcess(work, overrides=AUTHORIZER)
    )
    try:
        broker.start(timeout=90.0)
    except BrokerStartError as exc:
        pytest.fail(f"could not start {broker_kind} with an authorizer: {exc}", pytrace=False)
    yield broker
    broker.stop(timeout=30.0)


def test_kafka_acls(
    authorizing_broker: BrokerProcess, tools: Kafka43Tools, unique_topic: Callable[[], str]
) -> None:
    acl_tools = Kafka43Tools(authorizing_broker.bootstrap, tools.log_dir)
    topic = unique_topic()
    acl = ("--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    added = acl_tools.ok("kafka-acls", "--add", *acl)
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`" in added.stdout, added.report()
    listed = acl_tools.ok("kafka-acls", "--list", "--topic", topic).stdout
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed, listed
    acl_tools.ok("kafka-acls", "--remove", "--force", *acl)
    listed = acl_tools.ok("kafka-acls", "--list", "--topic", topic).stdout
    assert "User:alice" not in listed, listed


def share_group_rows(tools: Kafka43Tools, group: str, *options: str) -> list[list[str]]:
    """The rows of ``kafka-share-groups --describe --group GROUP options`` about the group."""
    described = tools.ok("kafka-share-groups", "--describe", "--group", group, *options).stdout
    return [row for row in table(described.splitlines()) if row and row[0] == group]


def test_kafka_share_groups_and_console_share_consumer(
    tools: Kafka43Tools, bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    produce(bootstrap, topic, 10)
    values = [f"v{i}" for i in range(10)]
    group = f"tools-share-{uuid.uuid4().hex[:8]}"
    group_entity = ("--entity-type", "groups", "--entity-name", group)
    tools.ok(
        "kafka-configs",
        *group_entity,
        "--alter",
        "--add-config",
        "share.auto.offset.reset=earliest",
    )
    share_consumer = ("--topic", topic, "--group", group, "--timeout-ms", "60000")
    consumed = tools.ok("kafka-console-share-consumer", *share_consumer, "--max-messages", "10")
    assert consumed.lines() == values, consumed.report()

    assert group in tools.ok("kafka-share-groups", "--list").lines()
    listed = table(tools.ok("kafka-share-groups", "--list", "--state").lines())
    assert [group, "Empty"] in listed, listed
    state = share_group_rows(tools, group, "--state")
    assert len(state) == 1 and state[0][-2:] == ["Empty", "0"], state
    # Every record accepted: no lag, and START-OFFSET 0, the start offset written with the
    # acknowledgement of the batch, from before it moved past it.
    offsets = share_group_rows(tools, group)
    assert [row[1:5] for row in offsets] == [[topic, "0", "0", "0"]], offsets

    # A member, while a console share consumer runs.
    running = tools.start("kafka-console-share-consumer", "--topic", topic, "--group", group)
    try:
        wait_until(
            lambda: share_group_rows(tools, group, "--state")[0][-2:] == ["Stable", "1"],
            120.0,
            "the console share consumer's membership",
        )
        members = share_group_rows(tools, group, "--members")
        assert len(members) == 1, members
        _, member_id, host, client_id, partitions, assignment = members[0]
        assert len(member_id) == 22 and host == "/127.0.0.1", members
        assert (client_id, partitions, assignment) == ("console-share-consumer", "1", f"{topic}:0")
    finally:
        running.terminate()
        running.communicate(timeout=60)
    wait_until(
        lambda: share_group_rows(tools, group, "--state")[0][-2:] == ["Empty", "0"],
        120.0,
        "the member gone",
    )

    reset = ("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    for mode in ("--dry-run", "--execute"):
        rows = table(tools.ok("kafka-share-groups", *reset, mode).lines())
        assert [group, topic, "0", "0"] in rows, rows
    offsets = share_group_rows(tools, group, "--offsets", "--verbose")
    assert [row[1:] for row in offsets] == [[topic, "0", "0", "0", "10"]], offsets
    released = tools.ok(
        "kafka-console-share-consumer", *share_consumer, "--max-messages", "3", "--release"
    )
    assert released.lines() == values[:3], released.report()

    deleted_offsets = tools.ok(
        "kafka-share-groups", "--delete-offsets", "--group", group, "--topic", topic
    )
    assert [topic, "Successful"] in table(deleted_offsets.lines()), deleted_offsets.report()
    no_offsets = tools.ok("kafka-share-groups", "--describe", "--group", group).stdout
    assert f"Share group '{group}' has no offset information." in no_offsets

    deleted = tools.ok("kafka-share-groups", "--delete", "--group", group)
    assert f"Deletion of requested share groups ('{group}') was successful." in deleted.stdout
    assert group not in tools.ok("kafka-share-groups", "--list").lines()
    missing = tools.run("kafka-share-groups", "--describe", "--group", group)
    output = missing.stdout + missing.stderr
    assert f"GroupIdNotFoundException: Group {group} not found." in output, missing.report()
