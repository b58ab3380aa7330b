"""Mirror topics between two real broker processes: a source (kbroker, or Apache Kafka 4.3)
and a kbroker destination, driven by ``kbroker mirrors`` as an operator runs it.

The mirror must hold the source's record batches byte for byte at the same offsets
(transactional batches, their markers and aborted records included), hide aborted records
from read_committed consumers, refuse local producers until promoted, and survive a kill -9
and restart of the source or of itself without losing or repeating a record (the link is
persisted with the topic, and the destination resumes from its own log end).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from compat_tests.broker_process import REPO_ROOT, BrokerProcess, free_port
from compat_tests.kafka_process import KRaftKafkaProcess, kafka43_available
from compat_tests.support import require
from kbroker.cli.ops.admin import OpsError, leaders, produce
from kbroker.client import LATEST, KafkaClient, parse_address
from wire.api_keys import ApiKey
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.fetch_response import FetchResponse
from wire.records.batch import iter_batches

pytestmark = pytest.mark.timeout(240)

DEADLINE_SECONDS = 90.0


def mirrors(*args: str) -> subprocess.CompletedProcess[str]:
    """``kbroker mirrors ...`` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "kbroker", "mirrors", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def produce_plain(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), key=b"%d" % i)
    assert producer.flush(30) == 0


