"""Share groups (KIP-932) with the project's own Python share consumer
(kbroker.share_consumer) and, mixed in, Kafka 4.3's Java KafkaShareConsumer: on kbroker and
on Kafka 4.3 (Kafka 3.9 has no share groups).

- Four Python consumers of one share group on a one-partition topic of 10,000 records all
  get records, no record is delivered to two of them, and every record is acknowledged
  exactly once (the acknowledgement callbacks' successes, counted per offset).
- RELEASE delivers a record again with the next delivery count, REJECT archives it, and a
  record released at the group's delivery count limit is archived.
- A mixed group, one Java consumer and two Python consumers: together they acknowledge
  every record once, each side some.
- ``kbroker console-share-consumer`` and ``kbroker share-groups`` (list, describe, reset,
  delete) on the same group.

Every group first gets ``share.auto.offset.reset=earliest`` (IncrementalAlterConfigs on the
GROUP resource, type 32): Kafka 4.3 starts a share group at the latest offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from compat_tests.java_programs import JAVA_CLIENT_43, JavaPrograms
from compat_tests.support import require
from kbroker.cli import build_parser
from kbroker.client import KafkaClient, TopicPartition, parse_address
from kbroker.share_consumer import AcknowledgeType, ShareConsumer, ShareRecord
from wire.api_keys import ApiKey
from wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from wire.messages.share_group_describe_request import ShareGroupDescribeRequest

GROUP_RESOURCE = 32
SET = 0
SHARE_SOURCES = Path(__file__).resolve().parent / "jvm_share"


# Kafka 3.9 has no share groups (KIP-932 is production-ready from 4.1): not one of the columns.
SHARE_BROKERS = ("kbroker", "kafka43", "external")

pytestmark = pytest.mark.broker_kinds(*SHARE_BROKERS)


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    async with KafkaClient([parse_address(bootstrap)]) as client:
        connection = await client.any_connection()
        request = IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=GROUP_RESOURCE,
                    resource_name=group,
                    configs=[
                        AlterableConfig(name=k, config_operation=SET, value=v)
                        for k, v in configs.items()
                    ],
                )
            ]
        )
        response, _ = await connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
        assert response.responses[0].error_code == 0, response.responses[0].error_message


async def group_members(bootstrap: str, group: str) -> int:
    """Members of the group with a partition assigned."""
    async with KafkaClient([parse_address(bootstrap)]) as client:

        async def attempt(connection: object) -> int:
            response, _ = await connection.request(  # type: ignore[attr-defined]
                ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(group_ids=[group])
            )
            return sum(1 for m in response.groups[0].members if m.assignment.topic_partitions)

        return await client.at_coordinator(group, attempt)


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        producer.produce(topic, f"r{i}".encode())
    assert producer.flush(60) == 0


@pytest.fixture
def share_group(bootstrap: str) -> Callable[..., str]:
    def make(**configs: str) -> str:
        group = f"share-{uuid.uuid4().hex[:10]}"
        run(set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest", **configs}))
        return group

    return make


class Tally:
    """What a set of consumers acknowledged successfully, per offset, and who got what."""

    def __init__(self) -> None:
        self.accepted: Counter[int] = Counter()
        self.failed: list[object] = []
        self.delivered: dict[str, list[ShareRecord]] = {}

    def callback(self, offsets: dict[TopicPartition, set[int]], error: object) -> None:
        if error is not None:
            self.failed.append(error)
            return
        for partition_offsets in offsets.values():
            self.accepted.update(partition_offsets)


async def consume_until_idle(
    consumer: ShareConsumer, tally: Tally, name: str, idle: float, deadline: float
) -> None:
    """Poll, accept everything, until ``idle`` seconds pass without a record."""
    loop = asyncio.get_running_loop()
    last = loop.time()
    got = tally.delivered.setdefault(name, [])
    while loop.time() - last < idle and loop.time() < deadline:
        records = await consumer.poll(0.5)
        for record in records:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)
        if records:
            got.extend(records)
            last = loop.time()
    await consumer.commit_sync()


async def wait_for_members(bootstrap: str, group: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while await group_members(bootstrap, group) < count:
        assert time.monotonic() < deadline, f"{count} members never joined {group}"
        await asyncio.sleep(0.2)


def python_consumer(bootstrap: str, group: str, tally: Tally) -> ShareConsumer:
    return ShareConsumer(
        bootstrap,
        group,
        acknowledgement_mode="explicit",
        acquire_mode="record_limit",
        max_poll_records=100,
        acknowledgement_commit_callback=tally.callback,
    )


def test_four_python_consumers_acknowledge_10000_records_once(
    bootstrap: str, create_topic: Callable[..., str], share_group: Callable[..., str]
) -> None:
    topic = create_topic(1)
    group = share_group()
    produce(bootstrap, topic, 10_000)
    tally = Tally()

    async def scenario() -> None:
        consumers = [python_consumer(bootstrap, group, tally) for _ in range(4)]
        for c in consumers:
            c.subscribe([topic])
        # All four members hold the partition before any fetches: then all get records.
        await wait_for_members(bootstrap, group, 4, timeout=60)
        deadline = asyncio.get_running_loop().time() + 120
        await asyncio.gather(
            *(
                consume_until_idle(c, tally, f"c{i}", idle=3.0, deadline=deadline)
                for i, c in enumerate(consumers)
            )
        )
        for c in consumers:
            await c.close()

    run(scenario())
    assert tally.failed == []
    assert set(tally.accepted) == set(range(10_000))
    assert set(tally.accepted.values()) == {1}, "a record was acknowledged twice"
    per_consumer = {name: len(records) for name, records in tally.delivered.items()}
    assert all(n > 0 for n in per_consumer.values()), per_consumer
    # Nothing delivered twice: no lock expired, no record went to two members.
    deliveries = Counter(r.offset for rs in tally.delivered.values() for r in rs)
    assert sum(deliveries.values()) == 10_000
    assert {r.delivery_count for rs in tally.delivered.values() for r in rs} == {1}


def test_release_redelivers_reject_archives_and_the_delivery_count_limit(
    bootstrap: str, create_topic: Callable[..., str], share_group: Callable[..., str]
) -> None:
    topic = create_topic(1)
    group = share_group(**{"share.delivery.count.limit": "2"})
    produce(bootstrap, topic, 3)

    async def scenario() -> list[list[tuple[int, int]]]:
        seen: list[list[tuple[int, int]]] = []
        async with ShareConsumer(bootstrap, group, acknowledgement_mode="explicit") as c:
            c.subscribe([topic])
            records: list[ShareRecord] = []
            deadline = time.monotonic() + 60
            while len(records) < 3 and time.monotonic() < deadline:
                records += await c.poll(1.0)
            seen.append([(r.offset, r.delivery_count) for r in records])
            c.acknowledge(records[0], AcknowledgeType.ACCEPT)
            c.acknowledge(records[1], AcknowledgeType.RELEASE)
            c.acknowledge(records[2], AcknowledgeType.REJECT)
            assert await c.commit_sync() == {(topic, 0): None}
            again = await c.poll(10.0)
            seen.append([(r.offset, r.delivery_count) for r in again])
            for r in again:
                c.acknowledge(r, AcknowledgeType.RELEASE)
            assert await c.commit_sync() == {(topic, 0): None}
            seen.append([(r.offset, r.delivery_count) for r in await c.poll(2.0)])
        return seen

    first, second, third = run(scenario())  # type: ignore[misc]
    assert first == [(0, 1), (1, 1), (2, 1)]
    # Released: back at once, second delivery; rejected: never again.
    assert second == [(1, 2)]
    # Released at the limit of two deliveries: archived.
    assert third == []


@pytest.fixture(scope="module")
def java_share(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    """ShareScenario.java compiled against Kafka 4.3's client (3.9's has no share consumer)."""
    return JavaPrograms.compile(
        tmp_path_factory.mktemp("java-share"), JAVA_CLIENT_43, sources=SHARE_SOURCES
    )


@pytest.fixture
def java_process(
    java_share: JavaPrograms, tmp_path: Path
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start a Java program writing to tmp_path/java.out and java.err; killed at the end."""
    started: list[subprocess.Popen[str]] = []
    with open(tmp_path / "java.out", "w") as out, open(tmp_path / "java.err", "w") as err:

        def start(*args: str) -> subprocess.Popen[str]:
            process = java_share.start("ShareScenario", *args, stdout=out, stderr=err)
            started.append(process)
            return process

        yield start
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_mixed_java_and_python_share_consumers(
    bootstrap: str,
    create_topic: Callable[..., str],
    share_group: Callable[..., str],
    java_process: Callable[..., subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    require(JAVA_CLIENT_43.clients_jar.is_file(), "Kafka 4.3's Java client is missing")
    topic = create_topic(1)
    group = share_group()
    java = java_process(bootstrap, group, topic, "50", "4000")
    tally = Tally()

    async def scenario() -> None:
        consumers = [python_consumer(bootstrap, group, tally) for _ in range(2)]
        for c in consumers:
            c.subscribe([topic])
        await wait_for_members(bootstrap, group, 3, timeout=60)
        # Records arrive while all three members fetch.
        producing = asyncio.create_task(asyncio.to_thread(produce, bootstrap, topic, 2_000))
        deadline = asyncio.get_running_loop().time() + 120
        await asyncio.gather(
            *(
                consume_until_idle(c, tally, f"py{i}", idle=4.0, deadline=deadline)
                for i, c in enumerate(consumers)
            )
        )
        await producing
        for c in consumers:
            await c.close()

    run(scenario())
    java.wait(timeout=120)
    out = (tmp_path / "java.out").read_text()
    assert java.returncode == 0, (tmp_path / "java.err").read_text()[-4000:]
    java_acked = [int(line.split()[1]) for line in out.splitlines() if line.startswith("acked ")]
    python_acked = list(tally.accepted.elements())
    assert tally.failed == []
    assert java_acked and python_acked, (len(java_acked), len(python_acked))
    together = Counter(java_acked) + Counter(python_acked)
    assert set(together) == set(range(2_000))
    assert set(together.values()) == {1}


@dataclass(frozen=True)
class CliRun:
    returncode: int
    stdout: str
    stderr: str


def kbroker_cli(*args: str) -> CliRun:
    """A ``kbroker`` command run in this process (each a fresh interpreter would spend
    seconds importing)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        parsed = build_parser().parse_args(list(args))
        code = parsed.func(parsed)
    return CliRun(code, out.getvalue(), err.getvalue())


def test_console_share_consumer_and_share_groups_commands(
    bootstrap: str, create_topic: Callable[..., str], share_group: Callable[..., str]
) -> None:
    topic = create_topic(1)
    group = share_group()
    produce(bootstrap, topic, 10)
    common = ("--bootstrap-server", bootstrap)
    consumed = kbroker_cli(
        "console-share-consumer", *common, "--group", group, "--topic", topic,
        "--max-messages", "6", "--reject-every", "3", "--print-delivery-count",
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [f"delivery=1 r{i}" for i in range(6)]
    assert "Processed a total of 6 messages" in consumed.stderr
    # 0-5 acknowledged (2 and 5 rejected); what was acquired past 5 went back at close.
    described = kbroker_cli("share-groups", "describe", group, *common, "--json")
    assert described.returncode == 0, described.stderr
    [row] = json.loads(described.stdout)
    assert (row["topic"], row["partition"], row["start_offset"], row["lag"]) == (topic, 0, 6, 4)
    listed = kbroker_cli("share-groups", "list", *common)
    assert group in listed.stdout.split()
    members = kbroker_cli("share-groups", "describe", group, "--members", *common)
    assert members.stdout.strip() == f"Share group '{group}' has no active members."
    reset = kbroker_cli(
        "share-groups", "reset-offsets", group, "--to-earliest", "--all-topics", "--execute",
        *common,
    )  # fmt: skip
    assert reset.returncode == 0, reset.stderr
    again = kbroker_cli(
        "console-share-consumer", *common, "--group", group, "--topic", topic,
        "--timeout-ms", "3000", "--print-offset",
    )  # fmt: skip
    assert again.stdout.splitlines() == [f"partition=0 offset={i} r{i}" for i in range(10)]
    deleted = kbroker_cli("share-groups", "delete", group, *common)
    assert deleted.stdout.strip() == f"Deletion of requested share group '{group}' was successful."
    assert group not in kbroker_cli("share-groups", "list", *common).stdout.split()
