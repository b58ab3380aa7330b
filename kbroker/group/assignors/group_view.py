"""The group as the uniform assignor's builders see it: members in a fixed order, what each is
subscribed to among the topics that exist, and what each may keep of its current assignment.

Members are numbered in member id order (Java's string order, as Kafka's own tests order them),
so that every tie is broken the same way whatever order the coordinator's maps have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kbroker.group.assignors.ordering import java_string_key
from kbroker.group.assignors.spec import MemberSpec, TopicId, TopicSpec

NO_RACKS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class GroupView:
    member_ids: list[str]
    member_racks: list[str | None]
    # Per member: the subscribed topics that exist.
    subscriptions: list[frozenset[TopicId]]
    # True when all members subscribe to the same topics.
    homogeneous: bool
    # Per member: its current partitions of those topics, each partition kept by one member only
    # (the first in member order should the coordinator ever hand over a partition twice).
    current: list[dict[TopicId, frozenset[int]]]
    # The topics at least one member subscribes to, and which of their partitions `current` holds.
    topics: dict[TopicId, TopicSpec]
    owned: dict[TopicId, set[int]]
    # True when some member has a rack and some subscribed partition has replica racks.
    rack_aware: bool

    def partition_racks(self, topic_id: TopicId, partition: int) -> frozenset[str]:
        return self.topics[topic_id].partition_racks.get(partition, NO_RACKS)


def build_view(members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]) -> GroupView:
    specs = sorted(members.values(), key=lambda m: java_string_key(m.member_id))
    existing = frozenset(topics)
    subscriptions = [
        m.subscribed_topic_ids
        if m.subscribed_topic_ids <= existing
        else m.subscribed_topic_ids & existing
        for m in specs
    ]
    homogeneous = all(s == subscriptions[0] for s in subscriptions)
    subscribed: dict[TopicId, TopicSpec] = {}
    for topic_ids in set(subscriptions):
        for topic_id in topic_ids:
            subscribed[topic_id] = topics[topic_id]
    owned: dict[TopicId, set[int]] = {topic_id: set() for topic_id in subscribed}
    current = [
        _kept(spec.current, topic_ids, homogeneous, subscribed, owned)
        for spec, topic_ids in zip(specs, subscriptions, strict=True)
    ]
    member_racks = [m.rack_id for m in specs]
    rack_aware = any(member_racks) and any(
        any(racks for racks in topic.partition_racks.values()) for topic in subscribed.values()
    )
    return GroupView(
        member_ids=[m.member_id for m in specs],
        member_racks=member_racks,
        subscriptions=subscriptions,
        homogeneous=homogeneous,
        current=current,
        topics=subscribed,
        owned=owned,
        rack_aware=rack_aware,
    )


def _kept(
    current: Mapping[TopicId, frozenset[int]],
    subscription: frozenset[TopicId],
    homogeneous: bool,
    topics: dict[TopicId, TopicSpec],
    owned: dict[TopicId, set[int]],
) -> dict[TopicId, frozenset[int]]:
    """What a member may keep of its current assignment; the members before it in member order
    have claimed theirs in `owned`, where this one's are added."""
    kept: dict[TopicId, frozenset[int]] = {}
    for topic_id, partitions in current.items():
        # In a homogeneous group every subscribed topic is in `owned`, and only those.
        owned_partitions = owned.get(topic_id)
        if owned_partitions is None or not partitions:
            continue
        if not homogeneous and topic_id not in subscription:
            continue
        valid = _valid_partitions(partitions, topics[topic_id].num_partitions)
        if not owned_partitions.isdisjoint(valid):
            valid = valid - owned_partitions
        if valid:
            owned_partitions |= valid
            kept[topic_id] = valid
    return kept


def _valid_partitions(partitions: frozenset[int], num_partitions: int) -> frozenset[int]:
    """The partitions that still exist; the same frozenset when all do (no copy)."""
    if not isinstance(partitions, frozenset):
        partitions = frozenset(partitions)
    if min(partitions) >= 0 and max(partitions) < num_partitions:
        return partitions
    return frozenset(p for p in partitions if 0 <= p < num_partitions)
