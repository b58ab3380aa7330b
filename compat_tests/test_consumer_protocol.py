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

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.java_programs import JAVA_CLIENT_43, JavaPrograms
from compat_tests.support import wait_for_leaders, wait_until

CONSUMER_PROTOCOL_BROKERS = ("kbroker", "kafka43", "external")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.broker_kinds(*CONSUMER_PROTOCOL_BROKERS),
]

HEARTBEAT_INTERVAL_MS = 250
# Sessions long enough that a member on a loaded machine is not fenced between two heartbeats
# (which would move partitions the tests expect to stay), except in the test of a session
# that expires.
SESSION_TIMEOUT_MS = 15_000
EXPIRING_SESSION_TIMEOUT_MS = 4000
# Time for a group to settle after a change: heartbeats, reconciliation, a slow shared machine.
SETTLE_TIMEOUT_S = 90.0

Partition = tuple[str, int]


def set_group_timeouts(admin: AdminClient, group: str, session_timeout_ms: int) -> None:
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
                str(session_timeout_ms),
                incremental_operation=AlterConfigOpType.SET,
            ),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=20)


def new_group(admin: AdminClient, session_timeout_ms: int = SESSION_TIMEOUT_MS) -> str:
    group = f"compat-cgp-{uuid.uuid4().hex[:10]}"
    set_group_timeouts(admin, group, session_timeout_ms)
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
    """One confluent-kafka consumer (group.protocol=consumer unless `settings` say otherwise)
    polled on a thread of its own: it records every record it reads, commits after each batch
    (counting the commits the broker refused), and reports its rebalance callbacks to the
    ledger."""

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

    def stop(self) -> None:
        """Leave the group (the consumer's close() sends the leave heartbeat) and wait up to a
        minute for the thread."""
        self._stop.set()
        self._thread.join(60)

    def close(self) -> None:
        """`stop`, and check that the member closed without an error."""
        self.stop()
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
        # Generous: at load 40 Kafka 4.3 still held 2,454 records after 30 s.
        assert self._producer.flush(120) == 0


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


def shared_evenly(
    owned: dict[str, set[Partition]], members: list[str], partitions: set[Partition]
) -> bool:
    """Every partition owned, by these members only, in equal shares."""
    share = len(partitions) // len(members)
    return (
        set(owned) == set(members)
        and all(len(owned[m]) == share for m in members)
        and set().union(*owned.values()) == partitions
    )


