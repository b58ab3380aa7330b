"""Fixtures: the broker under test, topics, and client-side tools.

Set KBROKER_BOOTSTRAP=host:port to run the suite against a broker that is already running
(kbroker or any other Kafka-compatible broker; test ids start with ``[external``). Otherwise
every test runs against each broker named in KBROKER_COMPAT_BROKERS (default
``kbroker,kafka,kafka43``), started for the session on free loopback ports with a temporary
log directory: ``kbroker`` is this repository's broker; the oracles are ``kafka``, Apache
Kafka 3.9.0 (../shared/kafka-3.9) with Debian's ZooKeeper, and ``kafka43``, Apache Kafka 4.3
(../shared/kafka-4.3) in KRaft mode. Test ids start with the broker kind (``[kbroker]``,
``[kafka43-gzip]``), so the three columns of results sit side by side.
"""

import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.broker_process import BrokerProcess, BrokerStartError
from compat_tests.kafka_process import (
    KafkaProcess,
    KRaftKafkaProcess,
    kafka43_available,
    kafka_available,
)
from compat_tests.support import require, wait_for_leaders
from compat_tests.zookeeper_process import ZooKeeperProcess, java_available

BOOTSTRAP_ENV = "KBROKER_BOOTSTRAP"


BROKERS_ENV = "KBROKER_COMPAT_BROKERS"
BROKER_KINDS = ("kbroker", "kafka", "kafka43")
PROCESS_CLASSES: dict[str, type[BrokerProcess]] = {
    "kbroker": BrokerProcess,
    "kafka": KafkaProcess,
    "kafka43": KRaftKafkaProcess,
}

# The session's kbroker and Kafka 4.3 let a consumer group (KIP-848) set heartbeat intervals
# and session timeouts this short as group configs (consumer.heartbeat.interval.ms,
# consumer.session.timeout.ms), so that the consumer protocol's tests rebalance in a second.
# Kafka's defaults (5 s heartbeats, 45 s sessions) stay the defaults.
CONSUMER_GROUP_BOUNDS = {
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.min.session.timeout.ms": "2000",
}


def brokers_under_test() -> list[str]:
    """The `broker_process` parameters: "external" under KBROKER_BOOTSTRAP, else the kinds
    KBROKER_COMPAT_BROKERS names."""
    if os.environ.get(BOOTSTRAP_ENV):
        return ["external"]
    kinds = [k.strip() for k in os.environ.get(BROKERS_ENV, ",".join(BROKER_KINDS)).split(",")]
    unknown = set(kinds) - set(BROKER_KINDS)
    if unknown or not kinds:
        raise pytest.UsageError(f"{BROKERS_ENV}: unknown broker kinds {sorted(unknown)}")
    return kinds


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "broker_kinds(*kinds): run only against these kinds of broker_kind (others deselected)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the broker kinds a module's ``broker_kinds`` marker leaves out (the 4.3 tools
    do not run against Kafka 3.9). Modules narrow the kinds this way rather than by
    parametrizing ``broker_kind`` themselves: a module's own session-scoped parametrization
    is a second fixture definition, and the session's ``broker_process`` (cached once, torn
    down only when the conftest's ``broker_kind`` changes) would answer for whichever kind
    ran before."""
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("broker_kind") if callspec is not None else None
        allowed = item.get_closest_marker("broker_kinds")
        if kind is not None and allowed is not None and kind not in allowed.args:
            deselected.append(item)
        else:
            kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def start_kafka(work: Path) -> Iterator[KafkaProcess]:
    """ZooKeeper and Apache Kafka 3.9.0, stopped (Kafka first) when the generator closes."""
    require(java_available(), "ZooKeeper (Debian package) and java are needed for Kafka")
    require(kafka_available(), "Apache Kafka 3.9 is missing from ../shared/kafka-3.9")
    zookeeper = ZooKeeperProcess(work / "zookeeper")
    zookeeper.start()
    kafka = KafkaProcess(work / "kafka", zookeeper.connect)
    try:
        kafka.start()
        yield kafka
    except BrokerStartError as exc:
        pytest.fail(f"could not start Kafka: {exc}", pytrace=False)
    finally:
        kafka.stop(timeout=30.0)
        zookeeper.stop()


def start_kafka43(work: Path) -> Iterator[KRaftKafkaProcess]:
    """Apache Kafka 4.3, one KRaft node formatted for this session; stopped when the
    generator closes."""
    require(shutil.which("java") is not None, "java is needed for Kafka 4.3")
    require(kafka43_available(), "Apache Kafka 4.3 is missing from ../shared/kafka-4.3")
    kafka = KRaftKafkaProcess(work, overrides=CONSUMER_GROUP_BOUNDS)
    try:
        kafka.start()
        yield kafka
    except BrokerStartError as exc:
        pytest.fail(f"could not start Kafka 4.3: {exc}", pytrace=False)
    finally:
        kafka.stop(timeout=30.0)


@pytest.fixture(scope="session", params=brokers_under_test())
def broker_kind(request: pytest.FixtureRequest) -> str:
    """Which broker the test runs against: "kbroker", "kafka", "kafka43" or "external"."""
    return str(request.param)


@pytest.fixture(scope="session")
def broker_process(
    broker_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess | None]:
    """The broker process this session started (kbroker or Kafka), or None under
    KBROKER_BOOTSTRAP."""
    if broker_kind == "external":
        yield None
        return
    if broker_kind == "kafka":
        yield from start_kafka(tmp_path_factory.mktemp("kafka"))
        return
    if broker_kind == "kafka43":
        yield from start_kafka43(tmp_path_factory.mktemp("kafka43"))
        return
    broker = BrokerProcess(tmp_path_factory.mktemp("kbroker"), overrides=CONSUMER_GROUP_BOUNDS)
    try:
        broker.start()
    except BrokerStartError as exc:
        pytest.fail(f"could not start kbroker: {exc}", pytrace=False)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def bootstrap(broker_process: BrokerProcess | None) -> str:
    """host:port of the broker under test."""
    if broker_process is None:
        return os.environ[BOOTSTRAP_ENV]
    return broker_process.bootstrap


@pytest.fixture(scope="session")
def log_dir(broker_process: BrokerProcess | None) -> Path | None:
    """The broker's log directory when we started it (None for an external broker)."""
    return broker_process.log_dir if broker_process is not None else None


