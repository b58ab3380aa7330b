"""Share groups (KIP-932) with Apache Kafka's Java KafkaShareConsumer (kafka-clients 4.3).

Each consumer is a JVM of its own (compat_tests/share_workers.py), which logs every record a
poll hands it (with the delivery count the broker sent) and every acknowledgement the broker
confirmed, so the tests check what the broker did record by record: one consumer at a time per
record, each record accepted exactly once, RELEASE redelivers, REJECT archives, a record
released every time is archived at the delivery count limit, a SIGKILLed consumer's records go
to the others as soon as its connection closes, and read_committed hides aborted
transactions.

The module starts a broker of its own per kind (kbroker and Kafka 4.3 in KRaft mode; the share
consumer needs a broker of 4.x), with `group.share.min.record.lock.duration.ms` lowered to
1 s so that a group may set a 5 s lock and the broker-kill test redelivers in seconds, not the
default minimum of 15 s. Groups read from the earliest offset (`share.auto.offset.reset`, a
group config set with the Java Admin client, as Kafka's README for 4.3 does with
kafka-configs.sh).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.broker_process import BrokerProcess, BrokerStartError
from compat_tests.kafka_process import KRaftKafkaProcess, kafka43_available
from compat_tests.share_workers import (
    Acquisition,
    ShareWorkers,
    accepted_counts,
    acks_of,
    acquisitions_of,
    assert_at_least_once,
)
from compat_tests.support import require, wait_for_leaders

SHARE_BROKERS = ("kbroker", "kafka43")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.broker_kinds(*SHARE_BROKERS),
]

# Long enough for a consumer on a loaded 2-core machine to acknowledge in time.
LOCK_MS = 5000
SHARE_BROKER_SETTINGS = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.max.record.lock.duration.ms": "600000",
}
EARLIEST = {"share.auto.offset.reset": "earliest"}
# The killed consumer's records: locked for 5 min, back with the others well within that,
# once its connection closed. (With Kafka's default 30 s, a machine at load 40 let the lock
# expire before the kill: the records came back then, not because of the kill.)
KILLED_LOCK_MS = 300_000
RELEASED_WITHIN_MS = 10_000
# How far a consumer's clock reading after a poll may trail the broker's acquisition.
CLOCK_SLACK_MS = 500


@pytest.fixture(scope="session")
def share_broker(
    broker_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    require(kafka43_available(), "Apache Kafka 4.3 is missing from ../shared/kafka-4.3")
    work = tmp_path_factory.mktemp(f"share-{broker_kind}")
    broker = (
        BrokerProcess(work, overrides=SHARE_BROKER_SETTINGS)
        if broker_kind == "kbroker"
        else KRaftKafkaProcess(work, overrides=SHARE_BROKER_SETTINGS)
    )
    try:
        broker.start(timeout=180.0)
    except BrokerStartError as exc:
        pytest.fail(f"could not start {broker_kind}: {exc}", pytrace=False)
    yield broker
    broker.stop(timeout=30.0)


@pytest.fixture(autouse=True)
def broker_survives_test(share_broker: BrokerProcess) -> Iterator[None]:
    """conftest's check, on this module's broker (which keeps the session's own broker from
    being started for nothing)."""
    yield
    if not share_broker.running():
        pytest.fail(f"the broker process died during this test\n{share_broker.stderr_tail()}")


@pytest.fixture(scope="session")
def share_build(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp(f"share-jvm-{broker_kind}")


@pytest.fixture
def workers(
    share_broker: BrokerProcess, share_build: Path, tmp_path: Path
) -> Iterator[ShareWorkers]:
    found = ShareWorkers.compile(share_build, share_broker.bootstrap, tmp_path / "workers")
    yield found
    found.kill_all()


def create_topic(bootstrap: str, partitions: int = 1) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"share-{uuid.uuid4().hex[:10]}"
    new = NewTopic(name, num_partitions=partitions, replication_factor=1)
    admin.create_topics([new], operation_timeout=10)[name].result(timeout=20)
    wait_for_leaders(admin, name, partitions)
    return name


def produce(bootstrap: str, topic: str, count: int, first: int = 0) -> None:
    """`count` records in batches of at most 100: a share partition hands over whole batches,
    so one batch of everything would go to a single consumer."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 100})
    for i in range(first, first + count):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def new_group(workers: ShareWorkers, **configs: str) -> str:
    group = f"share-group-{uuid.uuid4().hex[:8]}"
    workers.configure(group, {**EARLIEST, **configs})
    return group


def assert_one_holder_at_a_time(
    acquisitions: dict[tuple[int, int], list[Acquisition]],
    released_at: dict[tuple[int, int], list[int]],
    lock_ms: int,
) -> None:
    """Each record's deliveries have distinct counts, and each one after the first came after
    the record was released by its previous holder (an acknowledgement sent before) or after
    the previous holder's lock expired."""
    for record, found in acquisitions.items():
        counts = [a.delivery_count for a in found]
        assert counts == sorted(set(counts)), f"{record}: delivery counts {counts}"
        for previous, current in zip(found, found[1:], strict=False):
            released = any(
                previous.time_ms <= t <= current.time_ms for t in released_at.get(record, [])
            )
            expired = current.time_ms >= previous.time_ms + lock_ms - CLOCK_SLACK_MS
            assert released or expired, f"{record}: acquired by two at once: {found}"