def wait_for_even_shares(
    owned: Callable[[], dict[str, set[Partition]]],
    members: list[str],
    partitions: set[Partition],
    what: str,
) -> None:
    """Wait until `members` share `partitions` evenly; on time-out, fail with who owned what."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not shared_evenly(found := owned(), members, partitions):
        if time.monotonic() > deadline:
            shares = {m: sorted(p for _, p in tps) for m, tps in sorted(found.items())}
            pytest.fail(f"{members} did not share the partitions evenly {what}: {shares}")
        time.sleep(0.05)


@pytest.fixture
def stop_members() -> Iterator[list[Member]]:
    """Members a test started; whatever is still running at its end is closed."""
    members: list[Member] = []
    yield members
    for member in members:
        member.stop()


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
            wait_for_even_shares(ledger.owned, names, all_partitions, f"after m{n} joined")
            phases.append(f"join m{n}: {time.monotonic() - started:.2f} s")
            assert_only_moved_partitions_revoked(ledger, before, revoked_before)
        for _ in range(3):
            leaving = live.pop()
            before = ledger.owned()
            revoked_before = ledger.revocations()
            started = time.monotonic()
            leaving.close()
            names = [m.name for m in live]
            wait_for_even_shares(ledger.owned, names, all_partitions, f"after {leaving.name} left")
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
        f"records read twice {sum(len(m.consumed) for m in stop_members) - len(consumed)}; "
        f"commits refused {sum(len(m.commit_errors) for m in stop_members)}"
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


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def test_regex_subscription_picks_up_a_later_topic(
    bootstrap: str, admin: AdminClient, stop_members: list[Member]
) -> None:
    prefix = f"compat-cgp-regex-{uuid.uuid4().hex[:8]}"
    first, later = f"{prefix}-first", f"{prefix}-later"
    admin.create_topics([NewTopic(first, 2, 1)])[first].result(timeout=20)
    wait_for_leaders(admin, first, 2)
    produce(bootstrap, first, 20, 2)
    ledger = Ledger()
    member = Member("regex", bootstrap, new_group(admin), [f"^{prefix}-.*"], ledger)
    stop_members.append(member)
    wait_until(lambda: len(member.consumed) >= 20, SETTLE_TIMEOUT_S, f"the records of {first}")

    started = time.monotonic()
    admin.create_topics([NewTopic(later, 3, 1)])[later].result(timeout=20)
    wait_for_leaders(admin, later, 3)
    produce(bootstrap, later, 30, 3)
    wait_until(
        lambda: len({r for r in member.consumed if r[0] == later}) == 30,
        SETTLE_TIMEOUT_S,
        f"the records of {later}, created after the subscription",
    )
    print(f"{later} consumed {time.monotonic() - started:.2f} s after its creation")
    assert ledger.owned() == {"regex": {(first, 0), (first, 1), (later, 0), (later, 1), (later, 2)}}
    member.close()


def test_static_member_restart_keeps_its_partitions(
    bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    stop_members: list[Member],
) -> None:
    topic = create_topic(12)
    all_partitions = {(topic, p) for p in range(12)}
    group = new_group(admin)
    ledger = Ledger()
    for name in ("a", "b"):
        stop_members.append(
            Member(name, bootstrap, group, [topic], ledger, **{"group.instance.id": name})
        )
    wait_for_even_shares(ledger.owned, ["a", "b"], all_partitions, "after a and b joined")
    owned_by_a = ledger.owned()["a"]
    callbacks_of_b = ledger.callbacks["b"]

    started = time.monotonic()
    stop_members[0].close()
    stop_members.append(
        Member("a-again", bootstrap, group, [topic], ledger, **{"group.instance.id": "a"})
    )
    wait_until(
        lambda: len(ledger.owned().get("a-again", ())) == len(owned_by_a),
        SETTLE_TIMEOUT_S,
        "the restarted static member to get its partitions back",
    )
    print(f"static member back in {time.monotonic() - started:.2f} s")
    assert ledger.owned()["a-again"] == owned_by_a
    assert ledger.callbacks["b"] == callbacks_of_b
    assert ledger.double_owned == []


# A consumer process for the SIGKILL test: prints "A topic partition" for each partition
# assigned and "R topic partition" for each revoked, as its callbacks run.
KILLED_MEMBER_SCRIPT = r"""
import sys
from confluent_kafka import Consumer
bootstrap, group, topic = sys.argv[1:4]
consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "group.protocol": "consumer",
    "auto.offset.reset": "earliest",
})
def report(kind):
    def callback(consumer, partitions):
        lines = "".join(f"{kind} {tp.topic} {tp.partition}\n" for tp in partitions)
        print(lines, end="", flush=True)
    return callback
consumer.subscribe([topic], on_assign=report("A"), on_revoke=report("R"), on_lost=report("R"))
while True:
    consumer.poll(0.1)