def produce_transactions(bootstrap: str, topic: str) -> tuple[list[str], list[str]]:
    """A committed, an aborted and a committed transaction; returns (committed, aborted)
    values."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"mirror-{topic}", "linger.ms": 5}
    )
    producer.init_transactions(30)
    committed: list[str] = []
    aborted: list[str] = []
    for round_, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        values = [f"txn-{round_}-{i}" for i in range(20)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value.encode(), key=b"%d" % i)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
            committed += values
        else:
            producer.abort_transaction(30)
            aborted += values
    return committed, aborted


async def _raw_batches(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    """Every record batch of the partition, as the leader stores it (READ_UNCOMMITTED)."""
    async with KafkaClient([parse_address(bootstrap)]) as client:
        end = (await client.list_offsets([(topic, partition)], LATEST))[(topic, partition)]
        await client.metadata([topic])
        leader = client.cluster.leader((topic, partition))
        assert leader is not None
        connection = await client.node(leader.node_id)
        batches: list[bytes] = []
        offset = 0
        while offset < end:
            request = FetchRequest(
                max_wait_ms=100,
                min_bytes=1,
                topics=[
                    FetchTopic(
                        topic=topic,
                        partitions=[
                            FetchPartition(
                                partition=partition,
                                fetch_offset=offset,
                                partition_max_bytes=1 << 20,
                            )
                        ],
                    )
                ],
            )
            response, _ = await connection.request(ApiKey.FETCH, request, 12)
            assert isinstance(response, FetchResponse)
            data = bytes(response.responses[0].partitions[0].records or b"")
            assert response.responses[0].partitions[0].error_code == 0
            for pos, header in iter_batches(data):
                if pos + header.size <= len(data) and header.next_offset > offset:
                    batches.append(data[pos : pos + header.size])
                    offset = header.next_offset
        return batches


def raw_batches(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    return asyncio.run(_raw_batches(bootstrap, topic, partition))


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    async def ask() -> dict[int, int]:
        async with KafkaClient([parse_address(bootstrap)]) as client:
            found = await client.list_offsets([(topic, p) for p in range(partitions)], LATEST)
            return {p: found[(topic, p)] for p in range(partitions)}

    return asyncio.run(ask())


def wait_caught_up(source: str, mirror: str, topic: str, partitions: int) -> dict[int, int]:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        want = end_offsets(source, topic, partitions)
        try:
            have = end_offsets(mirror, topic, partitions)
        except Exception:
            have = {}
        if have == want:
            return want
        if time.monotonic() > deadline:
            raise AssertionError(f"mirror at {have}, source at {want}")
        time.sleep(0.2)


def consume_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[str]:
    ends = end_offsets(bootstrap, topic, partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[str] = []
    done: set[int] = {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + DEADLINE_SECONDS
    try:
        while len(done) < partitions and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition())
                    continue
                raise AssertionError(message.error())
            values.append(message.value().decode())
    finally:
        consumer.close()
    assert len(done) == partitions, "consumer did not reach the end of every partition"
    return values


def produce_error_message(bootstrap: str, topic: str) -> str:
    """The error message of a Produce (v8+ carries one, KIP-467) to partition 0."""

    async def send() -> str:
        async with KafkaClient([parse_address(bootstrap)]) as client:
            leader = (await leaders(client, topic))[0]
            try:
                await produce(client, topic, 0, leader, [(None, b"local", [])], acks=-1)
            except OpsError as exc:
                return str(exc)
            return ""

    return asyncio.run(send())


def assert_identical(source: str, mirror: str, topic: str, partitions: int) -> None:
    for p in range(partitions):
        theirs = raw_batches(source, topic, p)
        mine = raw_batches(mirror, topic, p)
        assert len(mine) == len(theirs), f"partition {p}: {len(mine)} vs {len(theirs)} batches"
        for i, (a, b) in enumerate(zip(theirs, mine, strict=True)):
            assert a == b, f"partition {p}, batch {i}: bytes differ"


def metrics_of(broker: BrokerProcess) -> str:
    return f"{broker.host}:{broker.overrides['metrics.port']}"


@pytest.fixture
def destination(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "destination", overrides={"metrics.port": str(free_port())})
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kbroker_source(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "source")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def check_mirror(source: str, mirror: str, metrics_address: str, topic: str) -> None:
    """The whole story on one topic: plain and transactional data mirrored identically,
    read_committed hides the aborted records, Produce refused, promote, Produce accepted."""
    create_topic(source, topic, 2)
    plain = [f"plain-{i}" for i in range(200)]
    produce_plain(source, topic, plain[:100])
    created = mirrors(
        "create", "--bootstrap-server", mirror, "--source-bootstrap", source, "--topic", topic
    )
    assert created.returncode == 0, created.stderr
    committed, aborted = produce_transactions(source, topic)
    produce_plain(source, topic, plain[100:])
    ends = wait_caught_up(source, mirror, topic, 2)
    assert_identical(source, mirror, topic, 2)

    seen = consume_all(mirror, topic, 2, "read_committed")
    assert sorted(seen) == sorted(plain + committed)
    assert not set(seen) & set(aborted)

    metrics = urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=30).read()
    for p in range(2):
        labels = f'topic="{topic}",partition="{p}"'
        assert f"kbroker_mirror_lag{{{labels}}} 0" in metrics.decode()
        assert f'kbroker_mirror_state{{{labels},state="fetching"}} 1' in metrics.decode()

    described = mirrors("describe", "--bootstrap-server", mirror, "--topic", topic, "--json")
    assert described.returncode == 0, described.stderr
    assert '"lag": 0' in described.stdout and '"lag": 1' not in described.stdout

    refused: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": mirror, "retries": 0})
    producer.produce(topic, b"local", partition=0, on_delivery=lambda e, m: refused.append(e))
    producer.flush(30)
    assert refused and refused[0] is not None
    assert refused[0].code() == KafkaError.INVALID_REQUEST, refused[0]
    assert "read-only mirror" in produce_error_message(mirror, topic)

    promoted = mirrors("promote", "--bootstrap-server", mirror, "--topic", topic)
    assert promoted.returncode == 0, promoted.stderr
    accepted: list[int] = []
    producer.produce(
        topic, b"local", partition=0, on_delivery=lambda e, m: accepted.append(m.offset())
    )
    producer.flush(30)
    assert accepted == [ends[0]]
    listed = mirrors("list", "--bootstrap-server", mirror)
    assert listed.returncode == 0, listed.stderr
    assert "promoted" in listed.stdout


def test_kbroker_to_kbroker(kbroker_source: BrokerProcess, destination: BrokerProcess) -> None:
    check_mirror(kbroker_source.bootstrap, destination.bootstrap, metrics_of(destination), "orders")


@pytest.mark.slow
def test_source_then_destination_killed_while_mirroring(
    kbroker_source: BrokerProcess, destination: BrokerProcess
) -> None:
    topic = "events"
    create_topic(kbroker_source.bootstrap, topic, 1)
    created = mirrors(
        "create",
        "--bootstrap-server",
        destination.bootstrap,
        "--source-bootstrap",
        kbroker_source.bootstrap,
        "--topic",
        topic,
    )
    assert created.returncode == 0, created.stderr
    total = 3000
    producer = Producer(
        {
            "bootstrap.servers": kbroker_source.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120000,
        }
    )
    failures: list[KafkaError] = []

    def produce() -> None:
        for i in range(total):
            producer.produce(
                topic, value=b"%d" % i, on_delivery=lambda e, m: e and failures.append(e)
            )
            if i % 100 == 0:
                producer.poll(0)
                time.sleep(0.02)
        producer.flush(120)

    writer = threading.Thread(target=produce)
    writer.start()
    for victim, copied in ((kbroker_source, total // 3), (destination, 2 * total // 3)):
        deadline = time.monotonic() + DEADLINE_SECONDS
        while end_offsets(destination.bootstrap, topic, 1)[0] < copied:
            assert time.monotonic() < deadline, f"mirror never reached {copied}"
            time.sleep(0.1)
        victim.kill()
        victim.start()
    writer.join(150)
    assert not writer.is_alive() and not failures, failures
    wait_caught_up(kbroker_source.bootstrap, destination.bootstrap, topic, 1)
    assert_identical(kbroker_source.bootstrap, destination.bootstrap, topic, 1)
    seen = consume_all(destination.bootstrap, topic, 1, "read_uncommitted")
    assert seen == [str(i) for i in range(total)]


@pytest.mark.slow
def test_kafka43_to_kbroker(tmp_path: Path, destination: BrokerProcess) -> None:
    require(kafka43_available(), "Apache Kafka 4.3 is missing from ../shared/kafka-4.3")
    source = KRaftKafkaProcess(tmp_path / "kafka43")
    source.start()
    try:
        check_mirror(source.bootstrap, destination.bootstrap, metrics_of(destination), "orders")
    finally:
        source.stop()


def consume_group(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    """``count`` records as member of ``group``, committing each one after processing it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    try:
        while len(values) < count:
            assert time.monotonic() < deadline, f"consumed {len(values)} of {count}"
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value().decode())
            consumer.commit(message, asynchronous=False)
    finally:
        consumer.close()
    return values


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    async def ask() -> dict[tuple[str, int], int]:
        async with KafkaClient([parse_address(bootstrap)]) as client:
            return {tp: offset for tp, (offset, _) in (await client.committed(group)).items()}

    return asyncio.run(ask())


