"""Fixtures: the broker under test, topics, and client-side tools.

Set KBROKER_BOOTSTRAP=host:port to run the suite against a broker that is already running
(kbroker or any other Kafka-compatible broker). Otherwise one kbroker process is started
for the session on a free loopback port with a temporary log directory.
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
from compat_tests.support import require, wait_for_leaders

BOOTSTRAP_ENV = "KBROKER_BOOTSTRAP"


@pytest.fixture(scope="session")
def broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess | None]:
    """The kbroker process this session started, or None under KBROKER_BOOTSTRAP."""
    if os.environ.get(BOOTSTRAP_ENV):
        yield None
        return
    broker = BrokerProcess(tmp_path_factory.mktemp("kbroker"))
    try:
        broker.start(timeout=30.0)
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
def broker_survives_test(broker_process: BrokerProcess | None) -> Iterator[None]:
    """Blame the test during which our broker process died, with its stderr."""
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
            broker_process.restart(timeout=30.0)
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
