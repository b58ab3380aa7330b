"""The console's pages against Apache Kafka 3.9 (ZooKeeper mode) and 4.3 (KRaft), each with
a topic, records and a group: the console speaks only the protocol, so what kbroker shows
it shows for them too (4.3 also with a consumer group of the KIP-848 protocol)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.broker_process import BrokerProcess
from compat_tests.kafka_process import KafkaProcess, kafka_available
from compat_tests.support import require
from compat_tests.zookeeper_process import ZooKeeperProcess, java_available
from kbroker.client import KafkaClient, parse_address
from tests.console.kafka43 import Kafka43Process, kafka43_available
from tests.console.pages import every_page, load
from tests.console.support import (
    ConsoleProcess,
    console_process,
    consume_and_commit,
    consumer,
    create_topic,
    off_the_loop,
    produce,
)

pytestmark = pytest.mark.slow
TOPIC = "orders"
GROUP = "billing"
CONSUMER_GROUP = "billing-848"


async def _coordinator_ready(bootstrap: str, group: str) -> None:
    # Kafka answers NOT_COORDINATOR while it loads a __consumer_offsets partition; the
    # client retries that, librdkafka's synchronous commit does not.
    async with KafkaClient([parse_address(bootstrap)], timeout=60) as client:
        await client.committed(group)


def seed(bootstrap: str, kip848: bool) -> None:
    create_topic(bootstrap, TOPIC, partitions=2)
    produce(bootstrap, TOPIC, [f"order-{i}".encode() for i in range(20)])
    groups = [(GROUP, {})]
    if kip848:
        groups.append((CONSUMER_GROUP, {"group.protocol": "consumer"}))
    for group, settings in groups:
        off_the_loop(lambda g=group: asyncio.run(_coordinator_ready(bootstrap, g)))
        c = consumer(bootstrap, group, **settings)
        assert consume_and_commit(c, TOPIC, 10) == 10
        c.close()


@pytest.fixture(scope="module", params=["kafka39", "kafka43"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, BrokerProcess]]:
    require(java_available(), "java is needed for Apache Kafka")
    work = tmp_path_factory.mktemp(request.param)
    if request.param == "kafka39":
        require(kafka_available(), "Apache Kafka 3.9 is missing from ../shared/kafka-3.9")
        zookeeper = ZooKeeperProcess(work / "zookeeper")
        zookeeper.start()
        kafka: BrokerProcess = KafkaProcess(work / "kafka", zookeeper.connect)
        try:
            off_the_loop(kafka.start)
            yield request.param, kafka
        finally:
            kafka.stop(timeout=30.0)
            zookeeper.stop()
        return
    require(kafka43_available(), "Apache Kafka 4.3 is missing from ../shared/kafka-4.3")
    kafka = Kafka43Process(work / "kafka43")
    try:
        off_the_loop(kafka.start)
        yield request.param, kafka
    finally:
        kafka.stop(timeout=30.0)


@pytest.fixture(scope="module")
def console(cluster: tuple[str, BrokerProcess]) -> Iterator[ConsoleProcess]:
    label, kafka = cluster
    seed(kafka.bootstrap, kip848=label == "kafka43")
    with console_process(kafka.bootstrap) as running:
        yield running


def test_every_page_loads_with_data(
    browser: Any,
    cluster: tuple[str, BrokerProcess],
    console: ConsoleProcess,
    screenshot: Callable[[Any, str], Path],
) -> None:
    label, _ = cluster
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        every_page(page, console.url, TOPIC, GROUP, screenshot, label)
        if label == "kafka43":
            load(page, console.url + "/groups?type=consumer")
            assert page.locator(f"#groups tr[data-name='{CONSUMER_GROUP}']").count() == 1
            load(page, f"{console.url}/group?id={CONSUMER_GROUP}")
            assert page.locator("h1 .tag").inner_text() == "consumer"
            assert page.locator("#lag tbody tr").count() >= 1
            screenshot(page, f"{label}-consumer-group")
    finally:
        context.close()
