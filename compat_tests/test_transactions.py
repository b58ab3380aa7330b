"""Transactions with confluent-kafka (librdkafka): commit and abort, read_committed and
read_uncommitted consumers, fencing, and an exactly-once consume-transform-produce loop that
survives being SIGKILLed."""

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_tests.broker_process import REPO_ROOT


def _read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, expect: int
) -> list[bytes]:
    """Every record of `topic` visible at `isolation`, reading until `expect` arrived and the
    consumer is at the end (or 30 s pass)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(values) >= expect and len(at_end) == partitions):
        for m in consumer.consume(1000, timeout=0.5):
            if m.error() is None:
                values.append(m.value())
                at_end.discard(m.partition())
            elif m.error().code() == -191:  # _PARTITION_EOF
                at_end.add(m.partition())
    consumer.close()
    return values


def _producer(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    return producer


def test_committed_and_aborted_transactions(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic(partitions=2)
    producer = _producer(bootstrap, f"{topic}-tx")
    committed, aborted = [], []
    for n in range(6):
        producer.begin_transaction()
        values = [f"{n}-{i}".encode() for i in range(10)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value, partition=i % 2)
        if n % 3 == 1:
            # Written to the log first, so that read_uncommitted has them to show.
            producer.flush(30)
            producer.abort_transaction(30)
            aborted += values
        else:
            producer.commit_transaction(30)
            committed += values
    assert sorted(_read_all(bootstrap, topic, 2, "read_committed", len(committed))) == sorted(
        committed
    )
    assert sorted(_read_all(bootstrap, topic, 2, "read_uncommitted", 60)) == sorted(
        committed + aborted
    )


def test_init_transactions_fences_the_older_producer(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    old = _producer(bootstrap, f"{topic}-tx")
    old.begin_transaction()
    old.produce(topic, value=b"zombie")
    old.flush(30)
    new = _producer(bootstrap, f"{topic}-tx")
    with pytest.raises(KafkaException) as raised:
        old.produce(topic, value=b"zombie-2")
        old.commit_transaction(30)
    assert raised.value.args[0].fatal()
    new.begin_transaction()
    new.produce(topic, value=b"fresh")
    new.commit_transaction(30)
    # The zombie's open transaction was aborted by the fencing.
    assert _read_all(bootstrap, topic, 1, "read_committed", 1) == [b"fresh"]


def _committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    consumer.close()
    return [tp.offset for tp in offsets]


def _run_worker(bootstrap: str, source: str, sink: str, total: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "compat_tests.eos_worker",
            bootstrap,
            source,
            sink,
            f"{source}-group",
            f"{source}-eos",
            str(total),
        ],
        cwd=REPO_ROOT,
    )


@pytest.mark.slow
def test_exactly_once_loop_survives_sigkill(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    total, partitions = 100_000, 3
    source = create_topic(partitions=partitions)
    sink = create_topic(partitions=partitions)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20}
    )
    for i in range(total):
        producer.produce(source, value=b"record-%06d" % i, partition=i % partitions)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    group = f"{source}-group"
    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    wanted = [TopicPartition(source, p) for p in range(partitions)]

    def progress() -> int:
        return sum(max(tp.offset, 0) for tp in watcher.committed(wanted, timeout=30))

    rng = random.Random(11)
    kills = 0
    for fraction in (0.2, 0.45, 0.7):
        worker = _run_worker(bootstrap, source, sink, total)
        while progress() < fraction * total:
            assert worker.poll() is None, "the worker stopped before it could be killed"
            time.sleep(0.05)
        # Somewhere inside a later transaction (or between two).
        time.sleep(rng.uniform(0.0, 0.3))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        kills += 1
    watcher.close()
    worker = _run_worker(bootstrap, source, sink, total)
    assert worker.wait(timeout=600) == 0
    assert kills == 3
    output = _read_all(bootstrap, sink, partitions, "read_committed", total)
    expected = Counter(b"RECORD-%06d" % i for i in range(total))
    assert Counter(output) == expected
    # What the killed incarnations left behind is in the log, aborted (read_uncommitted).
    everything = _read_all(bootstrap, sink, partitions, "read_uncommitted", total)
    assert set(everything) == set(expected)
    print(f"records in the output log: {len(everything)}, committed: {len(output)}")
    ends = [total // partitions + (1 if p < total % partitions else 0) for p in range(partitions)]
    assert _committed_offsets(bootstrap, group, source, partitions) == ends
