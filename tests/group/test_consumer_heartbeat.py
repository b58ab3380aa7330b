"""The consumer group protocol (KIP-848) in the pure group state machine, with a fake clock
and a fake topic view: joining, reconciliation without a partition ever owned twice, fencing,
leaving, static membership, regex subscriptions, timeouts and recovery from the records."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.group.assignors import TopicSpec
from kbroker.group.consumer_group import MemberState
from kbroker.group.consumer_records import TargetEpochValue
from kbroker.group.events import (
    ConsumerHeartbeat,
    Effect,
    GroupConfig,
    GroupState,
    HeartbeatResult,
    Reply,
    StoreRecords,
)
from kbroker.group.offsets_store import LoadedState, encode_key, encode_value
from kbroker.group.state_machine import GroupStateMachine
from wire.errors import ErrorCode as E

PARTITIONS = 1
T = uuid.UUID(int=10)
T2 = uuid.UUID(int=11)
G = "g"


@dataclass
class Topics:
    """A TopicsView: name -> (id, partitions)."""

    table: dict[str, tuple[uuid.UUID, int]] = field(default_factory=lambda: {"t": (T, 4)})
    version: int = 1

    def topic(self, name: str) -> TopicSpec | None:
        found = self.table.get(name)
        if found is None:
            return None
        return TopicSpec(found[0], name, found[1], {})

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return next((name for name, (i, _) in self.table.items() if i == topic_id), None)

    def names(self) -> Iterable[str]:
        return list(self.table)


class Harness:
    def __init__(self, config: GroupConfig | None = None) -> None:
        self.now = 1_000_000
        self.ids = iter(f"m{i}" for i in range(100, 1000))
        self.topics = Topics()
        self.core = GroupStateMachine(
            # A new target assignment at every epoch change, unless a test spaces them.
            config or GroupConfig(consumer_assignment_interval_ms=0),
            lambda: self.now,
            PARTITIONS,
            new_uuid=lambda: next(self.ids),
            topics=self.topics,
        )
        self.core.begin_load(0)
        self.core.complete_load(0, LoadedState())
        self.token = 0
        self.replies: dict[int, HeartbeatResult] = {}
        self.stored: list[tuple[Any, Any]] = []
        self.held: list[StoreRecords] = []
        self.hold = False

    def perform(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Reply):
                assert isinstance(effect.result, HeartbeatResult)
                self.replies[effect.token] = effect.result
            elif isinstance(effect, StoreRecords):
                if self.hold:
                    self.held.append(effect)
                    continue
                self.stored.extend(effect.records)
                self.perform(self.core.records_stored(effect.store_id, E.NONE))

    def release(self, error: E = E.NONE) -> None:
        self.hold = False
        held, self.held = self.held, []
        for effect in held:
            if error == E.NONE:
                self.stored.extend(effect.records)
            self.perform(self.core.records_stored(effect.store_id, error))

    def heartbeat(self, member_id: str, epoch: int, **kw: Any) -> HeartbeatResult | None:
        full = epoch == 0
        req = ConsumerHeartbeat(
            group_id=kw.pop("group", G),
            member_id=member_id,
            member_epoch=epoch,
            instance_id=kw.pop("instance", None),
            rack_id=None,
            rebalance_timeout_ms=kw.pop("rebalance_timeout", 60_000 if full else -1),
            subscribed_topic_names=kw.pop("topics", ("t",) if full else None),
            subscribed_topic_regex=kw.pop("regex", None),
            server_assignor=kw.pop("assignor", None),
            owned=kw.pop("owned", {} if full else None),
            client_id="client",
            client_host="/127.0.0.1",
            topic_describable=kw.pop("describable", None),
        )
        assert not kw, kw
        self.token += 1
        token = self.token
        self.perform(self.core.consumer_heartbeat(token, req))
        return self.replies.get(token)

    def tick(self, ms: int) -> None:
        self.now += ms
        self.perform(self.core.tick())

    def group(self) -> Any:
        return self.core._groups[G]

    def owners_are_unique(self) -> None:
        group = self.core._groups.get(G)
        if group is None or group.consumer is None:
            return
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for member in group.consumer.members.values():
            for assignment in (member.assigned, member.pending_revocation):
                for topic_id, partitions in assignment.items():
                    for p in partitions:
                        assert (topic_id, p) not in seen, (topic_id, p, seen)
                        seen[(topic_id, p)] = member.member_id


def parts(result: HeartbeatResult | None) -> set[int] | None:
    assert result is not None and result.error == E.NONE, result
    if result.assignment is None:
        return None
    return set(result.assignment.get(T, frozenset()))


def test_two_members_share_a_topic_without_owning_a_partition_twice() -> None:
    h = Harness()
    first = h.heartbeat("a", 0)
    assert first is not None and (first.member_epoch, parts(first)) == (1, {0, 1, 2, 3})
    assert first.heartbeat_interval_ms == 5_000
    assert h.group().state is GroupState.STABLE
    # b joins: a new target gives it two partitions, which a still owns.
    joined = h.heartbeat("b", 0)
    assert joined is not None and (joined.member_epoch, parts(joined)) == (2, set())
    assert h.group().consumer.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert h.group().state is GroupState.RECONCILING
    h.owners_are_unique()
    # a must give up two partitions first: it stays at epoch 1 until it has.
    asked = h.heartbeat("a", 1)
    assert asked is not None and asked.member_epoch == 1
    kept = parts(asked)
    assert kept is not None and len(kept) == 2
    assert h.heartbeat("b", 2) is not None and parts(h.heartbeat("b", 2)) is None
    h.owners_are_unique()
    done = h.heartbeat("a", 1, owned={T: frozenset(kept)})
    assert done is not None and (done.member_epoch, done.assignment) == (2, None)
    got = h.heartbeat("b", 2)
    assert got is not None and parts(got) == {0, 1, 2, 3} - kept
    assert h.group().state is GroupState.STABLE
    h.owners_are_unique()


def test_target_assignments_are_spaced_by_the_assignment_interval() -> None:
    """KIP-1263 (Kafka 4.3's default 1 s): an epoch bump within the interval of the last
    target assignment leaves the target as it is; the first heartbeat after the interval, of
    any member, computes the next one, once for all the changes in between."""
    h = Harness(GroupConfig(consumer_assignment_interval_ms=1_000))
    first = h.heartbeat("a", 0)
    assert first is not None and (first.member_epoch, parts(first)) == (1, {0, 1, 2, 3})
    h.tick(100)
    joined = h.heartbeat("b", 0)
    assert joined is not None and (joined.member_epoch, parts(joined)) == (1, set())
    assert h.group().consumer.group_epoch == 2
    assert h.group().consumer.assignment_epoch == 1
    assert h.group().state is GroupState.ASSIGNING
    h.tick(400)
    joined_c = h.heartbeat("c", 0)
    assert joined_c is not None and (joined_c.member_epoch, parts(joined_c)) == (1, set())
    kept = h.heartbeat("a", 1)
    assert kept is not None and kept.member_epoch == 1 and kept.assignment is None
    h.tick(500)
    # 1 s after the first assignment: a's heartbeat computes the target for epoch 3 (both
    # joins) and asks a to give up what b and c get.
    moved = h.heartbeat("a", 1)
    assert moved is not None and moved.member_epoch == 1
    assert h.group().consumer.assignment_epoch == 3
    assert len(parts(moved) or ()) < 4
    h.owners_are_unique()
    # One target for the two joins: none was stored for epoch 2.
    assert [v.assignment_epoch for _, v in h.stored if isinstance(v, TargetEpochValue)] == [1, 3]


def test_an_interval_of_zero_assigns_at_every_change() -> None:
    h = Harness(GroupConfig(consumer_assignment_interval_ms=0))
    h.heartbeat("a", 0)
    joined = h.heartbeat("b", 0)
    assert joined is not None and joined.member_epoch == 2
    assert h.group().consumer.assignment_epoch == 2


def test_the_last_assignment_time_survives_a_failover() -> None:
    h = Harness(GroupConfig(consumer_assignment_interval_ms=1_000))
    h.heartbeat("a", 0)
    h.tick(200)
    h.heartbeat("b", 0)
    other = GroupStateMachine(
        GroupConfig(consumer_assignment_interval_ms=1_000),
        lambda: h.now,
        PARTITIONS,
        topics=h.topics,
    )
    other.begin_load(0)
    other.complete_load(0, _replayed(h.stored))
    data = other._groups[G].consumer
    assert (data.assignment_epoch, data.assignment_timestamp_ms) == (1, h.now - 200)


def test_epochs_are_checked() -> None:
    h = Harness()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    ahead = h.heartbeat("b", 5)
    assert ahead is not None and ahead.error == E.FENCED_MEMBER_EPOCH
    assert (ahead.member_id, ahead.member_epoch) == (None, 0)
    # The previous epoch with owned partitions within the assignment: its answer was lost.
    h.heartbeat("a", 1)
    h.heartbeat("a", 1, owned={T: frozenset({0})})
    assert h.group().consumer.members["a"].member_epoch == 2
    retried = h.heartbeat("a", 1, owned={T: frozenset({0})})
    assert retried is not None and retried.error == E.NONE and retried.member_epoch == 2
    stale = h.heartbeat("a", 1, owned={T: frozenset({0, 3})})
    assert stale is not None and stale.error == E.FENCED_MEMBER_EPOCH
    unknown = h.heartbeat("nobody", 3)
    assert unknown is not None and unknown.error == E.UNKNOWN_MEMBER_ID
    missing = h.heartbeat("a", 1, group="no-such-group")
    assert missing is not None and missing.error == E.GROUP_ID_NOT_FOUND
    # A known member rejoining with epoch 0 gets its state back, as Kafka 4.3 answers.
    again = h.heartbeat("a", 0)
    assert again is not None and again.error == E.NONE and again.member_epoch == 2


def test_a_retry_from_the_previous_epoch_gets_the_assignment_its_lost_answer_carried() -> None:
    h = Harness()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    asked = h.heartbeat("a", 1)
    kept = parts(asked)
    assert kept is not None and len(kept) == 2
    h.heartbeat("b", 2, topics=(), owned={})
    # a's acknowledgement moves it to epoch 3 with every partition, b having unsubscribed; a
    # timed that answer out, and acknowledges again from epoch 1 without a full request.
    moved = h.heartbeat("a", 1, owned={T: frozenset(kept)})
    assert moved is not None and (moved.member_epoch, parts(moved)) == (3, {0, 1, 2, 3})
    retried = h.heartbeat("a", 1, owned={T: frozenset(kept)})
    assert retried is not None and (retried.member_epoch, parts(retried)) == (3, {0, 1, 2, 3})
    # From its current epoch, with nothing new, the answer carries no assignment.
    steady = h.heartbeat("a", 3)
    assert steady is not None and (steady.member_epoch, steady.assignment) == (3, None)
    h.owners_are_unique()


def test_requests_kafka_refuses() -> None:
    h = Harness()
    cases: list[tuple[dict[str, Any], E, str]] = [
        ({"rebalance_timeout": -1}, E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided"),
        ({"topics": None}, E.INVALID_REQUEST, "Either SubscribedTopicNames"),
        ({"owned": {T: frozenset({1})}}, E.INVALID_REQUEST, "TopicPartitions must be empty"),
        ({"assignor": "zzz"}, E.UNSUPPORTED_ASSIGNOR, "ServerAssignor zzz is not supported"),
        ({"regex": "("}, E.INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex `(`"),
        ({"group": ""}, E.INVALID_GROUP_ID, "GroupId can't be empty"),
    ]
    for options, error, message in cases:
        result = h.heartbeat("x", 0, **options)
        assert result is not None and result.error == error, options
        assert result.message is not None and message in result.message
    empty_id = h.heartbeat("", 3)
    assert empty_id is not None and empty_id.error == E.INVALID_REQUEST


def test_leaving_and_session_timeouts_give_partitions_back() -> None:
    h = Harness()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    left = h.heartbeat("b", -1)
    assert left is not None and (left.error, left.member_epoch) == (E.NONE, -1)
    back = h.heartbeat("a", 1)
    assert back is not None and parts(back) in (None, {0, 1, 2, 3})
    assert h.group().consumer.members["a"].assigned[T] == {0, 1, 2, 3}
    h.heartbeat("c", 0)
    # c never heartbeats again: its session ends and it is fenced. a revokes as asked.
    for _ in range(10):
        h.tick(5_000)
        a = h.group().consumer.members["a"]
        h.heartbeat("a", a.member_epoch, owned=dict(a.assigned))
    assert set(h.group().consumer.members) == {"a"}
    assert h.group().consumer.members["a"].assigned[T] == {0, 1, 2, 3}


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h = Harness()
    h.heartbeat("a", 0, rebalance_timeout=10_000)
    h.heartbeat("b", 0)
    h.heartbeat("a", 1)  # asked to revoke two partitions
    assert h.group().consumer.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.tick(10_001)
    assert "a" not in h.group().consumer.members
    got = h.heartbeat("b", h.group().consumer.members["b"].member_epoch)
    assert got is not None and h.group().consumer.members["b"].assigned[T] == {0, 1, 2, 3}


def test_static_member_restarts_without_a_rebalance() -> None:
    h = Harness()
    h.heartbeat("a", 0, instance="i1")
    h.heartbeat("b", 0)
    h.heartbeat("a", 1, owned={T: frozenset(h.group().consumer.members["a"].assigned[T])})
    h.heartbeat("b", 2)
    epoch = h.group().consumer.group_epoch
    a_parts = h.group().consumer.members["a"].assigned[T]
    busy = h.heartbeat("a2", 0, instance="i1")
    assert busy is not None and busy.error == E.UNRELEASED_INSTANCE_ID
    left = h.heartbeat("a", -2, instance="i1")
    assert left is not None and (left.error, left.member_epoch) == (E.NONE, -2)
    back = h.heartbeat("a2", 0, instance="i1")
    assert back is not None and back.error == E.NONE
    assert parts(back) == set(a_parts) and h.group().consumer.group_epoch == epoch
    assert set(h.group().consumer.members) == {"a2", "b"}
    fenced = h.heartbeat("a", 2, instance="i1")
    assert fenced is not None and fenced.error == E.FENCED_INSTANCE_ID


def test_regex_subscription_follows_new_topics() -> None:
    h = Harness()
    joined = h.heartbeat("a", 0, topics=None, regex="t.*")
    assert joined is not None
    first = h.heartbeat("a", joined.member_epoch)
    assert first is not None and parts(first) == {0, 1, 2, 3}
    h.topics.table["t2"] = (T2, 2)
    h.topics.version += 1
    more = h.heartbeat("a", first.member_epoch)
    assert more is not None and more.assignment is not None
    assert more.assignment[T2] == frozenset({0, 1})
    assert h.group().consumer.regexes["t.*"].topics == {"t", "t2"}


def test_regex_matches_only_topics_the_principal_may_describe() -> None:
    h = Harness()
    h.topics.table["t2"] = (T2, 2)
    describable = lambda name: name != "t"  # noqa: E731
    first = h.heartbeat("a", 0, topics=None, regex="t.*", describable=describable)
    assert first is not None and first.error == E.NONE
    # The new regex is resolved at the next heartbeat, with that heartbeat's principal.
    later = h.heartbeat("a", first.member_epoch, describable=describable)
    assert later is not None and later.assignment == {T2: frozenset({0, 1})}
    assert h.group().consumer.regexes["t.*"].topics == {"t2"}


def test_a_new_regex_is_resolved_after_the_heartbeat_that_brought_it() -> None:
    """As Kafka resolves a regex no member subscribed to yet off the heartbeat's path: the
    member gets its topic names at once and the regex's topics at a later heartbeat, after a
    group epoch bump (librdkafka's 0045 do_test_resubscribe_with_regex waits for the two
    assignments in that order)."""
    h = Harness()
    h.topics.table["a"] = (T2, 2)
    joined = h.heartbeat("m", 0, topics=("a",), regex="t.*")
    assert joined is not None and joined.error == E.NONE and joined.assignment is not None
    assert dict(joined.assignment) == {T2: frozenset({0, 1})}
    assert "t.*" not in h.group().consumer.regexes
    later = h.heartbeat("m", joined.member_epoch)
    assert later is not None and later.member_epoch == joined.member_epoch + 1
    assert later.assignment is not None and later.assignment[T] == frozenset({0, 1, 2, 3})
    assert h.group().consumer.regexes["t.*"].topics == {"t"}
    # A second member with the same regex finds it resolved: no further deferral.
    other = h.heartbeat("n", 0, topics=None, regex="t.*")
    assert other is not None and other.member_epoch == later.member_epoch + 1
    # Once its last subscriber has left, the regex is deleted: bringing it again waits again.
    for member_id in ("m", "n"):
        left = h.heartbeat(member_id, -1)
        assert left is not None and left.error == E.NONE, member_id
    assert h.group().consumer.regexes == {}
    back = h.heartbeat("m", 0, topics=("a",), regex="t.*")
    assert back is not None and back.assignment is not None
    assert dict(back.assignment) == {T2: frozenset({0, 1})}


def test_heartbeats_build_on_the_change_being_stored() -> None:
    h = Harness()
    h.hold = True
    assert h.heartbeat("a", 0) is None
    # The second is handled at once on the state the first leaves (its records go out
    # without waiting for the first write), and answered only once its own are stored.
    assert h.heartbeat("b", 0) is None
    assert len(h.held) == 2
    assert G not in h.core._groups or h.core._groups[G].consumer is None
    h.release()
    assert h.replies[1].member_epoch == 1 and h.replies[2].member_epoch == 2
    assert set(h.group().consumer.members) == {"a", "b"}


def test_heartbeats_built_on_a_failed_write_fail_with_it() -> None:
    h = Harness()
    h.heartbeat("a", 0)
    h.hold = True
    h.heartbeat("b", 0)
    h.heartbeat("c", 0)
    first, second = h.held
    h.hold = False
    h.perform(h.core.records_stored(first.store_id, E.NOT_COORDINATOR))
    h.perform(h.core.records_stored(second.store_id, E.NONE))
    assert h.replies[2].error == E.NOT_COORDINATOR
    assert h.replies[3].error == E.NOT_COORDINATOR
    assert set(h.group().consumer.members) == {"a"} and h.group().consumer.group_epoch == 1
    # The chain is over: the next heartbeat is stored and answered as usual.
    again = h.heartbeat("c", 0)
    assert again is not None and again.error == E.NONE
    assert set(h.group().consumer.members) == {"a", "c"}


def test_a_failed_write_leaves_the_group_as_it_was() -> None:
    h = Harness()
    h.heartbeat("a", 0)
    h.hold = True
    h.heartbeat("b", 0)
    h.release(E.NOT_COORDINATOR)
    assert h.replies[2].error == E.NOT_COORDINATOR
    assert set(h.group().consumer.members) == {"a"} and h.group().consumer.group_epoch == 1


def _replayed(records: Iterable[tuple[Any, Any]]) -> LoadedState:
    loaded = LoadedState()
    for key, value in records:
        loaded.apply(encode_key(key), encode_value(value))
    return loaded


def test_a_new_coordinator_resumes_from_the_records() -> None:
    h = Harness()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    h.heartbeat("a", 1)
    before = h.group().consumer
    other = Harness()
    other.core.unload(0)
    other.core.begin_load(0)
    other.core.complete_load(0, _replayed(h.stored))
    after = other.core._groups[G].consumer
    assert (after.group_epoch, after.assignment_epoch) == (
        before.group_epoch,
        before.assignment_epoch,
    )
    assert after.members == before.members and after.targets == before.targets
    assert after.owners == before.owners
    # The reconciliation goes on where it was.
    done = other.heartbeat("a", 1, owned=dict(after.members["a"].assigned))
    assert done is not None and done.member_epoch == 2


def test_deleted_member_records_are_tombstones() -> None:
    h = Harness()
    h.heartbeat("a", 0)
    h.heartbeat("a", -1)
    loaded = _replayed(h.stored)
    group = loaded.consumer_groups[G]
    assert group.members == {} and group.current == {} and group.targets == {}
    assert group.epoch is not None and group.epoch.epoch == 2


# --- random schedules ------------------------------------------------------------------------

Op = tuple[str, int]
OPS = st.lists(
    st.tuples(st.sampled_from(["join", "heartbeat", "leave", "wait", "grow"]), st.integers(0, 4)),
    max_size=40,
)


class Client:
    """A well-behaved member: it owns what the coordinator last assigned it, giving up what
    a newer assignment leaves out before its next heartbeat."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.joined = False

    def heartbeat(self, h: Harness) -> None:
        result = h.heartbeat(
            self.member_id, self.epoch, **({} if self.epoch == 0 else {"owned": dict(self.owned)})
        )
        assert result is not None
        if result.error != E.NONE:
            # Fenced or unknown: it loses everything and joins again.
            self.epoch, self.owned = 0, {}
            return
        self.joined = True
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = {t: p for t, p in result.assignment.items() if p}


def _no_partition_owned_twice(clients: Iterable[Client]) -> None:
    seen: set[tuple[uuid.UUID, int]] = set()
    for client in clients:
        for topic_id, partitions in client.owned.items():
            for p in partitions:
                assert (topic_id, p) not in seen, (topic_id, p)
                seen.add((topic_id, p))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_schedules_never_give_a_partition_to_two_clients(ops: list[Op]) -> None:
    h = Harness()
    clients = {i: Client(f"c{i}") for i in range(5)}
    for action, who in ops:
        client = clients[who]
        if action in ("join", "heartbeat") and (action == "join") != client.joined:
            client.heartbeat(h)
        elif action == "leave" and client.joined:
            h.heartbeat(client.member_id, -1)
            clients[who] = Client(f"c{who}-{h.token}")
        elif action == "wait":
            # Long enough for a member that stopped heartbeating to be fenced.
            h.tick(50_000)
            for other in clients.values():
                if other.joined:
                    other.heartbeat(h)
        elif action == "grow":
            name, (topic_id, count) = "t", h.topics.table["t"]
            h.topics.table[name] = (topic_id, min(count + 2, 12))
            h.topics.version += 1
        _no_partition_owned_twice(clients.values())
        h.owners_are_unique()
    # Quiet heartbeats from every member: the group settles with every partition assigned.
    live = [c for c in clients.values() if c.joined]
    for _ in range(6):
        for client in live:
            client.heartbeat(h)
        _no_partition_owned_twice(live)
    if live and G in h.core._groups:
        assert h.group().state is GroupState.STABLE
        count = h.topics.table["t"][1]
        assert {p for c in live for p in c.owned.get(T, frozenset())} == set(range(count))


def test_group_epoch_bumps_are_counted_as_rebalances() -> None:
    h = Harness()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    assert h.core.rebalances == {"classic": 0, "consumer": 2, "share": 0}
    # Reconciling to the new target and plain heartbeats do not bump the group epoch.
    asked = h.heartbeat("a", 1)
    h.heartbeat("a", 1, owned={T: frozenset(parts(asked) or ())})
    h.heartbeat("b", 2)
    assert h.core.rebalances["consumer"] == 2
    h.heartbeat("b", -1)
    h.tick(45_001)
    assert not h.group().consumer.members
    assert h.core.rebalances["consumer"] == 4


class _CountingRacks(dict[int, frozenset[str]]):
    """Partition racks that count how often they are read in full."""

    def __init__(self, racks: dict[int, frozenset[str]]) -> None:
        super().__init__(racks)
        self.reads = 0

    def __iter__(self) -> Iterator[int]:
        self.reads += 1
        return super().__iter__()


def test_an_unchanged_topic_is_not_hashed_again_at_each_heartbeat() -> None:
    h = Harness()
    racks = _CountingRacks({p: frozenset({"r1"}) for p in range(4)})
    same = TopicSpec(T, "t", 4, racks)
    h.topics.topic = lambda name: same if name == "t" else None  # type: ignore[method-assign]
    a = h.heartbeat("a", 0)
    assert a is not None and a.error == E.NONE
    for _ in range(3):
        again = h.heartbeat("a", a.member_epoch)
        assert again is not None and again.error == E.NONE
    assert racks.reads == 1
    # A changed topic (the view hands out a new spec) is hashed again: the group rebalances.
    moved = TopicSpec(T, "t", 4, {p: frozenset({"r2"}) for p in range(4)})
    h.topics.topic = lambda name: moved if name == "t" else None  # type: ignore[method-assign]
    epoch = h.group().consumer.group_epoch
    h.heartbeat("a", a.member_epoch)
    assert h.group().consumer.group_epoch == epoch + 1
