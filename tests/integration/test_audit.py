"""The audit end to end over real broker processes: records produced with CreateTime stamps
into known windows land in ``__audit`` as exact counts (aborted transactions excluded), and
``kbroker audit`` compares a source, its mirror and a consumer group window by window, naming
the window a DeleteRecords on the mirror removed and exiting 1."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.broker_process import REPO_ROOT, BrokerProcess, free_port
from kbroker.audit.counter import window_start
from kbroker.audit.records import WindowKey
from kbroker.cli.ops.audit import read_audit
from kbroker.client import KafkaClient
from kbroker.data_client import DataClient
from tests.console.support import console_process
from tests.integration.mirror_support import (
    DEADLINE_SECONDS,
    addresses,
    create_topic,
    mirrors,
    wait_caught_up,
)

pytestmark = pytest.mark.timeout(180)

WINDOW_MS = 60_000
AUDIT_OVERRIDES = {
    "audit.enable": "true",
    "audit.window.ms": str(WINDOW_MS),
    "audit.publish.interval.ms": "200",
}


def audit(*args: str) -> subprocess.CompletedProcess[str]:
    """``kbroker audit ...`` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "kbroker", "audit", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def source(tmp_path: Path) -> Iterator[BrokerProcess]:
    overrides = {**AUDIT_OVERRIDES, "metrics.port": str(free_port())}
    broker = BrokerProcess(tmp_path / "source", overrides=overrides)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def first_window() -> int:
    # Recent enough for the default retention (7 days), in the past for any clock skew, and
    # at the start of a 3-window span (the --window 3m check).
    return window_start(int(time.time() * 1000) - 10 * WINDOW_MS, 3 * WINDOW_MS)


