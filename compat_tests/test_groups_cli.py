"""``kbroker groups`` against a consumer group (KIP-848) of confluent-kafka consumers with
``group.protocol=consumer``, compared with what Kafka 4.3's kafka-consumer-groups.sh says of
the same group on the same broker: the CLI speaks only the protocol, so it must describe a
Kafka 4.3 group as Kafka's tool does, and a kbroker group the same way.

Kafka 3.9 does not serve the consumer protocol by default, so these tests run against kbroker
and Kafka 4.3 only.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from compat_tests.broker_process import REPO_ROOT
from compat_tests.kafka43_tools import Kafka43Tools, kafka43_tools
from compat_tests.support import wait_until
from kbroker.cli.groups import format_partitions
from kbroker.cli.ops import groups as ops_groups
from kbroker.client import KafkaClient

CONSUMER_PROTOCOL_BROKERS = ("kbroker", "kafka43", "external")
# Records per partition, and how many of them each consumer commits (then it reads on
# without committing, so the committed offsets and the lag stay put while the tools look).
RECORDS_PER_PARTITION = 5
COMMITS = 3

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.broker_kinds(*CONSUMER_PROTOCOL_BROKERS),
]


@pytest.fixture(scope="session")
def tools(
    broker_kind: str, bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Kafka43Tools:
    return kafka43_tools(bootstrap, tmp_path_factory.mktemp(f"group-tools-{broker_kind}"))


def kbroker_groups(bootstrap: str, *args: str) -> Any:
    """``kbroker groups ARGS --json`` as its own process; the parsed output."""
    result = subprocess.run(
        [sys.executable, "-m", "kbroker", "groups", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def consume(
    bootstrap: str, group: str, instance: str, topics: list[str], stop: threading.Event
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "group.instance.id": instance,
            "client.id": instance,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(topics)
    committed = 0
    try:
        while not stop.is_set():
            message = consumer.poll(0.2)
            if message is not None and not message.error() and committed < COMMITS:
                consumer.commit(message, asynchronous=False)
                committed += 1
    finally:
        consumer.close()


@pytest.fixture
def running_group(
    bootstrap: str, create_topic: Callable[..., str]
) -> Iterator[tuple[str, str, str]]:
    """A consumer group of two static members: one subscribed to a topic of 4 partitions by
    name, one to a topic of 2 partitions by a regular expression. Yields (group, named topic,
    regex topic) while both consume."""
    named, matched = create_topic(4), create_topic(2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for topic, partitions in ((named, 4), (matched, 2)):
        for partition in range(partitions):
            for _ in range(RECORDS_PER_PARTITION):
                producer.produce(topic, value=b"v", partition=partition)
    assert producer.flush(30) == 0
    group = f"cli-{uuid.uuid4().hex[:10]}"
    stop = threading.Event()
    threads = [
        threading.Thread(target=consume, args=(bootstrap, group, "by-name", [named], stop)),
        threading.Thread(
            target=consume, args=(bootstrap, group, "by-regex", [f"^{matched}"], stop)
        ),
    ]
    for thread in threads:
        thread.start()
    try:
        yield group, named, matched
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)


def settled(bootstrap: str, group: str) -> bool:
    """Stable, both members at the assignment epoch with what the target gives them."""

    async def describe() -> ops_groups.GroupDescription:
        host, port = bootstrap.rsplit(":", 1)
        async with KafkaClient([(host, int(port))]) as client:
            return await ops_groups.describe_any_group(client, group)

    try:
        described = asyncio.run(describe())
    except Exception:  # the group is not there yet, or its coordinator is loading
        return False
    return (
        described.state == "Stable"
        and len(described.members) == 2
        and all(
            m.assignment and m.assignment == m.target and m.epoch == described.assignment_epoch
            for m in described.members
        )
    )


def test_describe_a_consumer_group_as_kafka_tools_do(
    bootstrap: str, tools: Kafka43Tools, running_group: tuple[str, str, str]
) -> None:
    group, named, matched = running_group
    wait_until(lambda: settled(bootstrap, group), 120, f"group {group} to settle")

    listed = kbroker_groups(bootstrap, "list", "--type", "consumer", "--state", "STABLE", "--json")
    assert {"group": group, "type": "consumer", "protocol_type": "consumer", "state": "Stable"} in (
        listed
    )
    ours = kbroker_groups(bootstrap, "describe", group, "--json")
    assert (ours["type"], ours["state"], ours["assignor"]) == ("consumer", "Stable", "uniform")
    members = {m["instance_id"]: m for m in ours["members"]}
    assert members["by-name"]["subscribed_topics"] == [named]
    assert members["by-regex"]["subscribed_topics"] == []
    assert matched in (members["by-regex"]["subscribed_topic_regex"] or "")

    state = tools.ok(
        "kafka-consumer-groups", "--describe", "--group", group, "--state", "--verbose"
    )
    # GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS
    [row] = [line.split() for line in state.lines()[1:]]
    assert row[3:] == [
        ours["assignor"],
        ours["state"],
        str(ours["group_epoch"]),
        str(ours["assignment_epoch"]),
        "2",
    ]

    verbose = tools.ok(
        "kafka-consumer-groups", "--describe", "--group", group, "--members", "--verbose"
    )
    # GROUP CONSUMER-ID GROUP-INSTANCE-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH
    # CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT
    theirs = {cells[1]: cells for cells in (line.split() for line in verbose.lines()[1:])}
    assert set(theirs) == {m["member_id"] for m in ours["members"]}
    for member in ours["members"]:
        assigned = [(p["topic"], p["partition"]) for p in member["assigned"]]
        target = [(p["topic"], p["partition"]) for p in member["target"]]
        assert theirs[member["member_id"]][2:] == [
            member["instance_id"],
            member["host"],
            member["client_id"],
            str(len(assigned)),
            str(member["member_epoch"]),
            format_partitions(assigned),
            str(ours["assignment_epoch"]),
            format_partitions(target),
        ]

    offsets = tools.ok("kafka-consumer-groups", "--describe", "--group", group)
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    their_rows = sorted(
        (cells[1], int(cells[2]), cells[3], cells[4], cells[5], cells[6])
        for cells in (line.split() for line in offsets.lines()[1:])
    )
    assert their_rows == sorted(
        (
            p["topic"],
            p["partition"],
            "-" if p["committed_offset"] is None else str(p["committed_offset"]),
            str(p["log_end_offset"]),
            "-" if p["lag"] is None else str(p["lag"]),
            p["member_id"],
        )
        for p in ours["partitions"]
    )
    assert sum(p["committed_offset"] or 0 for p in ours["partitions"]) == 2 * COMMITS
    assert len(their_rows) == 6
