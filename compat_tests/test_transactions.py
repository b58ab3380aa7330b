"""Transactions with confluent-kafka (librdkafka): commit and abort, read_committed and
read_uncommitted consumers, fencing, and an exactly-once consume-transform-produce loop that
survives being SIGKILLed; and the transactional producers of kafka-python and aiokafka."""

import random
import signal
import time
from collections import Counter
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition as AIOTopicPartition
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaProducer

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


def test_kafka_python_transactional_producer(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-tx")
    producer.init_transactions()
    for n, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        for i in range(5):
            producer.send(topic, value=f"{n}-{i}".encode(), partition=0)
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()
    committed = [f"{n}-{i}".encode() for n in (0, 2) for i in range(5)]
    assert read_values(bootstrap, topic, 1, "read_committed", 10) == committed
    assert len(read_values(bootstrap, topic, 1, "read_uncommitted", 15)) == 15


async def test_aiokafka_transactions_with_offsets(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    source, sink = create_topic(), create_topic()
    group = f"{source}-group"
    seed = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        seed.produce(source, value=b"in-%d" % i, partition=0)
    assert seed.flush(30) == 0
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{source}-tx")
    await producer.start()
    try:
        # Committed with the first five offsets, then aborted with the next five.
        for first, commit in ((0, True), (5, False)):
            await producer.begin_transaction()
            for i in range(first, first + 5):
                await producer.send_and_wait(sink, b"OUT-%d" % i, partition=0)
            await producer.send_offsets_to_transaction(
                {AIOTopicPartition(source, 0): first + 5}, group
            )
            if commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
    finally:
        await producer.stop()
    assert read_values(bootstrap, sink, 1, "read_committed", 5) == [b"OUT-%d" % i for i in range(5)]
    assert committed_offsets(bootstrap, group, source, 1) == [5]
