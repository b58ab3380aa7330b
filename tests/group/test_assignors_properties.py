"""Properties of the server-side assignors over generated groups (hypothesis): validity,
determinism, balance, stickiness, co-partitioning, and what racks may and may not change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.group.assignors import ASSIGNORS, Assignment, MemberSpec, TopicId, TopicSpec
from tests.group.assignor_cases import TOPIC_IDS

UNIFORM = ASSIGNORS["uniform"]
RANGE = ASSIGNORS["range"]
RACK_NAMES = ["a", "b", "c"]
PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

Group = tuple[dict[str, MemberSpec], dict[TopicId, TopicSpec]]


@st.composite
def groups(
    draw: st.DrawFn,
    homogeneous: bool | None = None,
    with_current: bool = True,
    with_racks: bool | None = None,
) -> Group:
    """Up to 4 topics of up to 12 partitions, 1 to 7 members; current assignments drawn freely
    (overlapping, unsubscribed, deleted topics, partitions out of range) unless told not to."""
    names = draw(
        st.lists(
            st.sampled_from(["t0", "t1", "t2", "t3", "t4"]), min_size=1, max_size=4, unique=True
        )
    )
    racks = draw(st.booleans()) if with_racks is None else with_racks
    topics: dict[TopicId, TopicSpec] = {}
    for name in names:
        count = draw(st.integers(0, 12))
        partition_racks = {}
        if racks:
            for p in range(count):
                partition_racks[p] = frozenset(
                    draw(st.lists(st.sampled_from(RACK_NAMES), max_size=2, unique=True))
                )
        topics[TOPIC_IDS[name]] = TopicSpec(TOPIC_IDS[name], name, count, partition_racks)
    # Subscriptions may name a topic that does not exist (t5).
    choices = [TOPIC_IDS[n] for n in names] + [TOPIC_IDS["t5"]]
    member_ids = draw(
        st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=1, max_size=7, unique=True)
    )
    same = draw(st.booleans()) if homogeneous is None else homogeneous
    shared = frozenset(draw(st.lists(st.sampled_from(choices), min_size=1, unique=True)))
    members: dict[str, MemberSpec] = {}
    for member_id in member_ids:
        subscription = (
            shared if same else frozenset(draw(st.lists(st.sampled_from(choices), unique=True)))
        )
        current: dict[TopicId, frozenset[int]] = {}
        if with_current:
            for topic_id in draw(st.lists(st.sampled_from(choices), unique=True)):
                current[topic_id] = frozenset(draw(st.lists(st.integers(0, 14), max_size=6)))
        rack = draw(st.sampled_from([None, *RACK_NAMES])) if racks else None
        instance = draw(st.sampled_from([None, "i1", "i2", "i3"])) if draw(st.booleans()) else None
        members[member_id] = MemberSpec(member_id, instance, rack, subscription, current)
    # Instance ids are unique in a group.
    seen: set[str] = set()
    for member_id, spec in list(members.items()):
        if spec.instance_id is not None:
            if spec.instance_id in seen:
                members[member_id] = _replace(spec, instance_id=None)
            seen.add(spec.instance_id)
    return members, topics


def _replace(spec: MemberSpec, **changes: object) -> MemberSpec:
    fields = {
        "member_id": spec.member_id,
        "instance_id": spec.instance_id,
        "rack_id": spec.rack_id,
        "subscribed_topic_ids": spec.subscribed_topic_ids,
        "current": spec.current,
    }
    fields.update(changes)
    return MemberSpec(**fields)  # type: ignore[arg-type]


def with_current(
    members: Mapping[str, MemberSpec], assignment: Assignment
) -> dict[str, MemberSpec]:
    return {
        member_id: _replace(spec, current=assignment.get(member_id, {}))
        for member_id, spec in members.items()
    }


def sizes(assignment: Assignment) -> dict[str, int]:
    return {m: sum(map(len, topics.values())) for m, topics in assignment.items()}


def flat(partitions: Mapping[TopicId, frozenset[int]]) -> set[tuple[TopicId, int]]:
    return {(t, p) for t, ps in partitions.items() for p in ps}


def check_valid(group: Group, assignment: Assignment) -> None:
    members, topics = group
    assert set(assignment) == set(members)
    owners: Counter[tuple[TopicId, int]] = Counter()
    for member_id, partitions in assignment.items():
        subscribed = members[member_id].subscribed_topic_ids
        for topic_id, ps in partitions.items():
            assert isinstance(ps, frozenset) and ps, (member_id, topic_id)
            assert topic_id in subscribed and topic_id in topics
            assert all(0 <= p < topics[topic_id].num_partitions for p in ps)
            owners.update((topic_id, p) for p in ps)
    assert all(count == 1 for count in owners.values())
    subscribed_topics = {t for m in members.values() for t in m.subscribed_topic_ids if t in topics}
    expected = {(t, p) for t in subscribed_topics for p in range(topics[t].num_partitions)}
    assert set(owners) == expected


def is_homogeneous(group: Group) -> bool:
    members, topics = group
    subscriptions = {frozenset(m.subscribed_topic_ids & topics.keys()) for m in members.values()}
    return len(subscriptions) == 1


def kept_current(group: Group) -> dict[str, set[tuple[TopicId, int]]]:
    """What each member may keep of its current assignment: subscribed, existing partitions,
    the first member in member id order keeping a partition listed twice."""
    members, topics = group
    claimed: set[tuple[TopicId, int]] = set()
    kept: dict[str, set[tuple[TopicId, int]]] = {}
    for member_id in sorted(members):
        spec = members[member_id]
        valid = {
            (t, p)
            for t, ps in spec.current.items()
            if t in spec.subscribed_topic_ids and t in topics
            for p in ps
            if 0 <= p < topics[t].num_partitions
        }
        kept[member_id] = valid - claimed
        claimed |= valid
    return kept


@PROPERTY_SETTINGS
@given(groups(), st.sampled_from(["uniform", "range"]))
def test_every_subscribed_partition_is_assigned_once_to_a_subscriber(
    group: Group, name: str
) -> None:
    check_valid(group, ASSIGNORS[name].assign(*group))


@PROPERTY_SETTINGS
@given(groups(), st.sampled_from(["uniform", "range"]))
def test_the_same_group_in_another_order_gets_the_same_assignment(group: Group, name: str) -> None:
    members, topics = group
    reordered_members = {
        m: _replace(
            spec,
            current={
                t: frozenset(sorted(ps, reverse=True)) for t, ps in reversed(spec.current.items())
            },
        )
        for m, spec in reversed(members.items())
    }
    reordered_topics = dict(reversed(topics.items()))
    assignor = ASSIGNORS[name]
    assert assignor.assign(members, topics) == assignor.assign(reordered_members, reordered_topics)


@PROPERTY_SETTINGS
@given(groups(homogeneous=True))
def test_uniform_homogeneous_is_balanced_and_keeps_all_that_balance_allows(group: Group) -> None:
    members, topics = group
    assignment = UNIFORM.assign(members, topics)
    counts = sizes(assignment)
    assert max(counts.values()) - min(counts.values()) <= 1
    # The most any balanced assignment keeps: the "one more" slots to the members holding most.
    kept = kept_current(group)
    total = sum(counts.values())
    min_quota, spares = divmod(total, len(members))
    held = sorted((len(k) for k in kept.values()), reverse=True)
    best = sum(min(h, min_quota + (1 if i < spares else 0)) for i, h in enumerate(held))
    assert sum(len(flat(assignment[m]) & kept[m]) for m in members) == best


@PROPERTY_SETTINGS
@given(groups(homogeneous=True, with_current=False), st.text("abcxyz", min_size=4, max_size=4))
def test_uniform_member_joining_takes_only_what_it_gets(group: Group, new_id: str) -> None:
    members, topics = group
    settled = with_current(members, UNIFORM.assign(members, topics))
    before = UNIFORM.assign(settled, topics)
    assert before == UNIFORM.assign(members, topics), "a settled group stays as it is"
    joined = dict(settled)
    joined[new_id] = _replace(
        next(iter(members.values())), member_id=new_id, instance_id=None, current={}
    )
    after = UNIFORM.assign(joined, topics)
    taken: set[tuple[TopicId, int]] = set()
    for member_id in settled:
        assert flat(after[member_id]) <= flat(before[member_id])
        taken |= flat(before[member_id]) - flat(after[member_id])
    assert flat(after[new_id]) == taken
    counts = sizes(after)
    assert max(counts.values()) - min(counts.values()) <= 1


@PROPERTY_SETTINGS
@given(groups(homogeneous=True, with_current=False), st.data())
def test_uniform_member_leaving_moves_only_its_partitions(
    group: Group, data: st.DataObject
) -> None:
    members, topics = group
    settled = with_current(members, UNIFORM.assign(members, topics))
    before = UNIFORM.assign(settled, topics)
    leaving = data.draw(st.sampled_from(sorted(settled)))
    remaining = {m: spec for m, spec in settled.items() if m != leaving}
    if not remaining:
        return
    after = UNIFORM.assign(remaining, topics)
    for member_id in remaining:
        assert flat(after[member_id]) >= flat(before[member_id])
    counts = sizes(after)
    assert max(counts.values()) - min(counts.values()) <= 1


@PROPERTY_SETTINGS
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_balances_each_topic_over_its_subscribers(group: Group) -> None:
    """As Kafka's heterogeneous builder: a member holding a partition of a topic has at most one
    partition more than the topic's least loaded subscriber."""
    members, topics = group
    assignment = UNIFORM.assign(members, topics)
    counts = sizes(assignment)
    for topic_id in topics:
        subscribers = [m for m, spec in members.items() if topic_id in spec.subscribed_topic_ids]
        if len(subscribers) < 2:
            continue
        least = min(counts[m] for m in subscribers)
        for member_id in subscribers:
            if topic_id in assignment[member_id]:
                assert counts[member_id] <= least + 1, (topic_id, member_id, counts)