def test_four_consumers_share_one_partition(workers: ShareWorkers) -> None:
    topic = create_topic(workers.bootstrap)
    records = 10_000
    group = new_group(workers)
    # The records come once every consumer has subscribed, and each takes a little work
    # (5 ms) in polls of at most 100 records, so that the first consumers cannot take them
    # all before the last one's assignment arrives with its next heartbeat (up to
    # group.share.heartbeat.interval.ms, 5 s, after it subscribed: with 1 ms of work a quiet
    # machine let three consumers take all 10,000 records in 3.3 s).
    consumers = [
        workers.start(f"c{i}", group, topic, max_poll_records="100", work_us="5000")
        for i in range(4)
    ]
    workers.wait_until(
        lambda: all(c.has_line(f"ready {c.name}") for c in consumers), 60, "subscriptions"
    )
    produce(workers.bootstrap, topic, records)
    workers.wait_until(
        lambda: len(accepted_counts(consumers)) == records, 180, "all records accepted"
    )
    workers.stop_all()
    accepted = accepted_counts(consumers)
    assert sorted(accepted) == [(0, offset) for offset in range(records)]
    assert set(accepted.values()) == {1}, "a record was accepted twice"
    for consumer in consumers:
        assert consumer.acquisitions(), f"{consumer.name} received no record"
        assert not consumer.failures(), consumer.failures()
    acquisitions = acquisitions_of(consumers)
    assert len(acquisitions) == records
    assert_one_holder_at_a_time(acquisitions, {}, lock_ms=30_000)


def test_release_redelivers_and_reject_archives(workers: ShareWorkers) -> None:
    topic = create_topic(workers.bootstrap)
    records = 301
    produce(workers.bootstrap, topic, records)
    releasing, rejecting = new_group(workers), new_group(workers)
    # Every third record (offset % 3 == 0) is released on its first delivery and accepted on
    # its second by one group, and rejected by the other.
    releaser = workers.start("releaser", releasing, topic, ack="release-every-3")
    rejecter = workers.start("rejecter", rejecting, topic, ack="reject-every-3")
    everything = [(0, offset) for offset in range(records)]
    workers.wait_until(
        lambda: sorted(accepted_counts([releaser])) == everything, 120, "released ones accepted"
    )
    kept = [(0, offset) for offset in range(records) if offset % 3]
    workers.wait_until(lambda: sorted(accepted_counts([rejecter])) == kept, 120, "the rest")
    # A record after the rejected ones (offset 301, accepted by both policies): once it is
    # accepted, a rejected record that came back would have been handed over first (a share
    # partition delivers in offset order).
    produce(workers.bootstrap, topic, 1, first=records)
    workers.wait_until(
        lambda: (0, records) in accepted_counts([rejecter]), 60, "the last record accepted"
    )
    workers.stop_all()

    released = acquisitions_of([releaser])
    for (_, offset), found in released.items():
        expected = [1, 2] if offset % 3 == 0 else [1]
        assert [a.delivery_count for a in found] == expected, (offset, found)
    release_times = {
        record: [a.time_ms for a in acks if a.type == "RELEASE"]
        for record, acks in acks_of([releaser]).items()
    }
    assert_one_holder_at_a_time(released, release_times, lock_ms=30_000)

    rejected = acquisitions_of([rejecter])
    assert all([a.delivery_count for a in found] == [1] for found in rejected.values())
    rejects = {r for r, acks in acks_of([rejecter]).items() if acks[0].type == "REJECT"}
    assert rejects == {(0, offset) for offset in range(0, records, 3)}


def test_released_every_time_archived_at_delivery_count_limit(workers: ShareWorkers) -> None:
    topic = create_topic(workers.bootstrap)
    records, limit = 50, 3
    produce(workers.bootstrap, topic, records)
    group = new_group(workers, **{"share.delivery.count.limit": str(limit)})
    releaser = workers.start("releaser", group, topic, ack="release")
    workers.wait_until(
        lambda: sum(a.delivery_count == limit for a in releaser.acquisitions()) == records,
        120,
        f"every record delivered {limit} times",
    )
    workers.stop_all()
    for (_, offset), found in acquisitions_of([releaser]).items():
        assert [a.delivery_count for a in found] == list(range(1, limit + 1)), (offset, found)
    # Released at the limit, each record is archived: an accepting consumer of the group gets
    # only a record produced afterwards.
    accepter = workers.start("accepter", group, topic)
    produce(workers.bootstrap, topic, 1, first=records)
    workers.wait_until(lambda: accepted_counts([accepter]), 60, "the new record accepted")
    workers.stop_all()
    assert [(a.offset, a.delivery_count) for a in accepter.acquisitions()] == [(records, 1)]


