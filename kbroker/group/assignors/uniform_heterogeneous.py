"""The uniform assignor for a group whose members subscribe to different topics.

The rules are those of Kafka's UniformHeterogeneousAssignmentBuilder (4.x):
1. every member keeps its current partitions of the topics it still subscribes to;
2. the partitions nobody keeps go, topic by topic, to the topic's least loaded subscribers
   (round-robin over the members at the lowest load level, see LoadBalancer);
3. then, topic by topic, partitions move from the topic's most loaded subscribers to its least
   loaded ones until their loads differ by at most one; the passes over the topics repeat until
   one changes nothing, at most MAX_PASSES times. Members whose subscriptions overlap without
   being equal may stay a little apart (Kafka's builder accepts the same).

Topics are visited with the most partitions per subscriber first (then fewer subscribers, then
topic id), a member gives up its highest partition of the topic first, and every tie goes to the
lower member index, so that without racks the result is Kafka's for members in member id order.

Racks are not used here, as in Kafka's built-in assignors since 3.8 (KAFKA-16694): with
different subscriptions, steering partitions to racks changes the loads the later steps see,
and so which partitions members keep; stickiness matters more (the homogeneous builder, where
racks can only choose among the moves balance makes anyway, uses them).
"""

from __future__ import annotations

from fractions import Fraction

from kbroker.group.assignors.group_view import GroupView
from kbroker.group.assignors.load_balancer import LoadBalancer
from kbroker.group.assignors.ordering import kafka_uuid_key
from kbroker.group.assignors.spec import Assignment, TopicId

# Kafka's bound: each pass roughly halves what imbalance is left, and a pass costs a walk over
# every topic, so the last passes are not worth their time.
MAX_PASSES = 16


class HeterogeneousBuilder:
    def __init__(self, view: GroupView) -> None:
        self._view = view
        count = len(view.member_ids)
        # Members grouped by subscription first: topic ids are looked up once per distinct
        # subscription, not once per member (uuid.UUID hashes in Python code).
        by_subscription: dict[frozenset[TopicId], list[int]] = {}
        for member, topic_ids in enumerate(view.subscriptions):
            by_subscription.setdefault(topic_ids, []).append(member)
        self._subscribers: dict[TopicId, list[int]] = {topic_id: [] for topic_id in view.topics}
        for topic_ids, members in by_subscription.items():
            for topic_id in topic_ids:
                self._subscribers[topic_id].extend(members)
        for subscribers in self._subscribers.values():
            subscribers.sort()
        self._sizes = [0] * count
        self._owners: dict[TopicId, list[int]] = {
            topic_id: [-1] * topic.num_partitions for topic_id, topic in view.topics.items()
        }
        # Per member: topic -> partitions; a frozenset until the builder first changes it.
        self._assignment: list[dict[TopicId, frozenset[int] | set[int]]] = []
        for member, kept in enumerate(view.current):
            self._assignment.append(dict(kept))
            for topic_id, partitions in kept.items():
                owners = self._owners[topic_id]
                for partition in partitions:
                    owners[partition] = member
                self._sizes[member] += len(partitions)
        self._balancer = LoadBalancer(self._sizes)

    def build(self) -> Assignment:
        self._assign_unowned()
        self._balance()
        return {
            member_id: {
                topic_id: partitions if isinstance(partitions, frozenset) else frozenset(partitions)
                for topic_id, partitions in self._assignment[member].items()
            }
            for member, member_id in enumerate(self._view.member_ids)
        }

    def _topic_order(self, topic_ids: list[TopicId]) -> list[TopicId]:
        topics, subscribers = self._view.topics, self._subscribers
        return sorted(
            topic_ids,
            key=lambda t: (
                -Fraction(topics[t].num_partitions, len(subscribers[t])),
                len(subscribers[t]),
                kafka_uuid_key(t),
            ),
        )

    def _assign_unowned(self) -> None:
        unowned: dict[TopicId, list[int]] = {}
        for topic_id, owners in self._owners.items():
            partitions = [p for p, owner in enumerate(owners) if owner == -1]
            if partitions:
                unowned[topic_id] = partitions
        for topic_id in self._topic_order(list(unowned)):
            partitions = unowned[topic_id]
            subscribers = self._subscribers[topic_id]
            self._balancer.reset(subscribers)
            # Drawn before any is given: the balancer only reads the sizes of members it has
            # not reached yet, which these gifts do not change.
            receivers = [self._balancer.next_least_loaded() for _ in partitions]
            by_member: dict[int, list[int]] = {}
            for partition, member in zip(partitions, receivers, strict=True):
                by_member.setdefault(member, []).append(partition)
            for member, received in by_member.items():
                self._give_all(topic_id, received, member)

    def _balance(self) -> None:
        topic_ids = self._topic_order([t for t, s in self._subscribers.items() if len(s) >= 2])
        last_changed = -1
        for _ in range(MAX_PASSES):
            for index, topic_id in enumerate(topic_ids):
                if index == last_changed:
                    # A whole round over the topics without a move: nothing more to gain.
                    return
                if self._balance_topic(topic_id) > 0 or last_changed == -1:
                    last_changed = index

    def _balance_topic(self, topic_id: TopicId) -> int:
        balancer = self._balancer
        if balancer.reset(self._subscribers[topic_id]) <= 1:
            return 0
        # The topic's partitions grouped by owner; a member gives from the end of its group.
        owners = self._owners[topic_id]
        # Stable: a member's partitions stay in ascending order.
        ordered = sorted(range(len(owners)), key=owners.__getitem__)
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for position, partition in enumerate(ordered):
            start.setdefault(owners[partition], position)
            end[owners[partition]] = position + 1

        moved = 0
        while not balancer.balanced():
            giver = balancer.next_most_loaded()
            while giver is not None and end.get(giver, 0) - start.get(giver, 0) <= 0:
                balancer.exclude_most_loaded()
                giver = balancer.next_most_loaded()
            if giver is None:
                break
            receiver = balancer.next_least_loaded()
            if balancer.balanced():
                break
            last = end[giver] - 1
            end[giver] = last
            partition = ordered[last]
            self._take(topic_id, partition, giver)
            self._give(topic_id, partition, receiver)
            moved += 1
        return moved

    def _give_all(self, topic_id: TopicId, partitions: list[int], member: int) -> None:
        """_give for many partitions of one topic, with one lookup of the topic id."""
        current = self._assignment[member].get(topic_id)
        self._assignment[member][topic_id] = (
            set(partitions) if current is None else current.union(partitions)
        )
        owners = self._owners[topic_id]
        for partition in partitions:
            owners[partition] = member
        self._sizes[member] += len(partitions)

    def _give(self, topic_id: TopicId, partition: int, member: int) -> None:
        partitions = self._assignment[member].get(topic_id)
        if partitions is None:
            self._assignment[member][topic_id] = {partition}
        else:
            if isinstance(partitions, frozenset):
                partitions = set(partitions)
                self._assignment[member][topic_id] = partitions
            partitions.add(partition)
        self._owners[topic_id][partition] = member
        self._sizes[member] += 1

    def _take(self, topic_id: TopicId, partition: int, member: int) -> None:
        partitions = self._assignment[member][topic_id]
        if isinstance(partitions, frozenset):
            partitions = set(partitions)
            self._assignment[member][topic_id] = partitions
        partitions.discard(partition)
        if not partitions:
            del self._assignment[member][topic_id]
        self._owners[topic_id][partition] = -1
        self._sizes[member] -= 1