def without_racks(group: Group) -> Group:
    members, topics = group
    return (
        {m: _replace(spec, rack_id=None) for m, spec in members.items()},
        {t: TopicSpec(t, s.name, s.num_partitions, {}) for t, s in topics.items()},
    )


@PROPERTY_SETTINGS
@given(groups(with_racks=True))
def test_racks_change_neither_balance_nor_stickiness(group: Group) -> None:
    with_racks = UNIFORM.assign(*group)
    plain = UNIFORM.assign(*without_racks(group))
    if not is_homogeneous(group):
        # Different subscriptions: racks are not used at all.
        assert with_racks == plain
        return
    counts = sizes(with_racks)
    assert max(counts.values()) - min(counts.values()) <= 1
    kept = kept_current(group)
    for member_id in group[0]:
        assert len(flat(with_racks[member_id]) & kept[member_id]) == len(
            flat(plain[member_id]) & kept[member_id]
        )


@st.composite
def rack_matched_groups(draw: st.DrawFn) -> Group:
    """A homogeneous group with no current assignment, each partition on one rack, and each
    rack holding exactly the partitions its members' share adds up to."""
    share = draw(st.integers(1, 4))
    per_rack = {rack: draw(st.integers(0, 3)) for rack in RACK_NAMES}
    if not any(per_rack.values()):
        per_rack["a"] = 1
    racks_in_order = [rack for rack, count in per_rack.items() for _ in range(count * share)]
    racks_of_partitions = draw(st.permutations(racks_in_order))
    topic_id = TOPIC_IDS["t1"]
    topic = TopicSpec(
        topic_id,
        "t1",
        len(racks_of_partitions),
        {p: frozenset({rack}) for p, rack in enumerate(racks_of_partitions)},
    )
    members: dict[str, MemberSpec] = {}
    for rack, count in per_rack.items():
        for n in range(count):
            member_id = f"{draw(st.sampled_from('xyz'))}{rack}{n}"
            members[member_id] = MemberSpec(member_id, None, rack, frozenset({topic_id}), {})
    return members, {topic_id: topic}


