"""The `range` server-side assignor (KIP-848): per topic, the partitions split into contiguous
ranges over the topic's subscribers, in one member order for every topic, so that topics with
the same partition count are co-partitioned (the same partition numbers of each go to the same
member), which joins of keyed streams rely on.

As Kafka's RangeAssignor since 3.9 (KAFKA-16944): static members come first, ordered by
instance id, then the others by member id; a topic's first P % S subscribers in that order get
one partition more. The assignment is computed afresh each time and depends only on that order,
the subscriptions and the partition counts, so it stays the same while they do, and a static
member that rejoins under a new member id gets its ranges back. Racks are not looked at (nor
does Kafka's): co-partitioning decides who gets what.
"""

from __future__ import annotations

from collections.abc import Mapping

from kbroker.group.assignors.ordering import java_string_key
from kbroker.group.assignors.spec import Assignment, MemberSpec, TopicId, TopicSpec


class RangeAssignor:
    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]
    ) -> Assignment:
        ordered = sorted(members.values(), key=_member_order)
        # Members with equal subscriptions are grouped, so that a topic's subscribers are found
        # without looking the topic up once per member (groups are mostly homogeneous).
        by_subscription: dict[frozenset[TopicId], list[int]] = {}
        for index, member in enumerate(ordered):
            by_subscription.setdefault(member.subscribed_topic_ids, []).append(index)
        subscribers: dict[TopicId, list[int]] = {}
        for subscription, indices in by_subscription.items():
            for topic_id in subscription:
                if topic_id in topics:
                    subscribers.setdefault(topic_id, []).extend(indices)

        assignments: list[dict[TopicId, frozenset[int]]] = [{} for _ in ordered]
        for topic_id, indices in subscribers.items():
            if len(by_subscription) > 1:
                indices.sort()
            min_quota, extra = divmod(topics[topic_id].num_partitions, len(indices))
            start = 0
            for position, index in enumerate(indices):
                end = start + min_quota + (1 if position < extra else 0)
                if start < end:
                    assignments[index][topic_id] = frozenset(range(start, end))
                start = end
        return {
            member.member_id: assignment
            for member, assignment in zip(ordered, assignments, strict=True)
        }


def _member_order(member: MemberSpec) -> tuple[bool, str, str]:
    instance = member.instance_id
    return (
        instance is None,
        java_string_key(instance) if instance is not None else "",
        java_string_key(member.member_id),
    )
