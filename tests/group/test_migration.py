"""Online migration between the classic and the consumer group protocols (KIP-848) in the pure
group state machine, with a fake clock and topics: a classic group upgraded by a member of the
consumer protocol, classic members served inside the consumer group (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, their timeouts), the downgrade when the last consumer-protocol member
leaves, the migration policy, and a partition never owned by two members at once."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kbroker.group.assignors import TopicSpec
from kbroker.group.consumer_protocol import assigned_partitions, encode_assignment
from kbroker.group.consumer_records import ConsumerGroupKey, ConsumerMemberKey
from kbroker.group.events import (
    ConsumerHeartbeat,
    Effect,
    GroupConfig,
    GroupState,
    HeartbeatResult,
    JoinRequest,
    JoinResult,
    LeaveResult,
    MigrationPolicy,
    Reply,
    StoreGroup,
    StoreRecords,
    SyncRequest,
    SyncResult,
)
from kbroker.group.offsets_store import GroupKey, GroupValue, LoadedState, encode_key, encode_value
from kbroker.group.state_machine import GroupStateMachine
from wire.errors import ErrorCode as E
from wire.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
    TopicPartition,
)
from wire.primitives import Writer

T = uuid.UUID(int=7)
G = "g"
REBALANCE_TIMEOUT = 30_000
SESSION_TIMEOUT = 10_000


def subscription(owned: Iterable[int] = (), version: int = 1) -> bytes:
    """A consumer's JoinGroup metadata for topic "t", reporting ``owned`` partitions (v1+)."""
    w = Writer()
    w.int16(version)
    ConsumerProtocolSubscription(
        topics=["t"], owned_partitions=[TopicPartition(topic="t", partitions=sorted(owned))]
    ).write(w, version)
    return w.getvalue()


@dataclass
class Topics:
    partitions: int = 6
    version: int = 1

    def topic(self, name: str) -> TopicSpec | None:
        return TopicSpec(T, "t", self.partitions, {}) if name == "t" else None

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return "t" if topic_id == T else None

    def names(self) -> Iterable[str]:
        return ["t"]


