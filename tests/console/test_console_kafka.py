"""The console's pages against Apache Kafka 3.9 (ZooKeeper mode) and 4.3 (KRaft), each with
a topic, records and a group: the console speaks only the protocol, so what kbroker shows
it shows for them too (4.3 also with a consumer group of the KIP-848 protocol and a share
group, KIP-932)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.broker_process import BrokerProcess
from compat_tests.kafka_process import (
    KAFKA43_BIN,
    KafkaProcess,
    KRaftKafkaProcess,
    kafka43_available,
    kafka_available,
)
from compat_tests.support import require
from compat_tests.zookeeper_process import ZooKeeperProcess, java_available
from kbroker.client import KafkaClient, parse_address
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
SHARE_GROUP = "billing-shared"
SHARE_CONSUMER = KAFKA43_BIN / "kafka-console-share-consumer.sh"


async def _coordinator_ready(bootstrap: str, group: str) -> None:
    # Kafka answers NOT_COORDINATOR while it loads a __consumer_offsets partition; the
    # client retries that, librdkafka's synchronous commit does not.
    async with KafkaClient([parse_address(bootstrap)], timeout=60) as client:
        await client.committed(group)


def share_group(bootstrap: str, work: Path) -> None:
    """A share group (KIP-932) that has acknowledged records: Kafka 4.3's console share
    consumer reads 3 records (a share group starts at the latest offset, so records are
    produced until it has read them) and exits."""
    with open(work / "share-consumer.out", "wb") as out:
        consumer_process = subprocess.Popen(
            [
                str(SHARE_CONSUMER), "--bootstrap-server", bootstrap, "--topic", TOPIC,
                "--group", SHARE_GROUP, "--max-messages", "3", "--timeout-ms", "90000",
            ],
            env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while consumer_process.poll() is None:
                assert time.monotonic() < deadline, (work / "share-consumer.out").read_text()
                produce(bootstrap, TOPIC, [b"for-the-share-group"], partition=1)
                time.sleep(1)
        finally:
            if consumer_process.poll() is None:
                consumer_process.kill()
            consumer_process.wait()


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
    kafka = KRaftKafkaProcess(work / "kafka43")
    try:
        off_the_loop(kafka.start)
        yield request.param, kafka
    finally:
        kafka.stop(timeout=30.0)


@pytest.fixture(scope="module")
def console(cluster: tuple[str, BrokerProcess]) -> Iterator[ConsoleProcess]:
    label, kafka = cluster
    seed(kafka.bootstrap, kip848=label == "kafka43")
    if label == "kafka43":
        share_group(kafka.bootstrap, kafka.work_dir)
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
            load(page, console.url + "/groups?type=share")
            assert page.locator(f"#groups tr[data-name='{SHARE_GROUP}']").count() == 1
            load(page, f"{console.url}/group?id={SHARE_GROUP}")
            assert page.locator("h1 .tag").inner_text() == "share"
            # DescribeShareGroupOffsets: the share group's start offset on partition 1.
            assert "orders" in page.locator("#lag tbody").inner_text()
            screenshot(page, f"{label}-share-group")
    finally:
        context.close()
