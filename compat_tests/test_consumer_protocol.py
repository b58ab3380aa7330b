"""The consumer group protocol (KIP-848) with real clients, on kbroker and on Kafka 4.3.

confluent-kafka consumers with ``group.protocol=consumer`` (the broker assigns; the client
only reconciles):

- one to four members join and then leave a 12-partition topic while a producer writes:
  every record is consumed at least once, the committed offsets end at the log ends, no
  partition is ever owned by two members at once, and a member's partitions that do not move
  are never revoked while another member joins or leaves (counted through on_revoke);
- a regular expression subscription picks up a topic created after it;
- a static member (group.instance.id) that closes and comes back within its session gets
  its partitions back, and the other member's callbacks are not called;
- a member killed with SIGKILL: its partitions go to the others once its session expired.

Kafka 3.9 has no KIP-848 consumer protocol (its ConsumerGroupHeartbeat is an early-access
API off by default), so the module runs against kbroker and Kafka 4.3 (or the broker that
KBROKER_BOOTSTRAP names). The session brokers accept group heartbeat intervals and session
timeouts down to those in `compat_tests.conftest.CONSUMER_GROUP_BOUNDS`; each test sets its
group's own (``consumer.heartbeat.interval.ms`` and ``consumer.session.timeout.ms`` on the
GROUP config resource, KIP-848), so that a rebalance takes a second, not Kafka's default 5 s
heartbeats.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests.conftest import brokers_under_test
from compat_tests.support import wait_until

CONSUMER_PROTOCOL_BROKERS = ("kbroker", "kafka43", "external")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.parametrize(
        "broker_kind",
        [kind for kind in brokers_under_test() if kind in CONSUMER_PROTOCOL_BROKERS],
        scope="session",
    ),
]

HEARTBEAT_INTERVAL_MS = 250
SESSION_TIMEOUT_MS = 4000
# Time for a group to settle after a change: heartbeats, reconciliation, a slow shared machine.
SETTLE_TIMEOUT_S = 45.0

Partition = tuple[str, int]


def set_group_timeouts(admin: AdminClient, group: str) -> None:
    """The group's own heartbeat interval and session timeout (GROUP config resource)."""
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "consumer.heartbeat.interval.ms",
                str(HEARTBEAT_INTERVAL_MS),
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry(
                "consumer.session.timeout.ms",
                str(SESSION_TIMEOUT_MS),
                incremental_operation=AlterConfigOpType.SET,
            ),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=20)


def new_group(admin: AdminClient) -> str:
    group = f"compat-cgp-{uuid.uuid4().hex[:10]}"
    set_group_timeouts(admin, group)
    return group