@dataclass
class Harness:
    config: GroupConfig = field(default_factory=GroupConfig)
    now: int = 1_000_000
    token: int = 0
    replies: dict[int, Any] = field(default_factory=dict)
    stored: list[tuple[Any, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        ids = iter(f"m{i}" for i in range(100, 1000))
        self.core = GroupStateMachine(
            self.config,
            lambda: self.now,
            1,
            new_uuid=lambda: next(ids),
            topics=Topics(),
        )
        self.core.begin_load(0)
        self.core.complete_load(0, LoadedState())

    def perform(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Reply):
                assert effect.token not in self.replies, "answered twice"
                self.replies[effect.token] = effect.result
            elif isinstance(effect, StoreGroup):
                self.stored.append((GroupKey(effect.group_id), effect.value))
                self.perform(self.core.group_stored(effect.store_id, E.NONE))
            else:
                assert isinstance(effect, StoreRecords)
                self.stored.extend(effect.records)
                self.perform(self.core.records_stored(effect.store_id, E.NONE))
            self.check_owners()

    def next_token(self) -> int:
        self.token += 1
        return self.token

    # --- classic requests ---------------------------------------------------------------

    def join(self, member_id: str = "", owned: Iterable[int] = (), **kw: Any) -> int:
        token = self.next_token()
        protocols = kw.pop("protocols", None) or (("cooperative-sticky", subscription(owned)),)
        req = JoinRequest(
            group_id=G,
            member_id=member_id,
            group_instance_id=kw.pop("instance", None),
            client_id="classic",
            client_host="/127.0.0.1",
            session_timeout_ms=kw.pop("session_timeout", SESSION_TIMEOUT),
            rebalance_timeout_ms=kw.pop("rebalance_timeout", REBALANCE_TIMEOUT),
            protocol_type=kw.pop("protocol_type", "consumer"),
            protocols=protocols,
            require_known_member_id=kw.pop("require_known", False),
        )
        assert not kw
        self.perform(self.core.join(token, req))
        return token

    def joined(self, member_id: str = "", owned: Iterable[int] = (), **kw: Any) -> JoinResult:
        result = self.replies[self.join(member_id, owned, **kw)]
        assert isinstance(result, JoinResult)
        return result

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        protocol_name: str | None = None,
    ) -> int:
        token = self.next_token()
        req = SyncRequest(
            G,
            member_id,
            None,
            generation,
            "consumer",
            protocol_name,
            tuple((assignments or {}).items()),
        )
        self.perform(self.core.sync(token, req))
        return token

    def synced(self, member_id: str, generation: int, **kw: Any) -> SyncResult:
        result = self.replies[self.sync(member_id, generation, **kw)]
        assert isinstance(result, SyncResult)
        return result

    def heartbeat(self, member_id: str, generation: int) -> E:
        error = self.core.heartbeat(G, member_id, None, generation)
        self.check_owners()
        return error

    def leave(self, *members: tuple[str, str | None]) -> LeaveResult:
        token = self.next_token()
        self.perform(self.core.leave(token, G, members))
        result = self.replies[token]
        assert isinstance(result, LeaveResult)
        return result

    # --- consumer protocol --------------------------------------------------------------

    def consumer(self, member_id: str, epoch: int, **kw: Any) -> HeartbeatResult:
        full = epoch == 0
        token = self.next_token()
        req = ConsumerHeartbeat(
            group_id=G,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=kw.pop("instance", None),
            rack_id=None,
            rebalance_timeout_ms=REBALANCE_TIMEOUT if full else -1,
            subscribed_topic_names=("t",) if full else None,
            subscribed_topic_regex=None,
            server_assignor=None,
            owned=kw.pop("owned", {} if full else None),
            client_id="next",
            client_host="/127.0.0.1",
        )
        assert not kw
        self.perform(self.core.consumer_heartbeat(token, req))
        result = self.replies[token]
        assert isinstance(result, HeartbeatResult)
        return result

    # --- looking -------------------------------------------------------------------------

    def group(self) -> Any:
        return self.core._groups[G]

    def tick(self, ms: int) -> None:
        self.now += ms
        self.perform(self.core.tick())

    def settle(self, classic: dict[str, int], consumers: dict[str, int]) -> None:
        """Drive classic members (id -> generation) and consumer-protocol members (id ->
        epoch) as their clients would until the group is Stable: a classic member told to
        rebalance joins again with what it owns and syncs; a consumer member heartbeats with
        what it owns."""
        owned: dict[str, list[int]] = {m: [] for m in (*classic, *consumers)}
        for member_id in owned:
            member = self.group().consumer.members[member_id]
            owned[member_id] = sorted(member.assigned.get(T, ()))
        for _ in range(20):
            for member_id, generation in classic.items():
                if self.heartbeat(member_id, generation) == E.REBALANCE_IN_PROGRESS:
                    joined = self.joined(member_id, owned=owned[member_id])
                    classic[member_id] = joined.generation_id
                    owned[member_id] = partitions(self.synced(member_id, joined.generation_id))
            for member_id, epoch in consumers.items():
                result = self.consumer(member_id, epoch, owned={T: frozenset(owned[member_id])})
                consumers[member_id] = result.member_epoch
                if result.assignment is not None:
                    owned[member_id] = sorted(result.assignment.get(T, ()))
            if self.group().consumer.state_name() == "Stable":
                return
        raise AssertionError(f"not stable: {self.group().consumer}")

    def check_owners(self) -> None:
        """No partition is owned (assigned or pending revocation) by two members."""
        group = self.core._groups.get(G)
        if group is None or group.consumer is None:
            return
        seen: dict[int, str] = {}
        for member in group.consumer.members.values():
            for owned in (member.assigned, member.pending_revocation):
                for p in owned.get(T, ()):
                    assert p not in seen, f"partition {p}: {seen[p]} and {member.member_id}"
                    seen[p] = member.member_id

    def classic_group(self, members: int = 2) -> tuple[list[str], int]:
        """A Stable classic group (its ids, and its generation); the leader gives each member a
        range of "t"."""
        # The KIP-394 handshake first: the ids handed out hold the join phase open.
        ids = [self.joined(require_known=True).member_id for _ in range(members)]
        results = [self.replies[t] for t in [self.join(m) for m in ids]]
        generation = results[0].generation_id
        share = 6 // members
        assignments = {
            m: encode_assignment({"t": list(range(i * share, (i + 1) * share))}, 1)
            for i, m in enumerate(ids)
        }
        leader = results[0].leader_id
        tokens = [self.sync(m, generation, assignments if m == leader else None) for m in ids]
        assert all(self.replies[t].error == E.NONE for t in tokens)
        assert self.group().state is GroupState.STABLE
        return ids, generation


def partitions(sync: SyncResult) -> list[int]:
    return assigned_partitions(sync.assignment).get("t", [])


def keys(records: list[tuple[Any, Any]]) -> list[tuple[str, Any]]:
    return [(type(k).__name__, v is None) for k, v in records]


@pytest.fixture
def h() -> Harness:
    return Harness(GroupConfig(initial_rebalance_delay_ms=0))


def test_a_consumer_member_upgrades_a_classic_group_and_nothing_is_owned_twice(h: Harness) -> None:
    (a, b), generation = h.classic_group()
    h.stored.clear()
    joined = h.consumer("c", 0)
    assert joined.error == E.NONE
    group = h.group()
    assert group.consumer is not None and not group.members
    # The classic group's record is tombstoned in the batch that writes the consumer group.
    assert (GroupKey(G), None) in h.stored
    # The classic members keep their partitions, at the generation as their epoch.
    assert group.consumer.members[a].member_epoch == generation
    assert group.consumer.members[a].assigned == {T: frozenset({0, 1, 2})}
    assert joined.member_epoch == group.consumer.group_epoch > generation
    # The newcomer waits for partitions the classic members still own.
    assert not joined.assignment
    # Each classic member is told to join again; a cooperative member reports what it owns.
    assert h.heartbeat(a, generation) == E.REBALANCE_IN_PROGRESS
    rejoined = h.joined(a, owned=(0, 1, 2))
    assert rejoined.error == E.NONE
    assert rejoined.protocol_name == "cooperative-sticky"
    assert rejoined.leader_id == "" and not rejoined.members
    # It keeps its epoch until it has revoked what the target took from it.
    assert rejoined.generation_id == generation
    kept = partitions(h.synced(a, rejoined.generation_id))
    assert kept == sorted(group.consumer.targets[a][T] & {0, 1, 2})
    # Having revoked, it joins again and moves to the group epoch.
    again = h.joined(a, owned=kept)
    assert again.generation_id == group.consumer.group_epoch
    assert partitions(h.synced(a, again.generation_id)) == kept
    assert h.heartbeat(a, again.generation_id) == E.NONE
    # Everyone keeps going as their clients would, until the group is Stable.
    h.settle({a: again.generation_id, b: generation}, {"c": joined.member_epoch})
    owned = [h.group().consumer.members[m].assigned[T] for m in (a, b, "c")]
    assert sorted(p for parts in owned for p in parts) == list(range(6))


def test_an_eager_member_joining_again_has_revoked_everything(h: Harness) -> None:
    (a, _), generation = h.classic_group()
    h.consumer("c", 0)
    # The Java client's default: range (eager) first, then cooperative-sticky, which the
    # other members share. Eager consumers revoke all before they join: the v0 metadata
    # lists nothing owned.
    eager = (("range", subscription(version=0)), ("cooperative-sticky", subscription()))
    rejoined = h.joined(a, protocols=eager)
    assert rejoined.generation_id > generation
    assert rejoined.protocol_name == "range"
    member = h.group().consumer.members[a]
    got = partitions(h.synced(a, rejoined.generation_id, protocol_name="range"))
    assert got == sorted(member.assigned[T])
    assert set(got) <= h.group().consumer.targets[a][T]


def test_upgrade_refused_by_the_policy_or_the_protocol_type() -> None:
    h = Harness(
        GroupConfig(
            initial_rebalance_delay_ms=0, consumer_migration_policy=MigrationPolicy.DOWNGRADE
        )
    )
    h.classic_group()
    refused = h.consumer("c", 0)
    assert refused.error == E.GROUP_ID_NOT_FOUND
    assert h.group().consumer is None

    other = Harness(GroupConfig(initial_rebalance_delay_ms=0))
    other.join(protocol_type="connect", protocols=(("v1", b"x"),))
    assert other.consumer("c", 0).error == E.GROUP_ID_NOT_FOUND


def test_upgrade_of_a_malformed_classic_member_is_refused(h: Harness) -> None:
    h.join(protocols=(("range", b"\x00"),))
    refused = h.consumer("c", 0)
    assert refused.error == E.GROUP_ID_NOT_FOUND
    assert refused.message is not None and "malformed" in refused.message


def test_the_last_consumer_member_leaving_downgrades_and_rebalances(h: Harness) -> None:
    (a, b), generation = h.classic_group()
    joined = h.consumer("c", 0)
    epoch = h.group().consumer.group_epoch
    targets = {m: sorted(h.group().consumer.targets[m][T]) for m in (a, b)}
    h.stored.clear()
    left = h.consumer("c", -1)
    assert left.error == E.NONE
    group = h.group()
    assert group.consumer is None
    assert set(group.members) == {a, b}
    assert group.generation >= epoch
    assert group.state is GroupState.PREPARING_REBALANCE
    # The consumer group's records are tombstoned, and the classic group's written, with
    # each member's assignment.
    assert (ConsumerGroupKey(3, G), None) in [(k, v) for k, v in h.stored if v is None]
    assert any(k == ConsumerMemberKey(5, G, joined.member_id) and v is None for k, v in h.stored)
    value = next(v for k, v in h.stored if isinstance(v, GroupValue))
    by_member = {m.member_id: assigned_partitions(m.assignment)["t"] for m in value.members}
    assert by_member == targets
    # The classic members rejoin and the classic protocol takes over.
    assert h.heartbeat(a, group.generation) == E.REBALANCE_IN_PROGRESS
    tokens = [h.join(a), h.join(b)]
    results = [h.replies[t] for t in tokens]
    assert all(r.error == E.NONE for r in results)
    assert results[0].generation_id == group.generation
    assert generation < group.generation


def test_no_downgrade_when_the_policy_forbids_it() -> None:
    h = Harness(
        GroupConfig(initial_rebalance_delay_ms=0, consumer_migration_policy=MigrationPolicy.UPGRADE)
    )
    h.classic_group()
    h.consumer("c", 0)
    h.consumer("c", -1)
    assert h.group().consumer is not None
    assert len(h.group().consumer.members) == 2


def test_classic_member_that_does_not_rejoin_in_time_is_fenced(h: Harness) -> None:
    (a, b), generation = h.classic_group()
    h.consumer("c", 0)
    assert h.heartbeat(a, generation) == E.REBALANCE_IN_PROGRESS
    # b keeps heartbeating, a stops answering the call to join again.
    for _ in range(4):
        h.tick(REBALANCE_TIMEOUT // 4)
        h.heartbeat(b, generation)
    assert a not in h.group().consumer.members
    assert b in h.group().consumer.members


def test_a_sync_that_never_comes_fences_at_the_rebalance_timeout(h: Harness) -> None:
    # Joined with a long session and a short rebalance timeout, then silent: the group's
    # timer fires at the sync deadline, well before the session ends.
    h.consumer("c", 0)
    joined = h.joined("", session_timeout=300_000, rebalance_timeout=5_000)
    assert joined.member_id in h.group().consumer.members
    h.tick(5_000)
    assert joined.member_id not in h.group().consumer.members


def test_classic_member_whose_session_ends_is_fenced(h: Harness) -> None:
    (a, b), _ = h.classic_group()
    c = h.consumer("c", 0)
    for _ in range(3):
        h.tick(SESSION_TIMEOUT // 2)
        h.consumer("c", c.member_epoch)
    members = h.group().consumer.members
    assert a not in members and b not in members
    assert "c" in members


def test_classic_leave_from_a_consumer_group(h: Harness) -> None:
    (a, b), _ = h.classic_group()
    h.consumer("c", 0)
    epoch = h.group().consumer.group_epoch
    result = h.leave((a, None), ("ghost", None), ("c", None))
    # A consumer-protocol member cannot leave through LeaveGroup.
    assert result.member_errors == (E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID)
    assert a not in h.group().consumer.members
    assert h.group().consumer.group_epoch == epoch + 1


def test_classic_requests_checked_like_kafka(h: Harness) -> None:
    (a, _), generation = h.classic_group()
    h.consumer("c", 0)
    rejoined = h.joined(a, owned=(0, 1, 2))
    assert h.synced(a, rejoined.generation_id + 1).error == E.ILLEGAL_GENERATION
    mismatch = h.synced(a, rejoined.generation_id, protocol_name="range")
    assert mismatch.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.heartbeat("c", 1) == E.UNKNOWN_MEMBER_ID  # not a classic member
    assert h.heartbeat(a, generation + 100) == E.ILLEGAL_GENERATION
    wrong_type = h.joined("", protocol_type="connect", protocols=(("v1", b""),))
    assert wrong_type.error == E.INCONSISTENT_GROUP_PROTOCOL
    no_common = h.joined("", protocols=(("roundrobin", subscription()),))
    assert no_common.error == E.INCONSISTENT_GROUP_PROTOCOL
    # KIP-394 as for a classic group: an unknown member first gets its id.
    first = h.joined("", require_known=True)
    assert first.error == E.MEMBER_ID_REQUIRED
    second = h.joined(first.member_id)
    assert second.error == E.NONE and second.member_id == first.member_id


def test_offsets_of_a_classic_member_use_its_generation(h: Harness) -> None:
    (a, _), generation = h.classic_group()
    h.consumer("c", 0)
    assert h.core.validate_fetch(G, a, generation) == E.NONE
    assert h.core.validate_fetch(G, a, generation + 1) == E.ILLEGAL_GENERATION
    assert h.core.validate_fetch(G, "c", 0) == E.STALE_MEMBER_EPOCH


def test_a_classic_member_commits_what_it_kept_at_its_previous_generation(h: Harness) -> None:
    """As in Kafka 4.3, a classic member's generation is its member epoch: an older one is
    checked against the epochs its partitions were assigned at, and refused with
    ILLEGAL_GENERATION."""
    (a, _), generation = h.classic_group()
    h.consumer("c", 0)
    assert h.heartbeat(a, generation) == E.REBALANCE_IN_PROGRESS
    rejoined = h.joined(a, owned=(0, 1, 2))
    kept = partitions(h.synced(a, rejoined.generation_id))
    again = h.joined(a, owned=kept)
    assert again.generation_id > generation

    def commit(epoch: int, parts: Iterable[int]) -> E:
        error = h.core.validate_commit(G, a, None, epoch, 8)
        if error != E.NONE:
            return error
        return h.core.assignment_epoch_error(G, a, epoch, [("t", p) for p in parts])

    assert commit(generation, kept) == E.NONE
    assert commit(generation, {0, 1, 2} - set(kept)) == E.ILLEGAL_GENERATION
    assert commit(again.generation_id + 1, kept) == E.ILLEGAL_GENERATION


def test_joining_an_empty_consumer_group_makes_it_classic(h: Harness) -> None:
    c = h.consumer("c", 0)
    h.consumer("c", -1)
    assert h.group().consumer is not None and not h.group().consumer.members
    h.stored.clear()
    h.join()
    h.tick(1)
    assert h.group().consumer is None
    assert (ConsumerGroupKey(3, G), None) in h.stored
    assert c.error == E.NONE


def test_a_static_classic_member_replacing_the_last_consumer_member_downgrades(
    h: Harness,
) -> None:
    [a], generation = h.classic_group(members=1)
    h.consumer("c", 0, instance="i-1")
    replaced = h.joined("", instance="i-1")
    assert replaced.error == E.NONE
    group = h.group()
    assert group.consumer is None
    assert set(group.members) == {a, replaced.member_id}
    # No rebalance for the replacement: the group is Stable at once.
    assert group.state is GroupState.STABLE
    assert replaced.generation_id == group.generation


def test_a_consumer_member_takes_over_a_static_classic_member(h: Harness) -> None:
    first = h.joined("", instance="i-1")
    h.tick(0)
    h.synced(
        first.member_id,
        first.generation_id,
        assignments={first.member_id: encode_assignment({"t": [0, 1, 2, 3, 4, 5]}, 1)},
    )
    # Rolling upgrade: the same instance comes back with the consumer protocol.
    took = h.consumer("n", 0, instance="i-1")
    assert took.error == E.NONE
    assert took.assignment == {T: frozenset(range(6))}


def test_a_failover_replays_a_migrated_group(h: Harness) -> None:
    (a, _), generation = h.classic_group()
    h.consumer("c", 0)
    state = LoadedState()
    for key, value in h.stored:
        state.apply(encode_key(key), encode_value(value))
    assert G not in state.groups
    other = Harness(GroupConfig(initial_rebalance_delay_ms=0))
    other.core = GroupStateMachine(GroupConfig(), lambda: other.now, 1, topics=Topics())
    other.core.begin_load(0)
    other.core.complete_load(0, state)
    loaded = other.core._groups[G].consumer
    assert loaded.members[a].classic is not None
    assert loaded.members[a].classic.session_timeout_ms == SESSION_TIMEOUT
    assert loaded.members[a].member_epoch == generation
    assert other.core.heartbeat(G, a, None, generation) == E.REBALANCE_IN_PROGRESS
