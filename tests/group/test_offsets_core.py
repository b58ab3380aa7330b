"""Committed offsets in the pure state machine: commit rules, fetch, delete, expiry, loading."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kbroker.group.consumer_protocol import encode_subscription
from kbroker.group.events import GroupState
from kbroker.group.offsets_store import (
    GroupKey,
    GroupValue,
    LoadedState,
    MemberValue,
    OffsetKey,
    OffsetValue,
)
from tests.group.conftest import GROUP, Driver
from wire.errors import ErrorCode

DAY = 24 * 3_600_000


@pytest.mark.parametrize(
    ("member", "instance", "generation", "version", "expected"),
    [
        ("", None, -1, 8, ErrorCode.NONE),
        ("", None, 0, 8, ErrorCode.ILLEGAL_GENERATION),
        ("m", None, 3, 8, ErrorCode.ILLEGAL_GENERATION),
        ("m", None, 3, 9, ErrorCode.GROUP_ID_NOT_FOUND),
    ],
)
def test_commit_to_a_group_that_does_not_exist(
    d: Driver, member: str, instance: str | None, generation: int, version: int, expected: ErrorCode
) -> None:
    assert d.sm.validate_commit(GROUP, member, instance, generation, version) == expected
    assert (d.state() is GroupState.EMPTY) == (expected == ErrorCode.NONE)


def test_simple_commits_only_while_the_group_is_empty(d: Driver) -> None:
    assert d.sm.validate_commit(GROUP, "", None, -1, 2) == ErrorCode.NONE
    (a,), gen = d.stable_group(1)
    assert d.sm.validate_commit(GROUP, "", None, -1, 2) == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.sm.validate_commit(GROUP, a, None, gen, 2) == ErrorCode.NONE
    assert d.sm.validate_commit(GROUP, "", "i-1", gen, 2) == ErrorCode.UNKNOWN_MEMBER_ID


def test_commit_checks_metadata_size(make_driver: Callable[..., Driver]) -> None:
    d = make_driver(offset_metadata_max_bytes=4)
    assert d.sm.check_offset_metadata("abcd") == ErrorCode.NONE
    assert d.sm.check_offset_metadata(None) == ErrorCode.NONE
    assert d.sm.check_offset_metadata("abcde") == ErrorCode.OFFSET_METADATA_TOO_LARGE


def test_committed_offsets_are_fetched_back(d: Driver) -> None:
    d.sm.validate_commit(GROUP, "", None, -1, 2)
    d.sm.apply_offsets(GROUP, {("t", 0): OffsetValue(5, "meta", 100, 3)})
    assert d.sm.committed(GROUP, [("t", 0), ("t", 1)]) == {
        ("t", 0): OffsetValue(5, "meta", 100, 3),
        ("t", 1): None,
    }
    assert d.sm.committed(GROUP, None) == {("t", 0): OffsetValue(5, "meta", 100, 3)}
    assert d.sm.committed("other", None) == {}


def _consumer_group(d: Driver, topics: list[str]) -> tuple[str, int]:
    sub = encode_subscription(topics)
    (a,), gen = d.stable_group(1, protocols=(("range", sub),))
    return a, gen


def test_delete_offsets_keeps_subscribed_topics(d: Driver) -> None:
    _consumer_group(d, ["t"])
    d.sm.apply_offsets(GROUP, {("t", 0): OffsetValue(1), ("u", 0): OffsetValue(2)})
    top, errors, records = d.sm.delete_offsets(GROUP, [("t", 0), ("u", 0), ("u", 1)])
    assert top == ErrorCode.NONE
    assert errors == {
        ("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ("u", 0): ErrorCode.NONE,
        ("u", 1): ErrorCode.NONE,
    }
    assert records == [(OffsetKey(GROUP, "u", 0), None)]
    assert d.sm.committed(GROUP, None) == {("t", 0): OffsetValue(1)}


def test_delete_offsets_errors(d: Driver) -> None:
    assert d.sm.delete_offsets(GROUP, [("t", 0)])[0] == ErrorCode.GROUP_ID_NOT_FOUND
    d.stable_group(1, protocol_type="connect")
    assert d.sm.delete_offsets(GROUP, [("t", 0)])[0] == ErrorCode.NON_EMPTY_GROUP


def test_delete_groups(d: Driver) -> None:
    d.sm.validate_commit("simple", "", None, -1, 2)
    d.sm.apply_offsets("simple", {("t", 0): OffsetValue(1), ("t", 1): OffsetValue(2)})
    d.stable_group(1)
    errors, records = d.sm.delete_groups(["simple", GROUP, "nope", ""])
    assert errors == {
        "simple": ErrorCode.NONE,
        GROUP: ErrorCode.NON_EMPTY_GROUP,
        "nope": ErrorCode.GROUP_ID_NOT_FOUND,
        "": ErrorCode.INVALID_GROUP_ID,
    }
    assert records == [
        (OffsetKey("simple", "t", 0), None),
        (OffsetKey("simple", "t", 1), None),
        (GroupKey("simple"), None),
    ]
    assert d.sm.describe("simple") is None


def test_empty_group_offsets_expire_after_retention_from_becoming_empty(
    make_driver: Callable[..., Driver],
) -> None:
    d = make_driver(offsets_retention_ms=DAY)
    d.stable_group(1, session=10_000)
    d.sm.apply_offsets(GROUP, {("t", 0): OffsetValue(7, "", d.clock.now)})
    d.advance(10_000)  # the member's session ends; the group is empty from now
    assert d.state() is GroupState.EMPTY
    emptied = d.clock.now
    d.clock.now = emptied + DAY - 1
    assert d.sm.expire_offsets() == []
    d.clock.now += 1
    assert d.sm.expire_offsets() == [(OffsetKey(GROUP, "t", 0), None), (GroupKey(GROUP), None)]
    assert d.sm.describe(GROUP) is None


def test_simple_group_offsets_expire_by_commit_time(make_driver: Callable[..., Driver]) -> None:
    d = make_driver(offsets_retention_ms=DAY)
    now = d.clock.now
    d.sm.validate_commit(GROUP, "", None, -1, 2)
    d.sm.apply_offsets(
        GROUP,
        {
            ("t", 0): OffsetValue(1, "", now),
            ("t", 1): OffsetValue(1, "", now + 10),
            ("t", 2): OffsetValue(1, "", now, expire_timestamp=now + 5),
        },
    )
    d.clock.now = now + 5
    assert d.sm.expire_offsets() == [(OffsetKey(GROUP, "t", 2), None)]
    d.clock.now = now + DAY
    assert d.sm.expire_offsets() == [(OffsetKey(GROUP, "t", 0), None)]
    d.clock.now = now + DAY + 10
    assert d.sm.expire_offsets() == [(OffsetKey(GROUP, "t", 1), None), (GroupKey(GROUP), None)]


def test_stable_consumer_group_keeps_subscribed_offsets(make_driver: Callable[..., Driver]) -> None:
    d = make_driver(offsets_retention_ms=DAY)
    a, gen = _consumer_group(d, ["t"])
    now = d.clock.now
    d.sm.apply_offsets(
        GROUP, {("t", 0): OffsetValue(1, "", now), ("old", 0): OffsetValue(1, "", now)}
    )
    d.clock.now = now + 2 * DAY
    d.heartbeat(a, gen)  # the timer has not run; the member is still there
    assert d.sm.expire_offsets() == [(OffsetKey(GROUP, "old", 0), None)]
    assert list(d.sm.committed(GROUP, None)) == [("t", 0)]


def test_loading_restores_groups_and_offsets(make_driver: Callable[..., Driver]) -> None:
    d = make_driver(partitions=1, load=False)
    member = MemberValue("m-1", "inst", "client", "/h", 30_000, 10_000, b"sub", b"assigned")
    loaded = LoadedState(
        groups={
            GROUP: GroupValue("consumer", 7, "range", "m-1", 123, (member,)),
            "gone-empty": GroupValue("consumer", 3, None, None, 5, ()),
        },
        offsets={GROUP: {("t", 0): OffsetValue(9)}, "simple": {("t", 1): OffsetValue(4)}},
    )
    d.sm.begin_load(0)
    d.sm.complete_load(0, loaded)
    described = d.sm.describe(GROUP)
    assert described is not None
    assert described.state is GroupState.STABLE and described.protocol == "range"
    assert [(m.member_id, m.metadata, m.assignment) for m in described.members] == [
        ("m-1", b"sub", b"assigned")
    ]
    assert d.heartbeat("m-1", 7, "inst") == ErrorCode.NONE
    assert d.sync_reply(d.sync("m-1", 7, instance="inst")).assignment == b"assigned"
    assert d.sm.committed(GROUP, None) == {("t", 0): OffsetValue(9)}
    assert d.state("gone-empty") is GroupState.EMPTY
    simple = d.sm.describe("simple")
    assert simple is not None and simple.protocol_type == ""
    assert {(g.group_id, g.state) for g in d.sm.list_groups()} == {
        (GROUP, GroupState.STABLE),
        ("gone-empty", GroupState.EMPTY),
        ("simple", GroupState.EMPTY),
    }
    # Loaded members that never come back expire after their session timeout.
    d.advance(10_001)
    assert d.heartbeat("m-1", 7, "inst") == ErrorCode.UNKNOWN_MEMBER_ID


def test_describe_hides_metadata_unless_stable(d: Driver) -> None:
    a = d.new_member()
    d.join(a)
    described = d.sm.describe(GROUP)
    assert described is not None
    assert described.state is GroupState.COMPLETING_REBALANCE
    assert described.protocol == ""
    assert [(m.member_id, m.metadata) for m in described.members] == [(a, b"")]


def test_unload_forgets_groups_and_offsets(d: Driver) -> None:
    d.sm.validate_commit(GROUP, "", None, -1, 2)
    d.sm.apply_offsets(GROUP, {("t", 0): OffsetValue(1)})
    d.sm.unload(0)
    assert d.sm.coordinator_error(GROUP) == ErrorCode.NOT_COORDINATOR
    assert d.sm.list_groups() == []
