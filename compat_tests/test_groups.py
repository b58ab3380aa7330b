"""Consumer groups with stock clients: membership, rebalances, committed offsets.

- Three confluent-kafka consumer processes share a 6-partition topic; one is SIGKILLed
  mid-way (it never leaves the group) and a fourth joins. Every record is consumed, records
  are consumed twice only where the killed member had not committed yet, and the committed
  offsets end at the log end offsets.
- kafka-python and aiokafka group consumers resume from the offsets they committed.
- kcat's balanced consumer (-G) consumes as a group member and commits.
- Committed offsets survive a broker restart.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from compat_tests.support import wait_until

pytestmark = pytest.mark.slow

# A consumer process: consumes in batches and commits synchronously after each batch, logging
# "C <partition> <offset>" per record before the commit and "K <partition> <next offset>" after
# it succeeded, then pauses briefly. It stops (closing, so leaving the group) when the stop
# file appears.
CONSUMER_SCRIPT = r"""
import os, sys, time
from confluent_kafka import Consumer, KafkaException
bootstrap, group, topic, out_path, stop_path = sys.argv[1:6]
consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
})
out = open(out_path, "a", buffering=1)
consumer.subscribe([topic])
while not os.path.exists(stop_path):
    messages = consumer.consume(num_messages=200, timeout=0.2)
    records = [m for m in messages if m.error() is None]
    if not records:
        continue
    out.write("".join(f"C {m.partition()} {m.offset()}\n" for m in records))
    try:
        committed = consumer.commit(asynchronous=False)
    except KafkaException as exc:
        out.write(f"E {exc}\n")
        continue
    out.write("".join(f"K {tp.partition} {tp.offset}\n" for tp in committed if tp.error is None))
    time.sleep(0.02)  # a slow consumer, so that the kill lands mid-way
