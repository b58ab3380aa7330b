"""The uniform assignor, scenario by scenario: group -> expected target assignment.

The heterogeneous cases are those of Kafka's own UniformHeterogeneousAssignmentBuilderTest (with
members in member id order and topic ids in the same order, as there), and give Kafka's exact
answers. Kafka's homogeneous builder breaks ties in hash-map order; ours in member order and
(topic id, partition) order, so the homogeneous cases from Kafka's tests expect the same balance
and the same partitions kept, with our tie-breaks.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kbroker.group.assignors import ASSIGNORS
from kbroker.group.assignors.group_view import build_view
from kbroker.group.assignors.uniform_heterogeneous import HeterogeneousBuilder
from tests.group.assignor_cases import Member, Readable, member_specs, readable, topic_specs

UNIFORM = ASSIGNORS["uniform"]


@dataclass(frozen=True)
class Case:
    topics: dict[str, int]
    members: dict[str, Member]
    expected: Readable
    racks: dict[str, dict[int, set[str]]] | None = None


def run(case: Case) -> Readable:
    return readable(
        UNIFORM.assign(member_specs(case.members), topic_specs(case.topics, case.racks))
    )


HOMOGENEOUS = {
    "no subscription": Case(topics={"t1": 3}, members={"A": Member([])}, expected={"A": {}}),
    "subscribed topic does not exist": Case(
        topics={"t1": 3}, members={"A": Member(["t2"])}, expected={"A": {}}
    ),
    "first assignment: runs in member order, the spare to the first": Case(
        topics={"t1": 3, "t3": 2},
        members={"A": Member(["t1", "t3"]), "B": Member(["t1", "t3"])},
        expected={"A": {"t1": [0, 1, 2]}, "B": {"t3": [0, 1]}},
    ),
    "more members than partitions": Case(
        topics={"t3": 2},
        members={"A": Member(["t3"]), "B": Member(["t3"]), "C": Member(["t3"])},
        expected={"A": {"t3": [0]}, "B": {"t3": [1]}, "C": {}},
    ),
    "unbalanced current: the excess moves, the rest stays": Case(
        topics={"t1": 3, "t2": 3},
        members={
            "A": Member(["t1", "t2"], {"t1": [0, 1], "t2": [0, 1]}),
            "B": Member(["t1", "t2"], {"t1": [2], "t2": [2]}),
        },
        expected={"A": {"t1": [0, 1], "t2": [0]}, "B": {"t1": [2], "t2": [1, 2]}},
    ),
    "partitions added": Case(
        topics={"t1": 6, "t2": 5},
        members={
            "A": Member(["t1", "t2"], {"t1": [0, 2], "t2": [0]}),
            "B": Member(["t1", "t2"], {"t1": [1], "t2": [1, 2]}),
        },
        expected={
            "A": {"t1": [0, 2, 3, 4, 5], "t2": [0]},
            "B": {"t1": [1], "t2": [1, 2, 3, 4]},
        },
    ),
    "member added: it takes the excess of the others": Case(
        topics={"t1": 3, "t2": 3},
        members={
            "A": Member(["t1", "t2"], {"t1": [0, 2], "t2": [0]}),
            "B": Member(["t1", "t2"], {"t1": [1], "t2": [1, 2]}),
            "C": Member(["t1", "t2"]),
        },
        expected={"A": {"t1": [0, 2]}, "B": {"t1": [1], "t2": [1]}, "C": {"t2": [0, 2]}},
    ),
    "member removed: only its partitions move": Case(
        topics={"t1": 3, "t2": 3},
        members={
            "A": Member(["t1", "t2"], {"t1": [0], "t2": [0]}),
            "B": Member(["t1", "t2"], {"t1": [1], "t2": [1]}),
        },
        expected={"A": {"t1": [0, 2], "t2": [0]}, "B": {"t1": [1], "t2": [1, 2]}},
    ),
    "subscription removed: its partitions leave": Case(
        topics={"t1": 2, "t2": 2},
        members={
            "A": Member(["t2"], {"t1": [0], "t2": [0]}),
            "B": Member(["t2"], {"t1": [1], "t2": [1]}),
        },
        expected={"A": {"t2": [0]}, "B": {"t2": [1]}},
    ),
    "the spare slot goes to the member holding more: nothing moves": Case(
        topics={"t1": 5},
        members={
            "A": Member(["t1"], {"t1": [0, 1]}),
            "B": Member(["t1"], {"t1": [2, 3, 4]}),
        },
        expected={"A": {"t1": [0, 1]}, "B": {"t1": [2, 3, 4]}},
    ),
    "topic deleted and partitions beyond the count dropped from current": Case(
        topics={"t1": 2},
        members={
            "A": Member(["t1", "t2"], {"t1": [0, 5], "t2": [0]}),
            "B": Member(["t1", "t2"], {"t1": [1]}),
        },
        expected={"A": {"t1": [0]}, "B": {"t1": [1]}},
    ),
    "a partition in two members' current: the first member keeps it": Case(
        topics={"t1": 4},
        members={
            "A": Member(["t1"], {"t1": [0, 1]}),
            "B": Member(["t1"], {"t1": [1, 2]}),
        },
        expected={"A": {"t1": [0, 1]}, "B": {"t1": [2, 3]}},
    ),
    "topics in Kafka's id order: a top-bit id first": Case(
        topics={"t1": 1, "t0": 1},
        members={"A": Member(["t0", "t1"]), "B": Member(["t0", "t1"])},
        expected={"A": {"t0": [0]}, "B": {"t1": [0]}},
    ),
    "member ids in Java's order (UTF-16 code units)": Case(
        topics={"t1": 2},
        members={"\U0001f600": Member(["t1"]), "\uffff": Member(["t1"])},
        expected={"\U0001f600": {"t1": [0]}, "\uffff": {"t1": [1]}},
    ),
}

HETEROGENEOUS = {
    "two members, no subscription": Case(
        topics={"t1": 3},
        members={"A": Member([]), "B": Member([])},
        expected={"A": {}, "B": {}},
    ),
    "first assignment, two members, two topics": Case(
        topics={"t1": 3, "t3": 6},
        members={"A": Member(["t1", "t3"]), "B": Member(["t3"])},
        expected={"A": {"t1": [0, 1, 2], "t3": [4]}, "B": {"t3": [0, 1, 2, 3, 5]}},
    ),
    "first assignment, more members than partitions": Case(
        topics={"t3": 1, "t1": 2},
        members={"A": Member(["t3"]), "B": Member(["t3"]), "C": Member(["t1"])},
        expected={"A": {"t3": [0]}, "B": {}, "C": {"t1": [0, 1]}},
    ),
    "unbalanced current, three topics": Case(
        topics={"t1": 6, "t2": 4, "t3": 4},
        members={
            "A": Member(["t1"], {"t1": [0, 1, 2]}),
            "B": Member(["t1", "t2"], {"t1": [3], "t2": [0]}),
            "C": Member(["t1", "t2", "t3"], {"t1": [4, 5], "t2": [1, 2, 3], "t3": [0, 1, 2, 3]}),
        },
        expected={
            "A": {"t1": [0, 1, 2, 5]},
            "B": {"t1": [3], "t2": [0, 1, 2, 3]},
            "C": {"t1": [4], "t3": [0, 1, 2, 3]},
        },
    ),
    "partitions added": Case(
        topics={"t1": 6, "t2": 5, "t3": 3, "t4": 3},
        members={
            "A": Member(["t1", "t3"], {"t1": [0, 1, 2, 3], "t3": [0, 1]}),
            "B": Member(["t1", "t2", "t3", "t4"], {"t2": [0, 1, 2], "t4": [0, 1, 2]}),
        },
        expected={
            "A": {"t1": [0, 1, 2, 3, 4, 5], "t3": [0, 1, 2]},
            "B": {"t2": [0, 1, 2, 3, 4], "t4": [0, 1, 2]},
        },
    ),
    "member added and partitions added": Case(
        topics={"t1": 6, "t2": 7},
        members={
            "A": Member(["t1"], {"t1": [0, 2], "t2": [0]}),
            "B": Member(["t1", "t2"], {"t1": [1], "t2": [1, 2]}),
            "C": Member(["t1", "t2"]),
        },
        expected={
            "A": {"t1": [0, 2, 3, 4, 5]},
            "B": {"t1": [1], "t2": [1, 2, 6]},
            "C": {"t2": [0, 3, 4, 5]},
        },
    ),
    "member removed": Case(
        topics={"t1": 3, "t2": 8, "t3": 3},
        members={
            "A": Member(["t1", "t3"], {"t1": [0, 1, 2], "t3": [0, 1]}),
            "B": Member(["t2"], {"t2": [3, 4, 5, 6]}),
        },
        expected={
            "A": {"t1": [0, 1, 2], "t3": [0, 1, 2]},
            "B": {"t2": [0, 1, 2, 3, 4, 5, 6, 7]},
        },
    ),
    "subscription removed": Case(
        topics={"t1": 3, "t2": 5},
        members={
            "A": Member(["t1"], {"t1": [0, 2], "t2": [1, 3]}),
            "B": Member(["t1", "t2"], {"t1": [1], "t2": [0, 2, 4]}),
        },
        expected={"A": {"t1": [0, 1, 2]}, "B": {"t2": [0, 1, 2, 3, 4]}},
    ),
    "one member without subscription": Case(
        topics={"t1": 3},
        members={"A": Member(["t1"]), "B": Member([])},
        expected={"A": {"t1": [0, 1, 2]}, "B": {}},
    ),
}

RACKS = {
    "first assignment: every partition on its member's rack": Case(
        topics={"t1": 6},
        racks={"t1": {p: {"abc"[p % 3]} for p in range(6)}},
        members={
            "A": Member(["t1"], rack="a"),
            "B": Member(["t1"], rack="b"),
            "C": Member(["t1"], rack="c"),
        },
        expected={"A": {"t1": [0, 3]}, "B": {"t1": [1, 4]}, "C": {"t1": [2, 5]}},
    ),
    "a member giving up partitions gives those off its rack": Case(
        topics={"t1": 4},
        racks={"t1": {0: {"a"}, 1: {"b"}, 2: {"a"}, 3: {"b"}}},
        members={
            "A": Member(["t1"], {"t1": [0, 1, 2, 3]}, rack="a"),
            "B": Member(["t1"], rack="b"),
        },
        expected={"A": {"t1": [0, 2]}, "B": {"t1": [1, 3]}},
    ),
    "racks never move a partition balance lets a member keep": Case(
        topics={"t1": 4},
        racks={"t1": {0: {"b"}, 1: {"b"}, 2: {"a"}, 3: {"a"}}},
        members={
            "A": Member(["t1"], {"t1": [0, 1]}, rack="a"),
            "B": Member(["t1"], {"t1": [2, 3]}, rack="b"),
        },
        expected={"A": {"t1": [0, 1]}, "B": {"t1": [2, 3]}},
    ),
    "the spare slot goes to a member on the partition's rack": Case(
        topics={"t1": 3},
        racks={"t1": {0: {"b"}, 1: {"b"}, 2: {"b"}}},
        members={"A": Member(["t1"], rack="a"), "B": Member(["t1"], rack="b")},
        expected={"A": {"t1": [2]}, "B": {"t1": [0, 1]}},
    ),
    "the most constrained partitions first": Case(
        topics={"t1": 2},
        racks={"t1": {0: {"a", "b"}, 1: {"a"}}},
        members={"A": Member(["t1"], rack="a"), "B": Member(["t1"], rack="b")},
        expected={"A": {"t1": [1]}, "B": {"t1": [0]}},
    ),
    "members without racks: member order": Case(
        topics={"t1": 4},
        racks={"t1": {0: {"b"}, 1: {"b"}, 2: {"a"}, 3: {"a"}}},
        members={"A": Member(["t1"]), "B": Member(["t1"])},
        expected={"A": {"t1": [0, 1]}, "B": {"t1": [2, 3]}},
    ),
    # Racks would change which partitions members keep later on (Kafka's built-in
    # assignors ignore racks since 3.8): the same answer as without them.
    "heterogeneous: racks are not used": Case(
        topics={"t1": 4, "t2": 1},
        racks={"t1": {0: {"b"}, 1: {"b"}, 2: {"a"}, 3: {"a"}}},
        members={
            "A": Member(["t1"], rack="a"),
            "B": Member(["t1"], rack="b"),
            "C": Member(["t2"], rack="a"),
        },
        expected={"A": {"t1": [0, 2]}, "B": {"t1": [1, 3]}, "C": {"t2": [0]}},
    ),
}


@pytest.mark.parametrize("case", HOMOGENEOUS.values(), ids=HOMOGENEOUS.keys())
def test_homogeneous(case: Case) -> None:
    assert run(case) == case.expected


@pytest.mark.parametrize("case", HETEROGENEOUS.values(), ids=HETEROGENEOUS.keys())
def test_heterogeneous(case: Case) -> None:
    assert run(case) == case.expected


@pytest.mark.parametrize("case", RACKS.values(), ids=RACKS.keys())
def test_racks(case: Case) -> None:
    assert run(case) == case.expected


def test_heterogeneous_builder_on_equal_subscriptions_gives_kafkas_answer() -> None:
    """Kafka's test of its heterogeneous builder where the topics' partitions run out before
    the subscribers are balanced (the uniform assignor sends such a group to the homogeneous
    builder, so the builder is called directly)."""
    members = {
        "A": Member(["t1", "t2", "t3"], {"t1": [0, 1], "t2": [0, 1], "t3": [0, 1]}),
        "B": Member(["t1", "t2", "t3"]),
    }
    view = build_view(member_specs(members), topic_specs({"t1": 2, "t2": 2, "t3": 2}))
    assert readable(HeterogeneousBuilder(view).build()) == {
        "A": {"t2": [0], "t3": [0, 1]},
        "B": {"t1": [0, 1], "t2": [1]},
    }


def test_unchanged_partitions_are_the_callers_frozensets() -> None:
    """A member's partitions that do not change are handed back as given, not copied: the
    coordinator compares targets at every epoch."""
    members = member_specs(
        {"A": Member(["t1"], {"t1": [0, 1]}), "B": Member(["t1"], {"t1": [2, 3]})}
    )
    topics = topic_specs({"t1": 4})
    result = UNIFORM.assign(members, topics)
    for member_id, spec in members.items():
        for topic_id, partitions in result[member_id].items():
            assert partitions is spec.current[topic_id]
