"""The Spark source's counts as a tier of ``kbroker audit``: what a query read per topic,
partition and window (auditTopic) compared with what the brokers counted (``__audit``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from compat_tests.broker_process import REPO_ROOT, BrokerProcess
from kbroker.audit.counter import window_start
from kbroker.data_client import DataClient
from tests.spark.helpers import make_topic
from wire.records.record import Record

pytestmark = pytest.mark.slow

WINDOW_MS = 60_000
DEADLINE_SECONDS = 60


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("audited-broker"),
        overrides={
            "auto.create.topics.enable": "false",
            "audit.enable": "true",
            "audit.window.ms": str(WINDOW_MS),
            "audit.publish.interval.ms": "200",
        },
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


def audit(bootstrap: str, topic: str, counts_topic: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "kbroker", "audit", "--topic", topic, "--json"),
            *(
                "--tier",
                f"brokers={bootstrap}",
                "--tier",
                f"spark={bootstrap},topic={counts_topic}",
            ),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def wait_for_audit(bootstrap: str, topic: str, counts_topic: str, status: int) -> dict[str, Any]:
    """The comparison once it exits with ``status`` (the brokers publish every 200 ms)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        checked = audit(bootstrap, topic, counts_topic)
        if checked.returncode == status:
            return dict(json.loads(checked.stdout))
        assert time.monotonic() < deadline, checked.stdout + checked.stderr
        time.sleep(0.3)


def read(spark: Any, bootstrap: str, topic: str, counts_topic: str, **options: str) -> int:
    reader = (
        spark.read.format("kbroker")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .option("auditTopic", counts_topic)
        .option("auditWindowMs", str(WINDOW_MS))
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return int(reader.load().count())


def test_what_spark_read_matches_the_brokers_counts(
    spark: Any, audited: BrokerProcess, unique: str
) -> None:
    bootstrap, counts_topic = audited.bootstrap, unique + "-read"
    make_topic(bootstrap, unique, 2)
    make_topic(bootstrap, counts_topic, 1, {"cleanup.policy": "compact"})
    w0 = window_start(int(time.time() * 1000) - 10 * WINDOW_MS, WINDOW_MS)
    w1, w2 = w0 + WINDOW_MS, w0 + 2 * WINDOW_MS
    with DataClient(bootstrap) as client:
        # One batch spanning two windows on partition 0.
        client.produce((unique, 0), [Record(0, ts, None, b"v") for ts in (w0, w0 + 1, w1, w0 + 2)])
        client.produce((unique, 1), [Record(0, w2 + i, None, b"v") for i in range(3)])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(5):
        producer.produce(unique, value=b"aborted", partition=0, timestamp=w1 + 9)
    producer.flush(30)
    producer.abort_transaction(30)

    assert read(spark, bootstrap, unique, counts_topic) == 7
    matching = wait_for_audit(bootstrap, unique, counts_topic, 0)
    assert [(w["partition"], w["window_start_ms"], w["counts"]) for w in matching["windows"]] == [
        (0, w0, {"brokers": 3, "spark": 3}),
        (0, w1, {"brokers": 1, "spark": 1}),
        (1, w2, {"brokers": 3, "spark": 3}),
    ]

    # Records Spark has not read yet: the brokers' window is ahead of Spark's.
    with DataClient(bootstrap) as client:
        end = client.produce((unique, 1), [Record(0, w2 + 5, None, b"new")]) + 1
    behind = wait_for_audit(bootstrap, unique, counts_topic, 1)
    assert behind["windows"][2]["counts"] == {"brokers": 4, "spark": 3}
    assert behind["windows"][2]["status"] == "mismatch"
    # A read of the new record adds its range to the window; partition 0's range, read again
    # (as by a job run twice or a task retried), replaces its own counts.
    starting = json.dumps({unique: {"0": -2, "1": end - 1}})
    assert read(spark, bootstrap, unique, counts_topic, startingOffsets=starting) == 4 + 1
    caught_up = wait_for_audit(bootstrap, unique, counts_topic, 0)
    assert [w["counts"]["spark"] for w in caught_up["windows"]] == [3, 1, 4]