consumer.close()
out.write("closed\n")
"""


def produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-watermarks"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


class ConsumerProcess:
    def __init__(self, bootstrap: str, group: str, topic: str, work: Path, name: str) -> None:
        self.out = work / f"{name}.log"
        self.stop_file = work / f"{name}.stop"
        self._stderr = open(work / f"{name}.err", "w")  # noqa: SIM115 - closed by kill/stop
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CONSUMER_SCRIPT,
                bootstrap,
                group,
                topic,
                str(self.out),
                str(self.stop_file),
            ],
            stderr=self._stderr,
        )

    def lines(self) -> list[list[str]]:
        if not self.out.exists():
            return []
        text = self.out.read_text()
        complete = text[: text.rfind("\n") + 1]
        return [line.split() for line in complete.splitlines()]

    def consumed(self) -> list[tuple[int, int]]:
        return [(int(p), int(o)) for kind, p, o in self._records("C")]

    def last_commits(self) -> dict[int, int]:
        commits: dict[int, int] = {}
        for _, p, o in self._records("K"):
            commits[int(p)] = int(o)
        return commits

    def _records(self, kind: str) -> list[list[str]]:
        return [line for line in self.lines() if line and line[0] == kind and len(line) == 3]

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self._stderr.close()

    def stop(self) -> None:
        self.stop_file.touch()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._stderr.close()


def test_confluent_group_survives_a_killed_member(
    bootstrap: str, create_topic: Callable[..., str], tmp_path: Path
) -> None:
    partitions, total = 6, 60_000
    topic = create_topic(partitions)
    group = f"compat-group-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 0, total // 2, partitions)
    members = [ConsumerProcess(bootstrap, group, topic, tmp_path, f"member-{i}") for i in range(3)]
    try:
        wait_until(
            lambda: sum(len(m.consumed()) for m in members) >= total // 6,
            60,
            "the first records to be consumed by the group",
        )
        victim = members[0]
        victim.kill()
        joiner = ConsumerProcess(bootstrap, group, topic, tmp_path, "member-3")
        members.append(joiner)
        produce(bootstrap, topic, total // 2, total // 2, partitions)
        ends = log_ends(bootstrap, topic, partitions)
        assert sum(ends.values()) == total

        def done() -> bool:
            seen = {r for m in members for r in m.consumed()}
            return len(seen) == total and committed(bootstrap, group, topic, partitions) == ends

        wait_until(done, 120, "every record consumed and committed")
        survivors = members[1:]
    finally:
        for m in members:
            if m.process.poll() is None:
                m.stop()

    assert all("closed" in (line[0] if line else "") for m in survivors for line in m.lines()[-1:])
    counts = Counter(r for m in members for r in m.consumed())
    assert set(counts) == {(p, o) for p in range(partitions) for o in range(ends[p])}
    duplicates = {r for r, n in counts.items() if n > 1}
    victim_consumed = set(victim.consumed())
    victim_commits = victim.last_commits()
    for partition, offset in duplicates:
        # Only what the killed member read after its last recorded commit comes again.
        assert (partition, offset) in victim_consumed
        assert offset >= victim_commits.get(partition, 0)
    for m in survivors:
        assert len(m.consumed()) == len(set(m.consumed()))
    # The killed member had a share of the work, and the late joiner got partitions.
    assert victim_consumed and joiner.consumed()
    assert committed(bootstrap, group, topic, partitions) == ends


def _kafka_python_consume(
    bootstrap: str, topic: str, group: str, want: int
) -> list[tuple[int, int]]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < want and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=want - len(got)).values():
                got.extend((r.partition, r.offset) for r in records)
        consumer.commit()
    finally:
        consumer.close()
    return got


def test_kafka_python_group_consumer_resumes_from_committed(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic(2)
    group = f"compat-kafka-python-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 0, 100, 2)
    first = _kafka_python_consume(bootstrap, topic, group, 60)
    assert len(first) == 60
    positions = committed(bootstrap, group, topic, 2)
    assert sum(positions.values()) == 60
    second = _kafka_python_consume(bootstrap, topic, group, 40)
    assert sorted(first + second) == sorted((i % 2, i // 2) for i in range(100))
    for partition in range(2):
        resumed = [o for p, o in second if p == partition]
        assert not resumed or min(resumed) == positions[partition]
    assert committed(bootstrap, group, topic, 2) == {0: 50, 1: 50}


async def _aiokafka_consume(
    bootstrap: str, topic: str, group: str, want: int
) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    got: list[tuple[int, int]] = []
    try:
        async with asyncio.timeout(60):
            while len(got) < want:
                batches = await consumer.getmany(timeout_ms=500, max_records=want - len(got))
                for records in batches.values():
                    got.extend((r.partition, r.offset) for r in records)
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


def test_aiokafka_group_consumer_resumes_from_committed(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic(2)
    group = f"compat-aiokafka-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 0, 100, 2)
    first = asyncio.run(_aiokafka_consume(bootstrap, topic, group, 70))
    positions = committed(bootstrap, group, topic, 2)
    assert sum(positions.values()) == len(first) == 70
    second = asyncio.run(_aiokafka_consume(bootstrap, topic, group, 30))
    assert sorted(first + second) == sorted((i % 2, i // 2) for i in range(100))
    for partition in range(2):
        resumed = [o for p, o in second if p == partition]
        assert not resumed or min(resumed) == positions[partition]


def test_kcat_balanced_consumer(
    bootstrap: str, create_topic: Callable[..., str], kcat: str
) -> None:
    topic = create_topic(3)
    group = f"compat-kcat-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 0, 300, 3)
    result = subprocess.run(
        [kcat, "-b", bootstrap, "-G", group, "-o", "beginning", "-e", "-q", "-f", "%p %o\n", topic],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    seen = [tuple(map(int, line.split())) for line in result.stdout.splitlines() if line]
    assert sorted(seen) == sorted((i % 3, i // 3) for i in range(300))
    assert committed(bootstrap, group, topic, 3) == {0: 100, 1: 100, 2: 100}


def test_committed_offsets_survive_restart(
    bootstrap: str, create_topic: Callable[..., str], restart_broker: Callable[[], None]
) -> None:
    topic = create_topic(3)
    group = f"compat-restart-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    offsets = [TopicPartition(topic, p, 10 * (p + 1), metadata=f"m{p}") for p in range(3)]
    consumer.commit(offsets=offsets, asynchronous=False)
    consumer.close()
    restart_broker()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = _committed_once_coordinated(consumer, topic)
    finally:
        consumer.close()
    assert [(tp.partition, tp.offset, tp.metadata) for tp in found] == [
        (0, 10, "m0"),
        (1, 20, "m1"),
        (2, 30, "m2"),
    ]


def _committed_once_coordinated(consumer: Consumer, topic: str) -> list[TopicPartition]:
    """The committed offsets of the topic's three partitions, asked again while the broker,
    just restarted, is still loading its groups: Kafka 3.9 answers NOT_COORDINATOR then, and
    librdkafka's committed() gives that up to the caller instead of retrying."""
    loading = {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
    deadline = time.monotonic() + 60
    while True:
        try:
            return consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
        except KafkaException as exc:
            if exc.args[0].code() not in loading or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_victim_bookkeeping_reads_partial_lines(tmp_path: Path) -> None:
    """The log parser ignores the torn last line a SIGKILL can leave."""
    member = ConsumerProcess.__new__(ConsumerProcess)
    member.out = tmp_path / "x.log"
    member.out.write_text("C 1 5\nK 1 6\nC 1 6\nC 2")
    assert member.consumed() == [(1, 5), (1, 6)]
    assert member.last_commits() == {1: 6}


def test_static_member_restart_keeps_assignment_without_rebalance(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    """KIP-345: a restarted static member (same group.instance.id) gets its old partitions back
    at once, and the other member sees no rebalance."""
    topic = create_topic(2)
    group = f"compat-static-{uuid.uuid4().hex[:8]}"
    revoked: list[str] = []
    assigned: dict[str, list[int]] = {}

    def member(instance: str) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.instance.id": instance,
                "session.timeout.ms": 60_000,
                "heartbeat.interval.ms": 500,
            }
        )

        def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
            assigned[instance] = sorted(p.partition for p in partitions)

        def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
            revoked.append(instance)

        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        return consumer

    def pump(*consumers: Consumer) -> bool:
        """Let the consumers run their group protocol (callbacks fire inside poll)."""
        for consumer in consumers:
            consumer.poll(0.1)
        return True

    a, b = member("static-a"), member("static-b")
    try:
        wait_until(
            lambda: pump(a, b) and sorted(map(tuple, assigned.values())) == [(0,), (1,)],
            60,
            "both static members to get a partition",
        )
        before = dict(assigned)
        revoked.clear()
        a.close()  # a static member does not leave the group when it closes
        assigned.pop("static-a")
        started = time.monotonic()
        a = member("static-a")
        wait_until(
            lambda: pump(a, b) and "static-a" in assigned,
            30,
            "the restarted static member to get its partitions",
        )
        # Well within the 60 s session timeout: no waiting for the old incarnation to expire.
        assert time.monotonic() - started < 20
        assert assigned == before
        assert "static-b" not in revoked
    finally:
        a.close()
        b.close()