"""


def test_killed_member_partitions_move_after_its_session(
    bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    stop_members: list[Member],
    tmp_path: Path,
) -> None:
    topic = create_topic(12)
    all_partitions = {(topic, p) for p in range(12)}
    group = new_group(admin, EXPIRING_SESSION_TIMEOUT_MS)
    ledger = Ledger()
    out = tmp_path / "victim.out"
    with open(out, "w") as stdout:
        victim = subprocess.Popen(
            [sys.executable, "-c", KILLED_MEMBER_SCRIPT, bootstrap, group, topic], stdout=stdout
        )
    try:

        def victim_owns() -> set[Partition]:
            owned: set[Partition] = set()
            for line in out.read_text().splitlines():
                kind, name, partition = line.split()
                (owned.add if kind == "A" else owned.discard)((name, int(partition)))
            return owned

        for name in ("m1", "m2"):
            stop_members.append(Member(name, bootstrap, group, [topic], ledger))

        def settled() -> bool:
            owned = ledger.owned()
            return (
                len(victim_owns()) == 4
                and all(len(owned.get(m, ())) == 4 for m in ("m1", "m2"))
                and set().union(victim_owns(), *owned.values()) == all_partitions
            )

        wait_until(settled, SETTLE_TIMEOUT_S, "three members with 4 partitions each")
        lost = victim_owns()
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.monotonic()
    finally:
        victim.kill()
        victim.wait(10)
    wait_for_even_shares(ledger.owned, ["m1", "m2"], all_partitions, "after the kill")
    delays = sorted(ledger.assigned_at[tp] - killed_at for tp in lost)
    print(f"killed member's partitions reassigned {delays[0]:.2f} to {delays[-1]:.2f} s after")
    # Its session expires EXPIRING_SESSION_TIMEOUT_MS after its last heartbeat, at most one interval
    # before the kill: not one of its partitions moves earlier.
    assert delays[0] >= (EXPIRING_SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS) / 1000 - 0.1
    assert ledger.double_owned == []


@pytest.fixture(scope="session")
def java43(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    """The Java scenario programs compiled against the 4.3 client (3.9 has no KIP-848)."""
    return JavaPrograms.compile(tmp_path_factory.mktemp("jvm-cgp"), JAVA_CLIENT_43)


def test_java_members_join_and_leave_while_producing(
    java43: JavaPrograms, bootstrap: str, admin: AdminClient, create_topic: Callable[..., str]
) -> None:
    topic = create_topic(12)
    group = new_group(admin)
    run = java43.run("ConsumerProtocolScenario", bootstrap, topic, group)
    assert run.returncode == 0 and run.passed == ["join", "leave", "records"], run.report()
    assert run.requests[("CONSUMER_GROUP_HEARTBEAT", 1)] > 0, run.requests
    assert not any(api in {"JOIN_GROUP", "SYNC_GROUP"} for api, _ in run.requests)
    print(next(line for line in run.stdout.splitlines() if line.startswith("figures ")))


class JavaMembers:
    """ConsumerProtocolMembers (compat_tests/jvm) running in the background: Java
    consumer-protocol members whose callbacks and records this reads from their output."""

    def __init__(
        self, java: JavaPrograms, bootstrap: str, topic: str, group: str, count: int, work: Path
    ) -> None:
        self.topic = topic
        self.out = work / "java-members.out"
        self.err = work / "java-members.err"
        self.stop_file = work / "java-members.stop"
        self.double_owned: list[str] = []
        with open(self.out, "w") as stdout, open(self.err, "w") as stderr:
            self.process = java.start(
                "ConsumerProtocolMembers",
                bootstrap,
                topic,
                group,
                str(count),
                str(self.stop_file),
                stdout=stdout,
                stderr=stderr,
            )

    def lines(self) -> list[list[str]]:
        text = self.out.read_text()
        return [line.split() for line in text[: text.rfind("\n") + 1].splitlines()]

    def owned(self) -> dict[str, set[Partition]]:
        """Member -> partitions, replaying the callbacks; an assignment of a partition another
        Java member still owns is recorded in `double_owned`."""
        owners: dict[Partition, str] = {}
        self.double_owned = []
        for line in self.lines():
            if line[0] == "A":
                tp = (self.topic, int(line[2]))
                if owners.get(tp, line[1]) != line[1]:
                    self.double_owned.append(" ".join(line))
                owners[tp] = line[1]
            elif line[0] == "R" and owners.get((self.topic, int(line[2]))) == line[1]:
                del owners[(self.topic, int(line[2]))]
        found: dict[str, set[Partition]] = defaultdict(set)
        for tp, member in owners.items():
            found[member].add(tp)
        return dict(found)

    def consumed(self) -> list[tuple[str, int, int]]:
        return [(self.topic, int(p), int(o)) for kind, _, p, o in self._records()]

    def _records(self) -> list[list[str]]:
        return [line for line in self.lines() if line[0] == "C" and len(line) == 4]

    def stop(self) -> None:
        """Close the members (they leave the group) and check that the program passed."""
        self.stop_file.touch()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        assert self.process.returncode == 0 and self.lines()[-1] == ["ok", "closed"], (
            f"ConsumerProtocolMembers exited with {self.process.returncode}\n"
            f"{self.err.read_text()[-4000:]}"
        )


def group_type(admin: AdminClient, group: str) -> ConsumerGroupType:
    description = admin.describe_consumer_groups([group])[group].result(timeout=20)
    return description.type


# Classic members of confluent-kafka: the cooperative assignor, and heartbeats frequent enough
# that a rebalance inside the consumer group reaches them within a second.
CLASSIC = {
    "group.protocol": "classic",
    "partition.assignment.strategy": "cooperative-sticky",
    "session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "heartbeat.interval.ms": "300",
}


def test_mixed_group_migrates_online_both_ways(
    java43: JavaPrograms,
    bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    stop_members: list[Member],
    tmp_path: Path,
) -> None:
    """Classic confluent-kafka members, then Java consumer-protocol members join (the group
    becomes a consumer group: upgrade), the classic members leave and others join, then the
    Java members leave (the last consumer-protocol member's leave makes it classic again:
    downgrade), all while a producer writes (KIP-848's online migration, Kafka's default
    group.consumer.migration.policy=bidirectional)."""
    topic = create_topic(12)
    all_partitions = {(topic, p) for p in range(12)}
    group = new_group(admin)
    ledger = Ledger()
    figures: list[str] = []
    producer = BackgroundProducer(bootstrap, topic, 12)
    java: JavaMembers | None = None

    def settle(members: list[str], what: str, started: float | None = None) -> None:
        started = time.monotonic() if started is None else started
        wait_for_even_shares(
            lambda: {**ledger.owned(), **(java.owned() if java else {})},
            members,
            all_partitions,
            f"after {what}",
        )
        figures.append(f"{what}: {time.monotonic() - started:.2f} s")

    try:
        for name in ("classic1", "classic2"):
            stop_members.append(Member(name, bootstrap, group, [topic], ledger, **CLASSIC))
        settle(["classic1", "classic2"], "two classic members joined")
        assert group_type(admin, group) == ConsumerGroupType.CLASSIC

        java = JavaMembers(java43, bootstrap, topic, group, 2, tmp_path)
        settle(["classic1", "classic2", "java0", "java1"], "two Java members joined (upgrade)")
        assert group_type(admin, group) == ConsumerGroupType.CONSUMER

        for member in stop_members[:2]:
            member.close()
        settle(["java0", "java1"], "the classic members left")
        for name in ("classic3", "classic4"):
            stop_members.append(Member(name, bootstrap, group, [topic], ledger, **CLASSIC))
        settle(["classic3", "classic4", "java0", "java1"], "two classic members joined")
        assert group_type(admin, group) == ConsumerGroupType.CONSUMER

        leaving = time.monotonic()
        java.stop()
        java_owned = java.owned()
        assert java.double_owned == []
        java_consumed = java.consumed()
        java = None
        settle(["classic3", "classic4"], "the Java members left (downgrade)", leaving)
        assert group_type(admin, group) == ConsumerGroupType.CLASSIC
    finally:
        producer.stop()
        if java is not None:
            java.process.kill()
            java.process.wait(10)
    assert java_owned == {}
    ends = log_ends(bootstrap, topic, 12)
    assert sum(ends.values()) == producer.sent
    wait_until(
        lambda: committed(bootstrap, group, sorted(all_partitions)) == ends,
        SETTLE_TIMEOUT_S,
        "the classic members to commit the log end offsets",
    )
    for member in stop_members[2:]:
        member.close()
    consumed = {r for m in stop_members for r in m.consumed} | set(java_consumed)
    expected = {(t, p, o) for (t, p), end in ends.items() for o in range(end)}
    assert expected - consumed == set()
    assert ledger.double_owned == []
    print(f"{producer.sent} records; {'; '.join(figures)}")