@pytest.fixture(autouse=True)
def broker_survives_test(broker_kind: str, broker_process: BrokerProcess | None) -> Iterator[None]:
    """Check that the session's broker is of the test's kind (a harness that hands a test
    another column's broker makes that column's results meaningless), and blame the test
    during which our broker process died, with its stderr."""
    expected = PROCESS_CLASSES.get(broker_kind)
    if expected is not None and type(broker_process) is not expected:
        pytest.fail(
            f"harness error: the [{broker_kind}] test got {type(broker_process).__name__}",
            pytrace=False,
        )
    yield
    if broker_process is not None and not broker_process.running():
        pytest.fail(f"the broker process died during this test\n{broker_process.stderr_tail()}")


@pytest.fixture
def restart_broker(broker_process: BrokerProcess | None) -> Callable[[], None]:
    """Restart the session's broker gracefully (SIGTERM, then start on the same port/dir)."""
    if broker_process is None:
        pytest.skip(f"{BOOTSTRAP_ENV} names an external broker, which this suite cannot restart")

    def restart() -> None:
        try:
            broker_process.restart()
        except BrokerStartError as exc:
            pytest.fail(f"kbroker did not come back after a restart: {exc}", pytrace=False)

    return restart


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[[], str]:
    """Factory of topic names unique to this run, derived from the test's name."""
    stem = re.sub(r"[^a-zA-Z0-9-]+", "-", request.node.name).strip("-")[:80]

    def make() -> str:
        return f"{stem}-{uuid.uuid4().hex[:10]}"

    return make


@pytest.fixture(scope="session")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def create_topic(admin: AdminClient, unique_topic: Callable[[], str]) -> Callable[..., str]:
    """Factory: create a fresh topic (confluent-kafka AdminClient) and return its name."""

    def create(partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
        name = unique_topic()
        new = NewTopic(
            name, num_partitions=partitions, replication_factor=1, config=dict(config or {})
        )
        admin.create_topics([new], operation_timeout=10)[name].result(timeout=20)
        wait_for_leaders(admin, name, partitions)
        return name

    return create


@pytest.fixture(scope="session")
def kcat() -> str:
    """Path of the kcat binary (Debian package kcat)."""
    path = shutil.which("kcat")
    require(path is not None, "kcat is not installed (apt-get install kcat)")
    assert path is not None
    return path
