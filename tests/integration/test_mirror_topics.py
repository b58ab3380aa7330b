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
import contextlib
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from compat_tests.broker_process import BrokerProcess, free_port
from compat_tests.kafka_process import KRaftKafkaProcess, kafka43_available
from compat_tests.support import require
from kbroker.client import KafkaClient, parse_address
from tests.integration.mirror_support import (
    DEADLINE_SECONDS,
    CuttableLink,
    assert_identical,
    consume_all,
    create_topic,
    end_offsets,
    mirrors,
    produce_error_message,
    produce_plain,
    produce_transactions,
    raw_batches,
    wait_caught_up,
)
from tests.security.secure_broker import start_secure_broker

pytestmark = pytest.mark.timeout(240)


def metrics_of(broker: BrokerProcess) -> str:
    return f"{broker.host}:{broker.overrides['metrics.port']}"


@pytest.fixture
def destination(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path / "destination",
        # The links' secrets are stored encrypted with it (kbroker/mirror/secrets.py).
        overrides={"metrics.port": str(free_port()), "password.encoder.secret": "mirror-tests"},
    )
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


def scrape(metrics_address: str) -> str:
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=30) as answer:
        return answer.read().decode()


def check_mirror(source: str, mirror: str, metrics_address: str, topic: str) -> None:
    """The whole story on one topic: plain and transactional data mirrored identically,
    read_committed hides the aborted records, lag on the metrics endpoint and in describe,
    pause and resume, Produce and local transactions refused, promote, Produce accepted."""
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

    metrics = scrape(metrics_address)
    for p in range(2):
        labels = f'topic="{topic}",partition="{p}"'
        assert f"kbroker_mirror_lag{{{labels}}} 0" in metrics
        assert f"kbroker_mirror_lag_ms{{{labels}}} 0" in metrics
        assert f'kbroker_mirror_state{{{labels},state="fetching"}} 1' in metrics

    # Paused: what the source receives meanwhile stays there until resume.
    paused = mirrors("pause", "--bootstrap-server", mirror, "--topic", topic)
    assert paused.returncode == 0, paused.stderr
    paused_state = f'kbroker_mirror_state{{topic="{topic}",partition="0",state="paused"}} 1'
    deadline = time.monotonic() + DEADLINE_SECONDS
    while paused_state not in scrape(metrics_address):
        assert time.monotonic() < deadline, "the fetchers never paused"
        time.sleep(0.2)
    produce_plain(source, topic, ["while-paused"] * 10)
    assert end_offsets(mirror, topic, 2) == ends
    resumed = mirrors("resume", "--bootstrap-server", mirror, "--topic", topic)
    assert resumed.returncode == 0, resumed.stderr
    ends = wait_caught_up(source, mirror, topic, 2)

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

    # Nor may a local transaction add the mirror's partitions: its marker would take an
    # offset of the source's.
    transactional = Producer({"bootstrap.servers": mirror, "transactional.id": "local-txn"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(topic, b"local", partition=0)
    with pytest.raises(KafkaException):
        transactional.commit_transaction(30)
    # librdkafka takes the refusal as fatal: the abort fails as well, and writes nothing.
    with contextlib.suppress(KafkaException):
        transactional.abort_transaction(30)
    assert end_offsets(mirror, topic, 2) == ends

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


def test_new_source_partitions_and_configs_are_followed(
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
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin.incremental_alter_configs(
        [
            ConfigResource(
                ConfigResource.Type.TOPIC,
                topic,
                incremental_configs=[
                    ConfigEntry(
                        "retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET
                    )
                ],
            )
        ]
    )[resource].result(timeout=30)
    producer = Producer({"bootstrap.servers": kbroker_source.bootstrap, "acks": "all"})
    for partition in range(3):
        for i in range(20):
            producer.produce(topic, b"%d-%d" % (partition, i), partition=partition)
    assert producer.flush(30) == 0
    wait_caught_up(kbroker_source.bootstrap, destination.bootstrap, topic, 3)
    assert_identical(kbroker_source.bootstrap, destination.bootstrap, topic, 3)
    mirror_admin = AdminClient({"bootstrap.servers": destination.bootstrap})
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (
        mirror_admin.describe_configs([resource])[resource].result(timeout=30)["retention.ms"].value
        != "3600000"
    ):
        assert time.monotonic() < deadline, "the source's retention.ms never reached the mirror"
        time.sleep(0.2)


def test_secured_sources_over_sasl_plain_and_mutual_tls(
    tmp_path: Path, destination: BrokerProcess
) -> None:
    """The link's client properties (``--source-config``, as Kafka clients read them) reach
    the source through the client core: SASL PLAIN with a JAAS line, and mutual TLS; the
    JAAS line is kept as a sensitive config, stored encrypted."""
    source = start_secure_broker(tmp_path / "secure-source")
    try:
        plain = source.java_settings("sasl_plaintext_plain")
        mtls = source.client_settings("mtls")
        for topic, settings in (("via-plain", plain), ("via-mtls", mtls)):
            create_topic(source.process.bootstrap, topic, 1)
            produce_plain(source.process.bootstrap, topic, [f"{topic}-{i}" for i in range(50)])
            properties = tmp_path / f"{topic}.properties"
            properties.write_text(
                "".join(f"{k}={v}\n" for k, v in settings.items() if k != "bootstrap.servers")
            )
            created = mirrors(
                "create",
                "--bootstrap-server",
                destination.bootstrap,
                "--source-bootstrap",
                settings["bootstrap.servers"],
                "--source-config",
                str(properties),
                "--topic",
                topic,
                "--link",
                topic,
            )
            assert created.returncode == 0, created.stderr
        # A link follows one source: another source needs another link name.
        again = mirrors(
            "create",
            "--bootstrap-server",
            destination.bootstrap,
            "--source-bootstrap",
            source.process.bootstrap,
            "--topic",
            "via-plain",
            "--link",
            "via-mtls",
        )
        assert again.returncode != 0 and "link 'via-mtls' follows" in again.stderr
        for topic in ("via-plain", "via-mtls"):
            wait_caught_up(source.process.bootstrap, destination.bootstrap, topic, 1)
            assert_identical(source.process.bootstrap, destination.bootstrap, topic, 1)
        admin = AdminClient({"bootstrap.servers": destination.bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "via-plain")
        entries = admin.describe_configs([resource])[resource].result(timeout=30)
        jaas = entries["kbroker.mirror.source.config.sasl.jaas.config"]
        assert jaas.is_sensitive and jaas.value is None
        assert entries["kbroker.mirror.source.config.sasl.mechanism"].value == "PLAIN"
        # Encrypted in the metadata store, topic and link record alike.
        stored = (tmp_path / "destination" / "logs" / "__kbroker_metadata.json").read_text()
        assert plain["sasl.jaas.config"] not in stored
        assert stored.count("encryptedPassword:") == 2
    finally:
        source.process.stop()


def test_link_cut_and_healed_while_mirroring(tmp_path: Path, destination: BrokerProcess) -> None:
    """The link (only the link: the producer reaches the source on another listener) is cut
    mid-copy, every connection reset and new ones refused: the fetchers back off, and after
    the cut heals the mirror catches up with nothing lost, repeated or reordered."""
    direct, external = free_port(), free_port()
    link = CuttableLink(("127.0.0.1", external))
    source = BrokerProcess(
        tmp_path / "source",
        port=direct,
        overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{direct},EXTERNAL://127.0.0.1:{external}",
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{direct},EXTERNAL://127.0.0.1:{link.port}"
            ),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
        },
    )
    source.start()
    try:
        topic = "cut"
        create_topic(source.bootstrap, topic, 1)
        created = mirrors(
            "create",
            "--bootstrap-server",
            destination.bootstrap,
            "--source-bootstrap",
            f"127.0.0.1:{link.port}",
            "--topic",
            topic,
        )
        assert created.returncode == 0, created.stderr
        total = 3000
        producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True})
        for i in range(total // 3):
            producer.produce(topic, b"%d" % i)
        assert producer.flush(30) == 0
        wait_caught_up(source.bootstrap, destination.bootstrap, topic, 1)

        link.cut()
        for i in range(total // 3, total):
            producer.produce(topic, b"%d" % i)
        assert producer.flush(30) == 0
        backing_off = f'kbroker_mirror_state{{topic="{topic}",partition="0",state="backing-off"}} 1'
        deadline = time.monotonic() + DEADLINE_SECONDS
        while backing_off not in scrape(metrics_of(destination)):
            assert time.monotonic() < deadline, "the cut was never noticed"
            time.sleep(0.1)
        assert end_offsets(destination.bootstrap, topic, 1)[0] < total
        link.heal()

        wait_caught_up(source.bootstrap, destination.bootstrap, topic, 1)
        assert_identical(source.bootstrap, destination.bootstrap, topic, 1)
        seen = consume_all(destination.bootstrap, topic, 1, "read_uncommitted")
        assert seen == [str(i) for i in range(total)]
    finally:
        source.stop()
        link.close()


def test_topic_regex_link_mirrors_source_topics_created_later(
    tmp_path: Path, kbroker_source: BrokerProcess, destination: BrokerProcess
) -> None:
    create_topic(kbroker_source.bootstrap, "orders-eu", 1)
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
        "--topic-regex",
        "orders-.*",
        "--link",
        "orders",
    )
    assert created.returncode == 0, created.stderr
    listed = mirrors("list", "--bootstrap-server", destination.bootstrap, "--json")
    assert listed.returncode == 0, listed.stderr
    (link,) = json.loads(listed.stdout)["links"]
    assert (link["link"], link["topic_regex"]) == ("orders", "orders-.*")
    # Created at the source after the link: mirrored, with its partition count; a topic the
    # regex does not match is not.
    create_topic(kbroker_source.bootstrap, "orders-us", 2)
    create_topic(kbroker_source.bootstrap, "payments", 1)
    produce_plain(kbroker_source.bootstrap, "orders-us", [f"us-{i}" for i in range(50)])
    wait_caught_up(kbroker_source.bootstrap, destination.bootstrap, "orders-us", 2)
    assert_identical(kbroker_source.bootstrap, destination.bootstrap, "orders-us", 2)
    # The link is kept in the metadata, not in the CLI: after a restart of the destination
    # it still follows the regex.
    destination.restart()
    create_topic(kbroker_source.bootstrap, "orders-apac", 1)
    produce_plain(kbroker_source.bootstrap, "orders-apac", ["apac-0", "apac-1"])
    wait_caught_up(kbroker_source.bootstrap, destination.bootstrap, "orders-apac", 1)
    topics = AdminClient({"bootstrap.servers": destination.bootstrap}).list_topics(timeout=30)
    assert {"orders-eu", "orders-us", "orders-apac"} <= set(topics.topics)
    assert "payments" not in topics.topics
    listed = mirrors("list", "--bootstrap-server", destination.bootstrap)
    assert "orders-apac" in listed.stdout and "orders-.*" in listed.stdout
    deleted = mirrors(
        "delete-link", "--bootstrap-server", destination.bootstrap, "--link", "orders"
    )
    assert deleted.returncode == 0, deleted.stderr
    listed = mirrors("list", "--bootstrap-server", destination.bootstrap, "--json")
    assert json.loads(listed.stdout)["links"] == []


def _copy_seconds(source: str, destination: str, topic: str, values: list[str]) -> float:
    started = time.monotonic()
    # Batches of 16 KB: the cap paces fetches, and a fetch answers at least one batch.
    produce_plain(source, topic, values, batch_size=16384)
    wait_caught_up(source, destination, topic, 1)
    return time.monotonic() - started


def test_a_link_fetch_cap_holds_its_rate_and_changes_at_once(
    kbroker_source: BrokerProcess, destination: BrokerProcess
) -> None:
    topic = "capped"
    create_topic(kbroker_source.bootstrap, topic, 1)
    source, mirror = kbroker_source.bootstrap, destination.bootstrap
    created = mirrors(
        "create", "--bootstrap-server", mirror, "--source-bootstrap", source, "--topic", topic
    )
    assert created.returncode == 0, created.stderr
    cap = 200_000
    capped = mirrors(
        "throttle",
        "--bootstrap-server",
        mirror,
        "--link",
        "default",
        "--fetch-max-bytes-per-second",
        str(cap),
    )
    assert capped.returncode == 0, capped.stderr
    values = [f"{i:04d}" + "x" * 996 for i in range(800)]
    seconds = _copy_seconds(source, mirror, topic, values)
    copied = sum(len(b) for b in raw_batches(source, topic, 0))
    # The first fetch (a second's worth) goes at once; the rest at the cap.
    least = (copied - cap) / cap
    assert least * 0.9 <= seconds <= least * 2 + 5, (copied, seconds)
    lifted = mirrors(
        "throttle",
        "--bootstrap-server",
        mirror,
        "--link",
        "default",
        "--fetch-max-bytes-per-second",
        "0",
    )
    assert lifted.returncode == 0, lifted.stderr
    assert _copy_seconds(source, mirror, topic, values) < least * 0.9
    assert_identical(source, mirror, topic, 1)