def test_killed_consumer_records_go_to_the_others_at_once(workers: ShareWorkers) -> None:
    """A consumer SIGKILLed holding records: its connection closes, which ends its share
    session, and the broker releases what it held (KIP-932; Kafka 4.3 does so at once): the
    others, already fetching, get those records well before their 30 s locks would expire,
    with delivery count 2 (the release does not take back the delivery)."""
    topic = create_topic(workers.bootstrap)
    held_records = 50
    produce(workers.bootstrap, topic, held_records)
    group = new_group(workers, **{"share.record.lock.duration.ms": str(KILLED_LOCK_MS)})
    holder = workers.start("holder", group, topic, hold="true", max_poll_records="50")
    workers.wait_until(lambda: holder.has_line("holding holder"), 60, "the holder's records")
    held = {(a.partition, a.offset): a for a in holder.acquisitions()}
    assert held
    # The others are in the group and fetching before the kill: they consume records
    # produced once the holder holds its own.
    others = [workers.start(f"c{i}", group, topic) for i in range(2)]
    later = [(0, offset) for offset in range(held_records, 2 * held_records)]
    produce(workers.bootstrap, topic, held_records, first=held_records)
    workers.wait_until(
        lambda: set(later) <= set(accepted_counts(others)), 120, "the later records accepted"
    )
    killed_ms = time.time() * 1000
    holder.kill()
    everything = [(0, offset) for offset in range(2 * held_records)]
    workers.wait_until(
        lambda: sorted(accepted_counts(others)) == everything, 120, "all records accepted"
    )
    workers.stop_all()
    accepted = accepted_counts(others)
    assert set(accepted.values()) == {1}
    acquisitions = acquisitions_of([holder, *others])
    for record, first in held.items():
        found = acquisitions[record]
        assert found[0] == first and len(found) >= 2, found
        again = found[1]
        assert again.consumer != "holder" and again.delivery_count == 2, found
        assert again.time_ms >= killed_ms - CLOCK_SLACK_MS, found
        assert again.time_ms <= killed_ms + RELEASED_WITHIN_MS, found
    killed = {record: [int(killed_ms)] for record in held}
    assert_one_holder_at_a_time(acquisitions, killed, lock_ms=KILLED_LOCK_MS)


def test_read_committed_share_group_skips_aborted_transactions(workers: ShareWorkers) -> None:
    topic = create_topic(workers.bootstrap)
    producer = Producer({"bootstrap.servers": workers.bootstrap, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(30)
    committed: list[int] = []
    aborted: list[int] = []

    def delivered_to(into: list[int]) -> object:
        def on_delivery(err: KafkaException | None, message: object) -> None:
            assert err is None, err
            into.append(message.offset())  # type: ignore[attr-defined]

        return on_delivery

    for n, outcome in enumerate(["commit", "abort", "commit", "abort", "commit"]):
        producer.begin_transaction()
        into = committed if outcome == "commit" else aborted
        for i in range(20):
            value = f"{outcome}-{n}-{i}".encode()
            producer.produce(topic, value=value, on_delivery=delivered_to(into))
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    group = new_group(workers, **{"share.isolation.level": "read_committed"})
    consumer = workers.start("reader", group, topic)
    expected = sorted((0, offset) for offset in committed)
    workers.wait_until(
        lambda: sorted(accepted_counts([consumer])) == expected, 60, "committed records"
    )
    workers.stop_all()
    acquired = {a.offset for a in consumer.acquisitions()}
    assert acquired == set(committed), f"aborted offsets acquired: {acquired & set(aborted)}"


def test_broker_killed_mid_consumption(workers: ShareWorkers, share_broker: BrokerProcess) -> None:
    """kill -9 of the broker while two consumers acknowledge, then a restart: every record is
    accepted, once, and no record is handed over again after an acknowledgement the broker
    confirmed (at-least-once, counted per record)."""
    topic = create_topic(workers.bootstrap)
    records = 3000
    produce(workers.bootstrap, topic, records)
    group = new_group(workers, **{"share.record.lock.duration.ms": str(LOCK_MS)})
    consumers = [
        workers.start(f"c{i}", group, topic, max_poll_records="50", work_us="2000")
        for i in range(2)
    ]
    workers.wait_until(lambda: len(accepted_counts(consumers)) >= 500, 180, "500 accepted")
    share_broker.kill()
    killed_with = len(accepted_counts(consumers))
    share_broker.start(timeout=180.0)
    everything = [(0, offset) for offset in range(records)]
    workers.wait_until(
        lambda: sorted(accepted_counts(consumers)) == everything, 300, "all records accepted"
    )
    workers.stop_all()
    assert killed_with < records, "the broker was killed after the consumers had finished"
    assert_at_least_once(consumers, everything)
