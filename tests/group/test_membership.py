"""Scenario tests of the classic group protocol on the pure state machine (fake clock)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kbroker.group.events import GroupState
from tests.group.conftest import PROTOCOLS, Driver
from wire.errors import ErrorCode


def test_member_id_handshake_then_first_generation(d: Driver) -> None:
    first = d.join_reply(d.join(client_id="app"))
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id == "app-1"
    assert d.state() is GroupState.EMPTY

    result = d.join_reply(d.join("app-1"))
    assert result.error == ErrorCode.NONE
    assert (result.generation_id, result.leader_id, result.member_id) == (1, "app-1", "app-1")
    assert result.protocol_type == "consumer"
    assert result.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in result.members] == [("app-1", b"sub-range")]
    assert d.state() is GroupState.COMPLETING_REBALANCE

    sync = d.sync_reply(d.sync("app-1", 1, {"app-1": b"a1"}))
    assert sync.error == ErrorCode.NONE
    assert sync.assignment == b"a1"
    assert d.state() is GroupState.STABLE
    group_id, value = d.stored[-1]
    assert group_id == "g"
    assert value.generation == 1 and value.protocol == "range" and value.leader == "app-1"
    assert [(m.member_id, m.subscription, m.assignment) for m in value.members] == [
        ("app-1", b"sub-range", b"a1")
    ]
    assert d.heartbeat("app-1", 1) == ErrorCode.NONE


def test_old_join_versions_get_a_member_id_at_once(d: Driver) -> None:
    result = d.join_reply(d.join(require_known=False))
    assert result.error == ErrorCode.NONE
    assert result.member_id == "c-1" and result.generation_id == 1


def test_sync_answers_wait_until_the_leader_assignment_is_persisted(d: Driver) -> None:
    a, b = d.new_member(), d.new_member()
    ja, jb = d.join(a), d.join(b)
    generation = d.join_reply(ja).generation_id
    assert d.join_reply(jb).members == ()  # only the leader gets the member list
    assert len(d.join_reply(ja).members) == 2
    follower = d.sync(b, generation)
    assert d.reply(follower) is None
    d.hold_stores = True
    leader = d.sync(a, generation, {a: b"A", b: b"B"})
    assert d.reply(leader) is None and d.reply(follower) is None
    d.release_stores()
    assert d.sync_reply(leader).assignment == b"A"
    assert d.sync_reply(follower).assignment == b"B"
    assert d.state() is GroupState.STABLE


def test_failed_persist_of_the_assignment_restarts_the_rebalance(d: Driver) -> None:
    a = d.new_member()
    generation = d.join_reply(d.join(a)).generation_id
    d.hold_stores = True
    token = d.sync(a, generation, {a: b"A"})
    d.release_stores(ErrorCode.NOT_COORDINATOR)
    assert d.sync_reply(token).error == ErrorCode.NOT_COORDINATOR
    assert d.state() is GroupState.PREPARING_REBALANCE


def test_new_member_triggers_rebalance_and_followers_learn_by_heartbeat(d: Driver) -> None:
    (a,), gen = d.stable_group(1)
    b = d.new_member()
    jb = d.join(b)
    assert d.state() is GroupState.PREPARING_REBALANCE
    assert d.reply(jb) is None
    assert d.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    ja = d.join(a)
    ra, rb = d.join_reply(ja), d.join_reply(jb)
    assert ra.generation_id == rb.generation_id == gen + 1
    assert ra.leader_id == a
    assert {m.member_id for m in ra.members} == {a, b}


def test_leader_rejoin_in_stable_rebalances_follower_rejoin_does_not(d: Driver) -> None:
    (leader, follower), gen = d.stable_group(2)
    same = d.join_reply(d.join(follower))
    assert same.error == ErrorCode.NONE and same.generation_id == gen and same.members == ()
    assert d.state() is GroupState.STABLE
    token = d.join(leader)
    assert d.reply(token) is None
    assert d.state() is GroupState.PREPARING_REBALANCE


def test_changed_subscription_triggers_rebalance(d: Driver) -> None:
    (_, follower), _ = d.stable_group(2)
    d.join(follower, protocols=(("range", b"new-topics"),))
    assert d.state() is GroupState.PREPARING_REBALANCE


def test_rejoin_with_same_metadata_while_completing_gets_the_same_answer(d: Driver) -> None:
    a, b = d.new_member(), d.new_member()
    ja, _ = d.join(a), d.join(b)
    again = d.join_reply(d.join(a))
    assert again == d.join_reply(ja)
    assert d.state() is GroupState.COMPLETING_REBALANCE


def test_duplicate_pending_join_answers_the_older_request(d: Driver) -> None:
    (a, b), _ = d.stable_group(2)
    first = d.join(a)
    second = d.join(a)
    assert d.join_reply(first).error == ErrorCode.REBALANCE_IN_PROGRESS
    d.join(b)
    assert d.join_reply(second).error == ErrorCode.NONE


def test_protocol_selection_by_votes(d: Driver) -> None:
    ids = [d.new_member() for _ in range(3)]
    prefs = [
        (("a", b""), ("b", b"")),
        (("b", b""), ("a", b"")),
        (("b", b""), ("a", b""), ("c", b"")),
    ]
    tokens = [d.join(m, protocols=p) for m, p in zip(ids, prefs, strict=True)]
    assert {d.join_reply(t).protocol_name for t in tokens} == {"b"}


@pytest.mark.parametrize(
    ("protocol_type", "protocols"),
    [
        ("connect", PROTOCOLS),
        ("consumer", (("sticky", b""),)),
    ],
)
def test_inconsistent_protocol_is_refused(
    d: Driver, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]
) -> None:
    d.stable_group(1)
    token = d.join(require_known=False, protocol_type=protocol_type, protocols=protocols)
    assert d.join_reply(token).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize(("protocol_type", "protocols"), [("", PROTOCOLS), ("consumer", ())])
def test_first_member_needs_a_protocol(
    d: Driver, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]
) -> None:
    token = d.join(protocol_type=protocol_type, protocols=protocols)
    assert d.join_reply(token).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize(("session", "ok"), [(5_999, False), (6_000, True), (1_800_001, False)])
def test_session_timeout_bounds(d: Driver, session: int, ok: bool) -> None:
    error = d.join_reply(d.join(session=session)).error
    assert error == (ErrorCode.MEMBER_ID_REQUIRED if ok else ErrorCode.INVALID_SESSION_TIMEOUT)


def test_unknown_member_id_for_a_new_group_or_stranger(d: Driver) -> None:
    assert d.join_reply(d.join("ghost")).error == ErrorCode.UNKNOWN_MEMBER_ID
    d.stable_group(1)
    assert d.join_reply(d.join("ghost")).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_invalid_group_id(d: Driver) -> None:
    assert d.join_reply(d.join(group="")).error == ErrorCode.INVALID_GROUP_ID
    assert d.sync_reply(d.sync("m", 1, group="")).error == ErrorCode.INVALID_GROUP_ID
    assert d.sm.heartbeat("", "m", None, 1) == ErrorCode.INVALID_GROUP_ID


# --- timing ---------------------------------------------------------------------------------


def test_initial_rebalance_delay_waits_and_extends_per_new_member(
    make_driver: Callable[..., Driver],
) -> None:
    d = make_driver(initial_rebalance_delay_ms=3_000)
    a = d.new_member()
    ja = d.join(a, rebalance=10_000)
    d.advance(2_000)
    b = d.new_member()
    jb = d.join(b, rebalance=10_000)
    d.advance(1_000)  # t=3000: b joined during the delay, so wait another 3000
    assert d.reply(ja) is None
    d.advance(2_999)
    assert d.reply(ja) is None
    d.advance(1)
    assert d.join_reply(ja).generation_id == d.join_reply(jb).generation_id == 1
    assert {m.member_id for m in d.join_reply(ja).members} == {a, b}


def test_initial_delay_alone_member(make_driver: Callable[..., Driver]) -> None:
    d = make_driver(initial_rebalance_delay_ms=3_000)
    token = d.join(d.new_member())
    d.advance(2_999)
    assert d.reply(token) is None
    d.advance(1)
    assert d.join_reply(token).error == ErrorCode.NONE


def test_initial_delay_is_bounded_by_the_rebalance_timeout(
    make_driver: Callable[..., Driver],
) -> None:
    d = make_driver(initial_rebalance_delay_ms=3_000)
    first = d.join(d.new_member(), rebalance=5_000)
    for _ in range(4):
        d.advance(1_000)
        d.join(d.new_member(), rebalance=5_000)
    # Budget: 3000 first, then at most 5000 - 3000 = 2000 more, despite later joins.
    d.advance(999)
    assert d.reply(first) is None
    d.advance(1)
    assert d.join_reply(first).error == ErrorCode.NONE


def test_session_expiry_in_stable_removes_member_and_rebalances(d: Driver) -> None:
    (a, b), gen = d.stable_group(2, session=10_000)
    d.advance(1_000)
    assert d.heartbeat(b, gen) == ErrorCode.NONE  # b's last sign of life
    for step in (4_000, 4_000, 1_999):
        d.advance(step)
        assert d.heartbeat(a, gen) == ErrorCode.NONE
    d.advance(1)
    assert d.heartbeat(b, gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    result = d.join_reply(d.join(a))
    assert result.generation_id == gen + 1
    assert [m.member_id for m in result.members] == [a]


def test_heartbeat_and_commit_keep_the_session(d: Driver) -> None:
    (a,), gen = d.stable_group(1, session=10_000)
    d.advance(9_000)
    assert d.sm.validate_commit("g", a, None, gen, 8) == ErrorCode.NONE
    d.advance(9_000)
    assert d.heartbeat(a, gen) == ErrorCode.NONE
    assert d.state() is GroupState.STABLE
    d.advance(10_000)
    assert d.state() is GroupState.EMPTY


def test_rebalance_timeout_drops_members_that_do_not_rejoin(d: Driver) -> None:
    # b keeps heartbeating (so no session expiry) but never rejoins.
    (a, b), gen = d.stable_group(2, session=10_000, rebalance=20_000)
    ja = d.join(a, session=10_000, rebalance=20_000)
    for _ in range(4):
        d.advance(4_900)
        assert d.heartbeat(b, gen) == ErrorCode.REBALANCE_IN_PROGRESS
        assert d.reply(ja) is None
    d.advance(400)
    result = d.join_reply(ja)
    assert result.generation_id == gen + 1
    assert [m.member_id for m in result.members] == [a]
    assert d.heartbeat(b, gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_expiry_during_rebalance_completes_the_join_early(d: Driver) -> None:
    (a, _), gen = d.stable_group(2, session=10_000, rebalance=60_000)
    ja = d.join(a, session=10_000, rebalance=60_000)
    d.advance(10_000)
    assert d.join_reply(ja).generation_id == gen + 1


def test_member_that_never_syncs_is_removed_after_rebalance_timeout(d: Driver) -> None:
    timeouts = {"session": 30_000, "rebalance": 20_000}
    a, b = d.new_member(**timeouts), d.new_member(**timeouts)
    ja, _ = d.join(a, **timeouts), d.join(b, **timeouts)
    gen = d.join_reply(ja).generation_id
    d.sync(a, gen, {a: b"A", b: b"B"})
    assert d.state() is GroupState.STABLE
    d.advance(19_999)
    assert d.heartbeat(a, gen) == ErrorCode.NONE
    d.advance(1)  # b never sent SyncGroup: dropped at the rebalance timeout
    assert d.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    assert d.heartbeat(b, gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_leader_that_never_syncs_fails_waiting_followers(d: Driver) -> None:
    timeouts = {"session": 30_000, "rebalance": 20_000}
    a, b = d.new_member(**timeouts), d.new_member(**timeouts)
    ja, _ = d.join(a, **timeouts), d.join(b, **timeouts)
    gen = d.join_reply(ja).generation_id
    follower = d.sync(b, gen)
    d.advance(19_999)
    assert d.heartbeat(a, gen) == ErrorCode.NONE
    assert d.reply(follower) is None
    d.advance(1)
    assert d.sync_reply(follower).error == ErrorCode.REBALANCE_IN_PROGRESS
    assert d.state() is GroupState.PREPARING_REBALANCE


def test_outstanding_member_id_holds_the_join_until_it_lapses(d: Driver) -> None:
    (a,), gen = d.stable_group(1, session=10_000)
    d.new_member(session=10_000)  # got an id, never comes back
    assert d.state() is GroupState.STABLE
    d.new_member(session=10_000)
    b = d.new_member(session=30_000)
    jb = d.join(b, session=30_000)
    ja = d.join(a, session=10_000)
    assert d.reply(ja) is None
    d.advance(10_000)
    assert d.join_reply(ja).generation_id == gen + 1
    assert d.join_reply(jb).generation_id == gen + 1


# --- fencing --------------------------------------------------------------------------------


def test_generation_and_member_fencing_errors(d: Driver) -> None:
    (a, b), gen = d.stable_group(2)
    assert d.heartbeat(a, gen - 1) == ErrorCode.ILLEGAL_GENERATION
    assert d.heartbeat("ghost", gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.sync_reply(d.sync(a, gen + 1)).error == ErrorCode.ILLEGAL_GENERATION
    assert d.sync_reply(d.sync("ghost", gen)).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.sm.validate_commit("g", a, None, gen - 1, 8) == ErrorCode.ILLEGAL_GENERATION
    assert d.sm.validate_commit("g", "ghost", None, gen, 8) == ErrorCode.UNKNOWN_MEMBER_ID
    wrong_protocol = d.sync(a, gen, protocol_type="consumer", protocol_name="roundrobin")
    assert d.sync_reply(wrong_protocol).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # A rebalance starts: the old generation's sync is told to rejoin.
    d.join(a)
    assert d.sync_reply(d.sync(b, gen)).error == ErrorCode.REBALANCE_IN_PROGRESS
    assert d.sm.validate_commit("g", b, None, gen, 8) == ErrorCode.NONE
    d.join(b)
    assert d.state() is GroupState.COMPLETING_REBALANCE
    assert d.sm.validate_commit("g", b, None, gen + 1, 8) == ErrorCode.REBALANCE_IN_PROGRESS
    assert d.heartbeat(b, gen + 1) == ErrorCode.NONE
    assert d.heartbeat("g", gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_requests_to_an_empty_or_unknown_group(d: Driver) -> None:
    assert d.heartbeat("m", 0) == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.sync_reply(d.sync("m", 0)).error == ErrorCode.UNKNOWN_MEMBER_ID
    (a,), gen = d.stable_group(1)
    d.leave((a, None))
    assert d.state() is GroupState.EMPTY
    assert d.heartbeat(a, gen) == ErrorCode.UNKNOWN_MEMBER_ID


# --- leaving --------------------------------------------------------------------------------


def test_leave_rebalances_and_last_leave_empties_the_group(d: Driver) -> None:
    (a, b), gen = d.stable_group(2)
    assert d.leave((b, None)) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert d.state() is GroupState.PREPARING_REBALANCE
    result = d.join_reply(d.join(a))
    assert result.generation_id == gen + 1
    d.sync(a, gen + 1, {a: b"x"})
    d.leave((a, None))
    assert d.state() is GroupState.EMPTY
    _, value = d.stored[-1]
    assert value.generation == gen + 2 and value.members == ()


def test_leave_of_a_member_awaiting_join_answers_its_join(d: Driver) -> None:
    (a, b), _ = d.stable_group(2)
    ja = d.join(a)
    d.leave((a, None))
    assert d.join_reply(ja).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_batched_leave_with_instance_ids(d: Driver) -> None:
    first, _, gen = _static_group(d)
    top, errors = d.leave(("", "i-1"), ("wrong", "i-2"), ("", "i-9"), ("ghost", None))
    assert top == ErrorCode.NONE
    assert errors == [
        ErrorCode.NONE,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    assert d.heartbeat(first, gen, "i-1") == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.state() is GroupState.PREPARING_REBALANCE


def test_leave_of_an_outstanding_member_id(d: Driver) -> None:
    pending = d.new_member()
    assert d.leave((pending, None)) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert d.join_reply(d.join(pending)).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_unknown_group(d: Driver) -> None:
    assert d.leave(("m", None)) == (ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID])


# --- static membership (KIP-345) ------------------------------------------------------------


def _static_group(d: Driver) -> tuple[str, str, int]:
    first = d.join_reply(d.join(instance="i-1"))
    t2 = d.join(instance="i-2")
    t1 = d.join(first.member_id, instance="i-1")
    r1, r2 = d.join_reply(t1), d.join_reply(t2)
    assert r1.error == r2.error == ErrorCode.NONE  # no MEMBER_ID_REQUIRED for static members
    gen = r1.generation_id
    d.sync(r1.member_id, gen, {r1.member_id: b"A1", r2.member_id: b"A2"}, instance="i-1")
    d.sync(r2.member_id, gen, instance="i-2")
    assert d.state() is GroupState.STABLE
    return r1.member_id, r2.member_id, gen


def test_static_member_restart_keeps_its_place_without_rebalance(d: Driver) -> None:
    leader, follower, gen = _static_group(d)
    assert follower.startswith("i-2-")
    rejoin = d.join_reply(d.join(instance="i-2"))
    assert rejoin.error == ErrorCode.NONE
    assert rejoin.member_id != follower
    assert rejoin.generation_id == gen
    assert d.state() is GroupState.STABLE
    # The assignment is still there for the new member id.
    assert d.sync_reply(d.sync(rejoin.member_id, gen, instance="i-2")).assignment == b"A2"
    # The old incarnation is fenced.
    assert d.heartbeat(follower, gen, "i-2") == ErrorCode.FENCED_INSTANCE_ID
    assert d.sync_reply(d.sync(follower, gen, instance="i-2")).error == (
        ErrorCode.FENCED_INSTANCE_ID
    )
    assert d.sm.validate_commit("g", follower, "i-2", gen, 8) == ErrorCode.FENCED_INSTANCE_ID
    _, value = d.stored[-1]
    assert {m.member_id for m in value.members} == {leader, rejoin.member_id}


def test_static_leader_restart_skips_assignment(d: Driver) -> None:
    _, _, gen = _static_group(d)
    rejoin = d.join_reply(d.join(instance="i-1"))
    assert rejoin.leader_id == rejoin.member_id
    assert rejoin.skip_assignment
    assert len(rejoin.members) == 2
    assert rejoin.generation_id == gen


def test_static_member_with_new_metadata_rebalances(d: Driver) -> None:
    _static_group(d)
    d.join(instance="i-2", protocols=(("range", b"other"),))
    assert d.state() is GroupState.PREPARING_REBALANCE


def test_static_replacement_fences_the_pending_request(d: Driver) -> None:
    _, follower, _ = _static_group(d)
    pending = d.join(follower, instance="i-2", protocols=(("range", b"other"),))
    assert d.reply(pending) is None
    d.join(instance="i-2")
    assert d.join_reply(pending).error == ErrorCode.FENCED_INSTANCE_ID


def test_static_member_session_expiry(d: Driver) -> None:
    leader, follower, gen = _static_group(d)
    for _ in range(3):
        d.advance(4_000)
        d.heartbeat(leader, gen, "i-1")
    assert d.heartbeat(follower, gen, "i-2") == ErrorCode.UNKNOWN_MEMBER_ID


# --- group.max.size -------------------------------------------------------------------------


def test_group_max_size(make_driver: Callable[..., Driver]) -> None:
    d = make_driver(max_size=2)
    (a, _), _ = d.stable_group(2)
    assert d.join_reply(d.join()).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert d.join_reply(d.join(require_known=False)).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    # Members already in the group may rejoin.
    token = d.join(a)
    assert d.reply(token) is None
    assert d.state() is GroupState.PREPARING_REBALANCE


def test_group_max_size_lets_a_static_member_back(make_driver: Callable[..., Driver]) -> None:
    d = make_driver(max_size=2)
    _static_group(d)
    assert d.join_reply(d.join(instance="i-2")).error == ErrorCode.NONE


# --- coordinator ownership ------------------------------------------------------------------


def test_not_coordinator_and_loading(make_driver: Callable[..., Driver]) -> None:
    d = make_driver(partitions=2, load=False)
    p = d.sm.partition_for("g")
    assert d.join_reply(d.join()).error == ErrorCode.NOT_COORDINATOR
    d.sm.begin_load(p)
    assert d.join_reply(d.join()).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert d.heartbeat("m", 1) == ErrorCode.NONE
    assert d.sm.validate_commit("g", "", None, -1, 8) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_unload_answers_pending_requests(d: Driver) -> None:
    (a, _), _ = d.stable_group(2)
    token = d.join(a)
    d.perform(d.sm.unload(0))
    assert d.join_reply(token).error == ErrorCode.NOT_COORDINATOR
    assert d.heartbeat(a, 1) == ErrorCode.NOT_COORDINATOR
    assert d.sm.next_deadline() is None


def test_each_generation_is_counted_as_a_rebalance(d: Driver) -> None:
    members, generation = d.stable_group(2)
    assert d.sm.rebalances == {"classic": generation, "consumer": 0, "share": 0}
    assert d.heartbeat(members[1], generation) == ErrorCode.NONE
    d.leave((members[1], None))
    rejoined = d.join(members[0])
    assert d.join_reply(rejoined).generation_id == generation + 1
    assert d.sm.rebalances["classic"] == generation + 1
