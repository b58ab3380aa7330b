"""Share group membership (KIP-932) in the pure group state machine: joining, the share-state
initialization before partitions are assigned, the simple assignor (shared partitions when
members outnumber them), fencing, leaving, session expiry, the records as Kafka 4.3 writes
them and recovery from them."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kbroker.group.assignors import TopicSpec
from kbroker.group.events import (
    Effect,
    GroupConfig,
    HeartbeatResult,
    InitializeShareState,
    Reply,
    ShareHeartbeat,
    StoreRecords,
)
from kbroker.group.offsets_store import (
    LoadedState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kbroker.group.share_group import assign_shares
from kbroker.group.share_records import ShareStatePartitionsValue
from kbroker.group.state_machine import GroupStateMachine
from wire.errors import ErrorCode as E

T = uuid.UUID(int=21)
G = "sg"


@dataclass
class Topics:
    partitions: int = 3
    version: int = 1

    def topic(self, name: str) -> TopicSpec | None:
        return TopicSpec(T, "t", self.partitions, {}) if name == "t" else None

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return "t" if topic_id == T else None

    def names(self) -> Iterable[str]:
        return ["t"]


@dataclass
class Harness:
    now: int = 1_000_000
    token: int = 0
    hold_init: bool = False
    replies: dict[int, HeartbeatResult] = field(default_factory=dict)
    stored: list[tuple[Any, Any]] = field(default_factory=list)
    inits: list[InitializeShareState] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.core = GroupStateMachine(GroupConfig(), lambda: self.now, 1, topics=Topics())
        self.core.begin_load(0)
        self.core.complete_load(0, LoadedState())

    def perform(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Reply):
                assert isinstance(effect.result, HeartbeatResult)
                self.replies[effect.token] = effect.result
            elif isinstance(effect, StoreRecords):
                self.stored.extend(effect.records)
                self.perform(self.core.records_stored(effect.store_id, E.NONE))
            elif isinstance(effect, InitializeShareState):
                self.inits.append(effect)
                if not self.hold_init:
                    self.complete(effect)

    def complete(self, effect: InitializeShareState, error: E = E.NONE) -> None:
        outcome = dict.fromkeys(effect.partitions, error)
        self.perform(self.core.share_state_initialized(effect.group_id, outcome))

    def heartbeat(self, member: str, epoch: int, **kw: Any) -> HeartbeatResult:
        self.token += 1
        req = ShareHeartbeat(
            group_id=kw.pop("group", G),
            member_id=member,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=kw.pop("topics", ("t",) if epoch == 0 else None),
            client_id="client",
            client_host="/127.0.0.1",
        )
        assert not kw
        self.perform(self.core.share_heartbeat(self.token, req))
        return self.replies[self.token]

    def tick(self, ms: int) -> None:
        self.now += ms
        self.perform(self.core.tick())

    def group(self) -> Any:
        return self.core._groups[G]


def partitions(result: HeartbeatResult) -> list[int]:
    assert result.assignment is not None
    return sorted(result.assignment.get(T, ()))


def test_partitions_are_assigned_once_their_state_is_initialized() -> None:
    h = Harness(hold_init=True)
    joined = h.heartbeat("m1", 0)
    assert joined.error == E.NONE and partitions(joined) == []
    # At the group epoch, 2 for a new group: Kafka 4.3's first share snapshots have state
    # epoch 2.
    assert h.inits == [InitializeShareState(G, ((T, 0), (T, 1), (T, 2)), 2)]
    state = [v for _, v in h.stored if isinstance(v, ShareStatePartitionsValue)]
    assert [info.partitions for info in state[-1].initializing] == [(0, 1, 2)]
    again = h.heartbeat("m1", joined.member_epoch)
    assert again.assignment is None
    h.complete(h.inits[0])
    got = h.heartbeat("m1", again.member_epoch)
    assert got.member_epoch > joined.member_epoch
    assert partitions(got) == [0, 1, 2]
    assert h.group().share.initialized == {T: frozenset({0, 1, 2})}


def test_epochs_as_kafka_43_numbers_them() -> None:
    # Kafka 4.3, read back from __consumer_offsets: a new share group's first
    # ShareGroupMetadata record has epoch 2, and each change after it adds one (a member
    # joining, a member leaving).
    h = Harness(hold_init=True)
    joined = h.heartbeat("m1", 0)
    assert (joined.member_epoch, h.group().share.group_epoch) == (2, 2)
    h.complete(h.inits[0])
    got = h.heartbeat("m1", joined.member_epoch)
    assert (got.member_epoch, partitions(got)) == (3, [0, 1, 2])
    second = h.heartbeat("m2", 0)
    assert second.member_epoch == h.group().share.group_epoch == 4
    h.heartbeat("m2", -1)
    assert h.group().share.group_epoch == 5


def test_a_failed_initialization_is_tried_again() -> None:
    h = Harness(hold_init=True)
    joined = h.heartbeat("m1", 0)
    h.complete(h.inits[0], E.COORDINATOR_NOT_AVAILABLE)
    h.heartbeat("m1", joined.member_epoch)
    assert len(h.inits) == 2


def test_members_split_partitions_then_share_them() -> None:
    h = Harness()
    a = h.heartbeat("a", 0)
    b = h.heartbeat("b", 0)
    # b got its share when it joined; a learns its own at its next heartbeat.
    a = h.heartbeat("a", a.member_epoch)
    assert sorted(partitions(a) + partitions(b)) == [0, 1, 2]
    for name in ("c", "d", "e", "f"):
        h.heartbeat(name, 0)
    assignments = {
        m: sorted(h.group().share.targets[m].get(T, ())) for m in h.group().share.members
    }
    assert all(len(parts) == 1 for parts in assignments.values())
    counts = [sum(parts == [p] for parts in assignments.values()) for p in range(3)]
    assert sorted(counts) == [2, 2, 2]


def test_the_simple_assignor_keeps_what_members_hold() -> None:
    subscriptions = {m: frozenset({T}) for m in ("a", "b", "c")}
    first = assign_shares(subscriptions, {T: frozenset(range(6))}, {})
    second = assign_shares({**subscriptions, "d": frozenset({T})}, {T: frozenset(range(6))}, first)
    moved = sum(len(first[m][T] - second[m].get(T, frozenset())) for m in ("a", "b", "c"))
    assert moved == 1
    assert sorted(p for m in second.values() for p in m.get(T, ())) == list(range(6))


def test_errors_as_kafka_answers_them() -> None:
    h = Harness()
    joined = h.heartbeat("m1", 0)
    fenced = h.heartbeat("m1", joined.member_epoch + 5)
    assert fenced.error == E.FENCED_MEMBER_EPOCH
    assert fenced.message is not None and "greater member epoch" in fenced.message
    unknown = h.heartbeat("ghost", 3)
    assert (unknown.error, unknown.message) == (
        E.UNKNOWN_MEMBER_ID,
        "Member ghost is not a member of group sg.",
    )
    assert h.heartbeat("m2", 0, topics=None).message == (
        "SubscribedTopicNames must be set in first request."
    )
    assert h.heartbeat("m2", 0, group="").message == "GroupId can't be empty."
    assert h.heartbeat("", 0).error == E.INVALID_REQUEST


def test_leaving_and_session_expiry_remove_members() -> None:
    h = Harness()
    a = h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    left = h.heartbeat("a", -1)
    assert (left.error, left.member_epoch) == (E.NONE, -1)
    assert set(h.group().share.members) == {"b"}
    h.tick(45_001)
    assert not h.group().share.members
    assert h.heartbeat("a", a.member_epoch).error == E.UNKNOWN_MEMBER_ID


def test_a_failover_replays_the_group() -> None:
    h = Harness()
    joined = h.heartbeat("m1", 0)
    got = h.heartbeat("m1", joined.member_epoch)
    state = LoadedState()
    for key, value in h.stored:
        encoded = encode_value(value)
        assert decode_value(decode_key(encode_key(key)), encoded) == value  # type: ignore[arg-type]
        state.apply(encode_key(key), encoded)
    other = GroupStateMachine(GroupConfig(), lambda: h.now, 1, topics=Topics())
    other.begin_load(0)
    other.complete_load(0, state)
    loaded = other._groups[G].share
    assert loaded.initialized == {T: frozenset({0, 1, 2})}
    assert loaded.members["m1"].assigned == {T: frozenset({0, 1, 2})}
    assert loaded.group_epoch == h.group().share.group_epoch
    assert other.describe_share_group(G).members[0].member_epoch == got.member_epoch


def test_group_epoch_bumps_are_counted_as_rebalances() -> None:
    h = Harness()
    a = h.heartbeat("a", 0)
    joined = h.core.rebalances["share"]
    # One rebalance per bump; the first one takes a new group to epoch 2.
    assert joined == h.group().share.group_epoch - 1 > 0
    h.heartbeat("a", a.member_epoch)
    assert h.core.rebalances["share"] == joined
    h.heartbeat("a", -1)
    assert h.core.rebalances == {"classic": 0, "consumer": 0, "share": joined + 1}