@pytest.mark.slow
def test_group_fails_over_at_its_mirrored_offsets(
    kbroker_source: BrokerProcess, destination: BrokerProcess
) -> None:
    topic, group = "payments", "billing"
    create_topic(kbroker_source.bootstrap, topic, 2)
    values = [f"payment-{i}" for i in range(300)]
    produce_plain(kbroker_source.bootstrap, topic, values)
    created = mirrors(
        "create",
        "--bootstrap-server",
        destination.bootstrap,
        "--source-bootstrap",
        kbroker_source.bootstrap,
        "--topic",
        topic,
        "--group-filter",
        "bill.*",
    )
    assert created.returncode == 0, created.stderr
    before = consume_group(kbroker_source.bootstrap, topic, group, 120)
    at_source = committed_offsets(kbroker_source.bootstrap, group)
    wait_caught_up(kbroker_source.bootstrap, destination.bootstrap, topic, 2)
    deadline = time.monotonic() + DEADLINE_SECONDS
    while committed_offsets(destination.bootstrap, group) != at_source:
        assert time.monotonic() < deadline, "group offsets never mirrored"
        time.sleep(0.5)

    kbroker_source.stop()
    promoted = mirrors("promote", "--bootstrap-server", destination.bootstrap, "--topic", topic)
    assert promoted.returncode == 0, promoted.stderr
    after = consume_group(destination.bootstrap, topic, group, len(values) - len(before))
    # The same offsets on both sides: the group continues exactly where it committed.
    assert sorted(before + after) == sorted(values)


def test_new_source_partitions_are_followed(
    tmp_path: Path, kbroker_source: BrokerProcess, destination: BrokerProcess
) -> None:
    topic = "growing"
    create_topic(kbroker_source.bootstrap, topic, 1)
    client_config = tmp_path / "source.properties"
    client_config.write_text("metadata.max.age.ms=500\n")
    created = mirrors(
        "create",
        "--bootstrap-server",
        destination.bootstrap,
        "--source-bootstrap",
        kbroker_source.bootstrap,
        "--source-config",
        str(client_config),
        "--topic",
        topic,
    )
    assert created.returncode == 0, created.stderr
    admin = AdminClient({"bootstrap.servers": kbroker_source.bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": kbroker_source.bootstrap, "acks": "all"})
    for partition in range(3):
        for i in range(20):
            producer.produce(topic, b"%d-%d" % (partition, i), partition=partition)
    assert producer.flush(30) == 0
    wait_caught_up(kbroker_source.bootstrap, destination.bootstrap, topic, 3)
    assert_identical(kbroker_source.bootstrap, destination.bootstrap, topic, 3)
