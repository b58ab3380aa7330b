"""Every stock client through every secured listener of a real broker process: SASL_SSL with
SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN, mutual TLS. Each produces, consumes in a group
and uses its admin API; SCRAM users are created with AlterUserScramCredentials first.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.java_programs import JavaPrograms
from compat_tests.support import require
from tests.security.secure_broker import MODES, SecureBroker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
COUNT = 20


def _topic(mode: str, client: str) -> str:
    return f"sec-{client}-{mode}-{uuid.uuid4().hex[:6]}"


def _values() -> list[bytes]:
    return [f"v{i}".encode() for i in range(COUNT)]


@pytest.mark.parametrize("mode", [*MODES, "sasl_plaintext_oauthbearer"])
def test_confluent_kafka(secure: SecureBroker, mode: str) -> None:
    settings = secure.client_settings(mode)
    topic = _topic(mode, "confluent")
    admin = AdminClient(settings)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    assert topic in admin.list_topics(timeout=10).topics
    producer = Producer(settings)
    for value in _values():
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**settings, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(got) == sorted(_values())


def _kafka_python_settings(secure: SecureBroker, mode: str) -> dict[str, object]:
    rd = secure.client_settings(mode)
    out: dict[str, object] = {
        "bootstrap_servers": rd["bootstrap.servers"],
        "security_protocol": rd["security.protocol"],
    }
    if "sasl.mechanism" in rd:
        out["sasl_mechanism"] = rd["sasl.mechanism"]
        out["sasl_plain_username"] = rd["sasl.username"]
        out["sasl_plain_password"] = rd["sasl.password"]
    if "ssl.ca.location" in rd:
        out["ssl_cafile"] = rd["ssl.ca.location"]
    if mode == "mtls":
        out["ssl_certfile"] = rd["ssl.certificate.location"]
        out["ssl_keyfile"] = rd["ssl.key.location"]
    return out


@pytest.mark.parametrize("mode", MODES)
def test_kafka_python(secure: SecureBroker, mode: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic as KafkaNewTopic

    settings = _kafka_python_settings(secure, mode)
    topic = _topic(mode, "kafkapython")
    admin = KafkaAdminClient(**settings)
    admin.create_topics([KafkaNewTopic(topic, 2, 1)])
    assert topic in admin.list_topics()
    admin.close()
    producer = KafkaProducer(acks="all", **settings)
    for value in _values():
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
        **settings,
    )
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == COUNT:
            break
    consumer.commit()
    consumer.close()
    assert sorted(got) == sorted(_values())


@pytest.mark.parametrize("mode", MODES)
def test_aiokafka(secure: SecureBroker, mode: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioNewTopic

    # aiokafka takes kafka-python's names, but TLS as an ssl.SSLContext.
    settings = _kafka_python_settings(secure, mode)
    cafile = settings.pop("ssl_cafile", None)
    certfile, keyfile = settings.pop("ssl_certfile", None), settings.pop("ssl_keyfile", None)
    if cafile is not None:
        context = ssl.create_default_context(cafile=str(cafile))
        if certfile is not None:
            context.load_cert_chain(str(certfile), str(keyfile))
        settings["ssl_context"] = context
    topic = _topic(mode, "aiokafka")

    async def run() -> list[bytes]:
        admin = AIOKafkaAdminClient(**settings)
        await admin.start()
        try:
            await admin.create_topics([AioNewTopic(topic, 2, 1)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        producer = AIOKafkaProducer(acks="all", **settings)
        await producer.start()
        try:
            for value in _values():
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **settings
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                while len(got) < COUNT:
                    batch = await consumer.getmany(timeout_ms=500)
                    got += [r.value for records in batch.values() for r in records]
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(run())) == sorted(_values())


@pytest.fixture(scope="module")
def kcat() -> str:
    path = shutil.which("kcat")
    require(path is not None, "kcat is not installed (apt-get install kcat)")
    assert path is not None
    return path


def _run_kcat(kcat: str, settings: dict[str, str], *args: str, stdin: bytes = b"") -> str:
    command = [kcat, *(x for k, v in settings.items() for x in ("-X", f"{k}={v}")), *args]
    proc = subprocess.run(command, input=stdin, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return proc.stdout.decode()


@pytest.mark.parametrize("mode", MODES)
def test_kcat(secure: SecureBroker, kcat: str, mode: str) -> None:
    settings = secure.client_settings(mode)
    topic = _topic(mode, "kcat")
    admin = AdminClient(settings)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    assert topic in _run_kcat(kcat, settings, "-L", "-t", topic)
    _run_kcat(kcat, settings, "-P", "-t", topic, stdin=b"\n".join(_values()) + b"\n")
    out = _run_kcat(kcat, settings, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert sorted(out.split()) == sorted(v.decode() for v in _values())
    # kcat's balanced consumer: a group, through the same listener.
    grouped = _run_kcat(
        kcat,
        {**settings, "auto.offset.reset": "earliest"},
        "-G",
        f"g-{topic}",
        topic,
        "-e",
        "-q",
        "-c",
        str(COUNT),
    )
    assert sorted(grouped.split()) == sorted(v.decode() for v in _values())


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    return JavaPrograms.compile(tmp_path_factory.mktemp("jvm"))


@pytest.mark.parametrize("mode", [*MODES, "sasl_plaintext_oauthbearer"])
def test_java_client(secure: SecureBroker, java: JavaPrograms, tmp_path: Path, mode: str) -> None:
    props = tmp_path / "client.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in secure.java_settings(mode).items()))
    topic = _topic(mode, "java")
    run = java.run("SecurityScenario", str(props), topic, f"g-{topic}")
    assert run.returncode == 0, run.report()
    assert run.passed == ["admin", "produce", "consume"]


def _command_config(secure: SecureBroker, path: Path) -> Path:
    java = secure.java_settings("sasl_ssl_scram")
    path.write_text("".join(f"{k}={v}\n" for k, v in java.items() if k != "bootstrap.servers"))
    return path


def test_kbroker_cli_over_sasl_ssl(secure: SecureBroker, tmp_path: Path) -> None:
    """kbroker's own tools with --command-config, as kafka-topics.sh takes it."""
    import sys

    config = _command_config(secure, tmp_path / "client.properties")
    bootstrap = secure.client_settings("sasl_ssl_scram")["bootstrap.servers"]
    topic = _topic("sasl_ssl_scram", "cli")

    def kbroker(*args: str, stdin: str = "") -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "kbroker", *args, "--bootstrap-server", bootstrap,
             "--command-config", str(config)],
            input=stdin, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    kbroker("topics", "create", "--topic", topic, "--partitions", "2")
    assert topic in kbroker("topics", "list")
    kbroker("console-producer", "--topic", topic, stdin="\n".join(v.decode() for v in _values()))
    out = kbroker(
        "console-consumer", "--topic", topic, "--from-beginning", "--group", f"g-{topic}",
        "--max-messages", str(COUNT),
    )  # fmt: skip
    assert sorted(out.split()) == sorted(v.decode() for v in _values())
    assert "alice" in kbroker("users", "list")


