"""Transactions with confluent-kafka (librdkafka): commit and abort, read_committed and
read_uncommitted consumers, fencing, and an exactly-once consume-transform-produce loop that
survives being SIGKILLed."""

import random
import signal
import time
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_tests.eos_support import committed_offsets, end_offsets, read_values, start_worker


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
    assert sorted(read_values(bootstrap, topic, 2, "read_committed", len(committed))) == sorted(
        committed
    )
    assert sorted(read_values(bootstrap, topic, 2, "read_uncommitted", 60)) == sorted(
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
    assert read_values(bootstrap, topic, 1, "read_committed", 1) == [b"fresh"]


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
        worker = start_worker(bootstrap, source, sink, total)
        while progress() < fraction * total:
            assert worker.poll() is None, "the worker stopped before it could be killed"
            time.sleep(0.05)
        # Somewhere inside a later transaction (or between two).
        time.sleep(rng.uniform(0.0, 0.3))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        kills += 1
    watcher.close()
    worker = start_worker(bootstrap, source, sink, total)
    assert worker.wait(timeout=600) == 0
    assert kills == 3
    output = read_values(bootstrap, sink, partitions, "read_committed", total)
    expected = Counter(b"RECORD-%06d" % i for i in range(total))
    assert Counter(output) == expected
    # What the killed incarnations left behind is in the log, aborted (read_uncommitted).
    everything = read_values(bootstrap, sink, partitions, "read_uncommitted", total)
    assert set(everything) == set(expected)
    print(f"records in the output log: {len(everything)}, committed: {len(output)}")
    assert committed_offsets(bootstrap, group, source, partitions) == end_offsets(total, partitions)