@dataclass
class Ledger:
    """Who owns which partition, as the members' rebalance callbacks tell it.

    A member's on_revoke runs before the client acknowledges the revocation to the broker,
    and another member's on_assign of the same partition only after the broker saw that
    acknowledgement, so an assignment of a partition some other member still owns here is an
    assignment of a partition owned twice.
    """

    owners: dict[Partition, str] = field(default_factory=dict)
    double_owned: list[tuple[Partition, str, str]] = field(default_factory=list)
    revoked: dict[str, list[Partition]] = field(default_factory=lambda: defaultdict(list))
    callbacks: Counter[str] = field(default_factory=Counter)
    assigned_at: dict[Partition, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def assign(self, member: str, partitions: list[Partition]) -> None:
        with self.lock:
            self.callbacks[member] += 1
            for tp in partitions:
                owner = self.owners.get(tp)
                if owner is not None and owner != member:
                    self.double_owned.append((tp, owner, member))
                self.owners[tp] = member
                self.assigned_at[tp] = time.monotonic()

    def revoke(self, member: str, partitions: list[Partition]) -> None:
        with self.lock:
            self.callbacks[member] += 1
            for tp in partitions:
                if self.owners.get(tp) == member:
                    del self.owners[tp]
                self.revoked[member].append(tp)

    def owned(self) -> dict[str, set[Partition]]:
        with self.lock:
            found: dict[str, set[Partition]] = defaultdict(set)
            for tp, member in self.owners.items():
                found[member].add(tp)
            return dict(found)

    def revocations(self) -> dict[str, int]:
        with self.lock:
            return {member: len(tps) for member, tps in self.revoked.items()}


class Member:
    """One confluent-kafka consumer (group.protocol=consumer) polled on a thread of its own:
    it records every record it reads, commits after each batch, and reports its rebalance
    callbacks to the ledger."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        group: str,
        subscription: list[str],
        ledger: Ledger,
        **settings: str,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.consumed: list[tuple[str, int, int]] = []
        self.commit_errors: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "client.id": name,
                **settings,
            }
        )
        self._consumer.subscribe(
            subscription,
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.ledger.assign(self.name, [(tp.topic, tp.partition) for tp in partitions])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.ledger.revoke(self.name, [(tp.topic, tp.partition) for tp in partitions])

    def _run(self) -> None:
        try:
            uncommitted = False
            while not self._stop.is_set():
                records = [m for m in self._consumer.consume(500, 0.1) if m.error() is None]
                self.consumed.extend((m.topic(), m.partition(), m.offset()) for m in records)
                if not (records or uncommitted):
                    continue
                try:
                    self._consumer.commit(asynchronous=False)
                    uncommitted = False
                except KafkaException as exc:
                    if exc.args[0].code() == KafkaError._NO_OFFSET:
                        uncommitted = False
                        continue
                    # A commit racing a revocation is refused (STALE_MEMBER_EPOCH, ...): tried
                    # again after the next poll; records the next owner reads again are
                    # consumed at least once.
                    self.commit_errors.append(str(exc))
                    uncommitted = True
        except Exception as exc:  # noqa: BLE001 - reported by the test through `errors`
            self.errors.append(repr(exc))
        finally:
            self._consumer.close()

    def close(self) -> None:
        """Leave the group (close() sends the leave heartbeat) and wait for the thread."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), f"{self.name} did not close within 60 s"
        assert not self.errors, f"{self.name}: {self.errors}"


class BackgroundProducer:
    """Writes records round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic = topic
        self._partitions = partitions
        self._stop = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(self._partitions):
                self._producer.produce(
                    self._topic,
                    value=f"v{self.sent}".encode(),
                    partition=self.sent % self._partitions,
                )
                self.sent += 1
            self._producer.poll(0)
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(30) == 0


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[Partition, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-cgp-watermarks"})
    try:
        return {
            (topic, p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, partitions: list[Partition]) -> dict[Partition, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
        return {(tp.topic, tp.partition): tp.offset for tp in found}
    finally:
        consumer.close()


def balanced(ledger: Ledger, members: list[str], partitions: set[Partition]) -> bool:
    """Every partition owned, by these members only, in equal shares."""
    owned = ledger.owned()
    share = len(partitions) // len(members)
    return (
        set(owned) == set(members)
        and all(len(owned[m]) == share for m in members)
        and (set().union(*owned.values()) == partitions)
    )


@pytest.fixture
def stop_members() -> Iterator[list[Member]]:
    """Members a test started; whatever is still running at its end is closed."""
    members: list[Member] = []
    yield members
    for member in members:
        member._stop.set()
    for member in members:
        member._thread.join(60)


def test_members_join_and_leave_while_producing(
    bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    stop_members: list[Member],
) -> None:
    partitions = 12
    topic = create_topic(partitions)
    all_partitions = {(topic, p) for p in range(partitions)}
    group = new_group(admin)
    ledger = Ledger()
    producer = BackgroundProducer(bootstrap, topic, partitions)
    live: list[Member] = []
    phases: list[str] = []
    try:
        for n in range(1, 5):
            before = ledger.owned()
            revoked_before = ledger.revocations()
            started = time.monotonic()
            member = Member(f"m{n}", bootstrap, group, [topic], ledger)
            stop_members.append(member)
            live.append(member)
            names = [m.name for m in live]
            wait_until(
                lambda names=names: balanced(ledger, names, all_partitions),
                SETTLE_TIMEOUT_S,
                f"{names} to share the partitions evenly",
            )
            phases.append(f"join m{n}: {time.monotonic() - started:.2f} s")
            assert_only_moved_partitions_revoked(ledger, before, revoked_before)
        for _ in range(3):
            leaving = live.pop()
            before = ledger.owned()
            revoked_before = ledger.revocations()
            started = time.monotonic()
            leaving.close()
            names = [m.name for m in live]
            wait_until(
                lambda names=names: balanced(ledger, names, all_partitions),
                SETTLE_TIMEOUT_S,
                f"{names} to share the partitions evenly after {leaving.name} left",
            )
            phases.append(f"leave {leaving.name}: {time.monotonic() - started:.2f} s")
            assert_only_moved_partitions_revoked(ledger, before, revoked_before)
    finally:
        producer.stop()
    ends = log_ends(bootstrap, topic, partitions)
    assert sum(ends.values()) == producer.sent
    wait_until(
        lambda: committed(bootstrap, group, sorted(all_partitions)) == ends,
        SETTLE_TIMEOUT_S,
        "the last member to commit the log end offsets",
    )
    live[0].close()
    consumed = {(t, p, o) for m in stop_members for t, p, o in m.consumed}
    expected = {(t, p, o) for (t, p), end in ends.items() for o in range(end)}
    assert expected - consumed == set()
    assert ledger.double_owned == []
    print(
        f"{producer.sent} records; {'; '.join(phases)}; revocations per member "
        f"{dict(sorted(ledger.revocations().items()))}; "
        f"records read twice {sum(len(m.consumed) for m in stop_members) - len(consumed)}"
    )


def assert_only_moved_partitions_revoked(
    ledger: Ledger, before: dict[str, set[Partition]], revoked_before: dict[str, int]
) -> None:
    """Each member that was in the group before the change lost only partitions it no
    longer owns: what it kept was never revoked on the way."""
    after = ledger.owned()
    with ledger.lock:
        for member, owned_before in before.items():
            revoked = set(ledger.revoked[member][revoked_before.get(member, 0) :])
            kept = owned_before & after.get(member, set())
            assert not revoked & kept, (
                f"{member} had {sorted(revoked & kept)} revoked and then given back"
            )