def test_data_client_over_sasl_ssl(secure: SecureBroker) -> None:
    """The Spark data source's blocking client, with the same properties."""
    from kbroker.client_core.security import security_config
    from kbroker.data_client import DataClient
    from wire.records.record import Record

    java = secure.java_settings("sasl_ssl_scram")
    topic = _topic("sasl_ssl_scram", "dataclient")
    with DataClient(java["bootstrap.servers"], security=security_config(java)) as client:
        client.create_topics({topic: 1})
        records = [Record(offset=0, timestamp=0, key=None, value=v) for v in _values()]
        base = client.produce((topic, 0), records)
        fetched = client.fetch((topic, 0), base)
    assert [r.value for r in fetched.records] == _values()


@pytest.mark.parametrize("mode", ["sasl_ssl_scram", "mtls"])
def test_large_fetch_responses_over_tls(secure: SecureBroker, mode: str) -> None:
    """Fetch responses whose file regions kbroker would send with sendfile on a plaintext
    listener (64 KiB and more) go through the TLS layer in pieces; asyncio's sendfile
    fallback used to stall the connection for good."""
    settings = secure.client_settings(mode)
    topic = _topic(mode, "large")
    admin = AdminClient(settings)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({**settings, "linger.ms": 20})
    count, value = 4000, b"x" * 1000
    for _ in range(count):
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**settings, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < count and time.monotonic() < deadline:
        seen += sum(1 for m in consumer.consume(1000, 0.5) if m.error() is None)
    consumer.close()
    assert seen == count


def test_user_quotas_apply_to_the_authenticated_user(secure: SecureBroker) -> None:
    """A producer_byte_rate for user alice throttles alice's SASL connections, not bob's
    (the quota's user is the connection's principal, as in Kafka)."""
    import sys

    def quota(*change: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "kbroker", "quotas", "alter", "--user", "alice", *change,
             "--bootstrap-server", secure.process.bootstrap],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

    quota("--add", "producer_byte_rate=10240")
    try:
        throttled = _throttle_by_user(secure)
    finally:
        quota("--delete", "producer_byte_rate")
    assert throttled["alice"] > 0 and throttled["bob"] == 0


def _throttle_by_user(secure: SecureBroker) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": secure.process.bootstrap})
    topic = _topic("sasl_plaintext_plain", "quota")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    throttled: dict[str, int] = {}
    for user in ("alice", "bob"):
        events: list[int] = []
        producer = Producer(
            {
                **secure.client_settings("sasl_plaintext_plain", user),
                "throttle_cb": lambda event, events=events: events.append(event.throttle_time),
            }
        )
        for _ in range(200):
            producer.produce(topic, b"x" * 1000)
        assert producer.flush(60) == 0
        producer.poll(0.5)
        throttled[user] = max(events, default=0)
    return throttled