def produce_at(bootstrap: str, topic: str, stamps: list[tuple[int, int]]) -> None:
    """One record per (partition, CreateTime timestamp), batched by the producer."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50})
    for partition, ts in stamps:
        producer.produce(topic, value=b"v", partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


def produce_transaction(bootstrap: str, topic: str, ts: int, *, commit: bool) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"audit-{topic}-{commit}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(5):
        producer.produce(topic, value=b"t", partition=0, timestamp=ts)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def wait_for_counts(bootstrap: str, topic: str, expected: dict[WindowKey, int]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        counts = asyncio.run(_counts(bootstrap, topic))
        if counts == expected:
            return
        assert time.monotonic() < deadline, f"__audit holds {counts}, not {expected}"
        time.sleep(0.3)


async def _counts(bootstrap: str, topic: str) -> dict[WindowKey, int]:
    async with KafkaClient(addresses(bootstrap)) as client:
        found, _ = await read_audit(client)
    return {k: c.count for k, c in found.items() if k.topic == topic}


async def _all_topics(bootstrap: str) -> set[str]:
    async with KafkaClient(addresses(bootstrap)) as client:
        return set(await client.partitions(None))


def test_counts_per_window_in_audit_topic(source: BrokerProcess) -> None:
    topic = "audited"
    create_topic(source.bootstrap, topic, 2)
    w0 = first_window()
    w1, w2 = w0 + WINDOW_MS, w0 + 2 * WINDOW_MS
    # Partition 0's records straddle w0/w1 within the producer's batches (split per record);
    # partition 1's all fall in w2.
    produce_at(
        source.bootstrap,
        topic,
        [(0, w0 + 10), (0, w0 + 20), (0, w1 + 5), (0, w0 + 30), (1, w2), (1, w2 + 1)],
    )
    produce_transaction(source.bootstrap, topic, w2 + 7, commit=False)
    produce_transaction(source.bootstrap, topic, w1 + 7, commit=True)
    wait_for_counts(
        source.bootstrap,
        topic,
        {
            WindowKey(topic, 0, w0): 3,
            WindowKey(topic, 0, w1): 1 + 5,
            WindowKey(topic, 1, w2): 2,
        },
    )
    # Internal: left out of "all topics" (what a mirror's --topic-regex matches against).
    assert asyncio.run(_all_topics(source.bootstrap)) == {topic}
    metrics_address = f"{source.host}:{source.overrides['metrics.port']}"
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=30) as answer:
        assert "kbroker_audit_windows 3" in answer.read().decode()

    # The console's mirror page shows the cluster's audit windows.
    with console_process(source.bootstrap) as console:
        with urllib.request.urlopen(console.url + "/mirror", timeout=30) as answer:
            page = answer.read().decode()
    assert page.count(f"<td>{topic}</td>") == 3 and f"<td>{w2}</td>" in page

    checked = audit("--bootstrap-server", source.bootstrap, "--topic", topic, "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    windows = json.loads(checked.stdout)["windows"]
    assert [(w["partition"], w["window_start_ms"], w["status"]) for w in windows] == [
        (0, w0, "match"),
        (0, w1, "match"),
        (1, w2, "match"),
    ]
    # Windows of 3 minutes sum the published ones: w0, w1 and w2 are one of them.
    wide = audit("--bootstrap-server", source.bootstrap, "--topic", topic, "--window", "3m")
    assert wide.returncode == 0, wide.stdout + wide.stderr
    assert "2 windows, 2 matching, 0 missing or mismatched" in wide.stdout
    wide_json = audit(
        "--bootstrap-server", source.bootstrap, "--topic", topic, "--window", "3m", "--json"
    )
    assert [
        (w["window_start_ms"], w["counts"]) for w in json.loads(wide_json.stdout)["windows"]
    ] == [
        (w0, {"cluster": 9}),
        (w0, {"cluster": 2}),
    ]


def test_source_mirror_and_group_match_until_records_are_deleted_on_the_mirror(
    source: BrokerProcess, tmp_path: Path
) -> None:
    destination = BrokerProcess(tmp_path / "destination", overrides=AUDIT_OVERRIDES)
    destination.start()
    try:
        topic = "pipeline"
        create_topic(source.bootstrap, topic, 1)
        w0 = first_window()
        stamps = [(0, w0 + i) for i in range(4)] + [(0, w0 + WINDOW_MS + i) for i in range(3)]
        produce_at(source.bootstrap, topic, stamps)
        created = mirrors(
            "create",
            "--bootstrap-server",
            destination.bootstrap,
            "--source-bootstrap",
            source.bootstrap,
            "--topic",
            topic,
        )
        assert created.returncode == 0, created.stderr
        wait_caught_up(source.bootstrap, destination.bootstrap, topic, 1)
        consumer = Consumer({"bootstrap.servers": source.bootstrap, "group.id": "readers"})
        consumer.commit(offsets=[TopicPartition(topic, 0, len(stamps))], asynchronous=False)
        consumer.close()
        expected = {WindowKey(topic, 0, w0): 4, WindowKey(topic, 0, w0 + WINDOW_MS): 3}
        wait_for_counts(source.bootstrap, topic, expected)
        wait_for_counts(destination.bootstrap, topic, expected)

        tiers = [
            "--tier",
            f"source={source.bootstrap}",
            "--tier",
            f"mirror={destination.bootstrap}",
            "--topic",
            topic,
        ]
        matching = audit(*tiers, "--group", "readers@source")
        assert matching.returncode == 0, matching.stdout + matching.stderr
        assert "2 windows, 2 matching, 0 missing or mismatched" in matching.stdout

        with DataClient(destination.bootstrap) as client:
            client.delete_records((topic, 0), 4)
        wait_for_counts(destination.bootstrap, topic, {WindowKey(topic, 0, w0 + WINDOW_MS): 3})
        missing = audit(*tiers, "--json")
        assert missing.returncode == 1, missing.stdout + missing.stderr
        windows = json.loads(missing.stdout)["windows"]
        assert windows[0] == {
            "topic": topic,
            "partition": 0,
            "window_start_ms": w0,
            "counts": {"source": 4, "mirror": None},
            "status": "missing",
        }
        assert windows[1]["status"] == "match"
    finally:
        destination.stop()


def scrape(address: str) -> set[str]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as answer:
        return set(answer.read().decode().splitlines())


def wait_for_samples(address: str, expected: set[str]) -> set[str]:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        try:
            lines = scrape(address)
        except OSError:
            lines = set()
        if expected <= lines:
            return lines
        assert time.monotonic() < deadline, f"{expected - lines} not in {sorted(lines)}"
        time.sleep(0.3)


def test_watch_serves_missing_windows_as_gauges_until_the_group_catches_up(
    source: BrokerProcess,
) -> None:
    topic = "watched"
    create_topic(source.bootstrap, topic, 1)
    w0 = first_window()
    produce_at(source.bootstrap, topic, [(0, w0 + i) for i in range(3)] + [(0, w0 + WINDOW_MS)])
    wait_for_counts(
        source.bootstrap,
        topic,
        {WindowKey(topic, 0, w0): 3, WindowKey(topic, 0, w0 + WINDOW_MS): 1},
    )
    port = free_port()
    address = f"127.0.0.1:{port}"
    group_tier = 'tier="group:readers"'
    watcher = subprocess.Popen(
        [
            *(sys.executable, "-m", "kbroker", "audit", "--bootstrap-server", source.bootstrap),
            *("--topic", topic, "--group", "readers", "--timeout", "5"),
            *("--watch", "0.3", "--metrics-port", str(port)),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        # The group committed nothing: both windows are missing from its tier.
        lines = wait_for_samples(
            address,
            {
                f'kbroker_audit_missing_windows{{topic="{topic}",{group_tier}}} 2',
                f'kbroker_audit_missing_windows{{topic="{topic}",tier="cluster"}} 0',
                f'kbroker_audit_compared_windows{{topic="{topic}"}} 2',
            },
        )
        first_check = next(
            float(line.split()[1])
            for line in lines
            if line.startswith("kbroker_audit_last_check_timestamp_seconds ")
        )
        assert abs(first_check - time.time()) < DEADLINE_SECONDS

        consumer = Consumer({"bootstrap.servers": source.bootstrap, "group.id": "readers"})
        consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        wait_for_samples(
            address, {f'kbroker_audit_missing_windows{{topic="{topic}",{group_tier}}} 1'}
        )
        consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
        consumer.close()
        wait_for_samples(
            address, {f'kbroker_audit_missing_windows{{topic="{topic}",{group_tier}}} 0'}
        )

        # A tier that cannot be read is counted as a failed check; the service keeps going.
        source.stop()
        deadline = time.monotonic() + DEADLINE_SECONDS
        while 'kbroker_audit_checks_total{result="failed"} 0' in scrape(address):
            assert time.monotonic() < deadline, "no failed check with the tier's broker stopped"
            time.sleep(0.3)
        assert watcher.poll() is None
    finally:
        watcher.terminate()
        output, _ = watcher.communicate(timeout=30)
    # SIGTERM stops the service cleanly.
    assert watcher.returncode == 0, output
    assert f"audit metrics on http://{address}/metrics" in output
    assert "2 windows, 0 matching, 2 missing or mismatched" in output
    assert "2 windows, 2 matching, 0 missing or mismatched" in output
    assert "check failed" in output