@PROPERTY_SETTINGS
@given(rack_matched_groups())
def test_every_partition_lands_on_its_rack_when_the_racks_allow_it(group: Group) -> None:
    members, topics = group
    (topic,) = topics.values()
    for member_id, partitions in UNIFORM.assign(members, topics).items():
        for p in partitions.get(topic.topic_id, ()):
            assert members[member_id].rack_id in topic.partition_racks[p]


@PROPERTY_SETTINGS
@given(groups(homogeneous=True))
def test_range_co_partitions_topics_of_equal_size(group: Group) -> None:
    members, topics = group
    assignment = RANGE.assign(members, topics)
    subscribed = [t for t in next(iter(members.values())).subscribed_topic_ids if t in topics]
    order = sorted(
        members.values(),
        key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id),
    )
    for topic_id in subscribed:
        ranges = [sorted(assignment[m.member_id].get(topic_id, ())) for m in order]
        # Contiguous ranges, in member order, larger ones first, differing by at most one.
        assert [p for r in ranges for p in r] == list(range(topics[topic_id].num_partitions))
        lengths = [len(r) for r in ranges]
        assert lengths == sorted(lengths, reverse=True) and lengths[0] - lengths[-1] <= 1
    for first in subscribed:
        for second in subscribed:
            if topics[first].num_partitions == topics[second].num_partitions:
                for m in members:
                    assert assignment[m].get(first) == assignment[m].get(second)


SCRIPT = """
import json, sys
from kbroker.group.assignors import ASSIGNORS, MemberSpec, TopicSpec
from tests.group.assignor_cases import TOPIC_IDS, readable
racks = {p: frozenset({"r1", "r2", "r3"} - {f"r{p % 3 + 1}"}) for p in range(9)}
topics = {TOPIC_IDS[n]: TopicSpec(TOPIC_IDS[n], n, 9, racks) for n in ("t1", "t2")}
members = {}
for i in range(5):
    subscription = frozenset(topics) if i % 2 else frozenset([TOPIC_IDS["t1"]])
    members[f"m{i}"] = MemberSpec(f"m{i}", None, f"r{i % 3 + 1}", subscription, {})
out = {name: readable(a.assign(members, topics)) for name, a in ASSIGNORS.items()}
homogeneous = {m: MemberSpec(m, None, s.rack_id, frozenset(topics), {}) for m, s in members.items()}
out["homogeneous"] = readable(ASSIGNORS["uniform"].assign(homogeneous, topics))
print(json.dumps(out, sort_keys=True))
"""


def test_the_same_answer_whatever_the_string_hash_seed() -> None:
    """Rack names are strings, whose hashes (and so set order) change from process to process."""
    outputs = set()
    for seed in ("0", "1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=os.getcwd())
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(result.stdout)
    assert len(outputs) == 1
    assert json.loads(outputs.pop())["homogeneous"]
