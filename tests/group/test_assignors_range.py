"""The range assignor, scenario by scenario; the cases are those of Kafka's RangeAssignorTest
(whose answers do not depend on hash-map order) plus the member order rules."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kbroker.group.assignors import ASSIGNORS
from tests.group.assignor_cases import Member, Readable, member_specs, readable, topic_specs

RANGE = ASSIGNORS["range"]


@dataclass(frozen=True)
class Case:
    topics: dict[str, int]
    members: dict[str, Member]
    expected: Readable


def run(topics: dict[str, int], members: dict[str, Member]) -> Readable:
    return readable(RANGE.assign(member_specs(members), topic_specs(topics)))


CASES = {
    "no subscription": Case({"t1": 3}, {"A": Member([])}, {"A": {}}),
    "subscribed topic does not exist": Case({"t1": 3}, {"A": Member(["t2"])}, {"A": {}}),
    "same subscriptions: co-partitioned ranges": Case(
        {"t1": 3, "t3": 2},
        {"A": Member(["t1", "t3"]), "B": Member(["t1", "t3"])},
        {"A": {"t1": [0, 1], "t3": [0]}, "B": {"t1": [2], "t3": [1]}},
    ),
    "different subscriptions: ranges per topic over its subscribers": Case(
        {"t1": 3, "t2": 3, "t3": 2},
        {"A": Member(["t1", "t2"]), "B": Member(["t3"]), "C": Member(["t2", "t3"])},
        {
            "A": {"t1": [0, 1, 2], "t2": [0, 1]},
            "B": {"t3": [0]},
            "C": {"t2": [2], "t3": [1]},
        },
    ),
    "more members than partitions": Case(
        {"t1": 3, "t3": 2},
        {"A": Member(["t1", "t3"]), "B": Member(["t1", "t3"]), "C": Member(["t1", "t3"])},
        {"A": {"t1": [0], "t3": [0]}, "B": {"t1": [1], "t3": [1]}, "C": {"t1": [2]}},
    ),
    "member added to a group with fewer partitions than members": Case(
        {"t1": 2, "t2": 2},
        {
            "A": Member(["t1", "t2"], {"t1": [0], "t2": [0]}),
            "B": Member(["t1", "t2"], {"t1": [1], "t2": [1]}),
            "C": Member(["t1", "t2"]),
        },
        {"A": {"t1": [0], "t2": [0]}, "B": {"t1": [1], "t2": [1]}, "C": {}},
    ),
    "partition added to each topic": Case(
        {"t1": 4, "t2": 4},
        {
            "A": Member(["t1", "t2"], {"t1": [0, 1], "t2": [0, 1]}),
            "B": Member(["t1", "t2"], {"t1": [2], "t2": [2]}),
        },
        {"A": {"t1": [0, 1], "t2": [0, 1]}, "B": {"t1": [2, 3], "t2": [2, 3]}},
    ),
    "member added": Case(
        {"t1": 3, "t2": 3},
        {
            "A": Member(["t1", "t2"], {"t1": [0, 1], "t2": [0, 1]}),
            "B": Member(["t1", "t2"], {"t1": [2], "t2": [2]}),
            "C": Member(["t1", "t2"]),
        },
        {"A": {"t1": [0], "t2": [0]}, "B": {"t1": [1], "t2": [1]}, "C": {"t1": [2], "t2": [2]}},
    ),
    "member and partition added, different subscriptions": Case(
        {"t1": 4, "t2": 3},
        {
            "A": Member(["t1", "t2"], {"t1": [0, 1], "t2": [0, 1]}),
            "B": Member(["t1", "t2"], {"t1": [2], "t2": [2]}),
            "C": Member(["t1"]),
        },
        {"A": {"t1": [0, 1], "t2": [0, 1]}, "B": {"t1": [2], "t2": [2]}, "C": {"t1": [3]}},
    ),
    "member removed": Case(
        {"t1": 3, "t2": 3},
        {"B": Member(["t1", "t2"], {"t1": [2], "t2": [2]})},
        {"B": {"t1": [0, 1, 2], "t2": [0, 1, 2]}},
    ),
    "subscriptions changed": Case(
        {"t1": 3, "t2": 3, "t3": 2},
        {
            "A": Member(["t1"], {"t1": [0, 1, 2], "t2": [0]}),
            "B": Member(["t1", "t2", "t3"], {"t2": [1]}),
            "C": Member(["t2"], {"t2": [2], "t3": [0, 1]}),
        },
        {"A": {"t1": [0, 1]}, "B": {"t1": [2], "t2": [0, 1], "t3": [0, 1]}, "C": {"t2": [2]}},
    ),
    "static members first, by instance id, then the others by member id": Case(
        {"t1": 5},
        {
            "a": Member(["t1"]),
            "b": Member(["t1"], instance="z"),
            "c": Member(["t1"], instance="y"),
        },
        {"c": {"t1": [0, 1]}, "b": {"t1": [2, 3]}, "a": {"t1": [4]}},
    ),
    "member ids in Java's order (UTF-16 code units)": Case(
        {"t1": 2},
        {"\uffff": Member(["t1"]), "\U0001f600": Member(["t1"])},
        {"\U0001f600": {"t1": [0]}, "\uffff": {"t1": [1]}},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_range(case: Case) -> None:
    assert run(case.topics, case.members) == case.expected


@pytest.mark.parametrize("dynamic", [False, True], ids=["all static", "mixed"])
def test_static_member_rejoining_under_a_new_member_id_gets_its_ranges_back(dynamic: bool) -> None:
    topics = {"t1": 5, "t2": 5}
    members = {
        "A": Member(["t1", "t2"], instance="instance-a"),
        "C": Member(["t1", "t2"], instance="instance-c"),
    }
    if dynamic:
        members["B"] = Member(["t1", "t2"])
    before = run(topics, members)
    del members["A"]
    members["A1"] = Member(["t1", "t2"], instance="instance-a")
    after = run(topics, members)
    assert after["A1"] == before["A"]
    assert {m: after[m] for m in members if m != "A1"} == {
        m: before[m] for m in members if m != "A1"
    }
