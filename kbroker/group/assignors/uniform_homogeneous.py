"""The uniform assignor for a group whose members all subscribe to the same topics (the common
case, which Kafka's UniformHomogeneousAssignmentBuilder special-cases too).

With P partitions and M members, every member gets P // M partitions and P % M members get one
more. Balance first, then stickiness:
1. the members currently holding more than P // M get the "one more" slots first (in member
   order), so that no member gives up a partition balance lets it keep;
2. a member holding more than its quota gives up the excess: with racks, partitions off its rack
   first; then its last ones in (topic id, partition) order;
3. the partitions nobody keeps are handed out: without racks, in (topic id, partition) order, as
   consecutive runs to the members with room in member order, the remaining "one more" slots
   going to the first members that have none; with racks, by rack_placement.

Only the excess moves, so a member joining a balanced group takes its share from the members
with the most, and a member leaving leaves only its own partitions to hand out.
"""

from __future__ import annotations

from kbroker.group.assignors import rack_placement
from kbroker.group.assignors.group_view import NO_RACKS, GroupView
from kbroker.group.assignors.ordering import kafka_uuid_key
from kbroker.group.assignors.spec import Assignment, TopicId


def assign_homogeneous(view: GroupView) -> Assignment:
    count = len(view.member_ids)
    topic_ids = sorted(view.topics, key=kafka_uuid_key)
    total = sum(topic.num_partitions for topic in view.topics.values())
    min_quota, spares = divmod(total, count)

    held = [sum(map(len, kept.values())) for kept in view.current]
    quota = [min_quota] * count
    over = [m for m in range(count) if held[m] > min_quota]
    for member in over[:spares]:
        quota[member] += 1
    spares -= min(len(over), spares)

    kept = list(view.current)
    topic_rank = {topic_id: rank for rank, topic_id in enumerate(topic_ids)}
    owned = view.owned  # built for this call: updated as members give partitions up
    for member in over:
        if held[member] > quota[member]:
            kept[member], given_up = _trim(view, member, quota[member], topic_rank)
            held[member] = quota[member]
            for topic_id, partition in given_up:
                owned[topic_id].discard(partition)

    # The partitions nobody keeps, topic by topic; topic ids are looked up per topic, not per
    # partition (uuid.UUID hashes in Python code).
    unassigned: list[tuple[TopicId, list[int]]] = []
    for topic_id in topic_ids:
        num_partitions = view.topics[topic_id].num_partitions
        if len(owned[topic_id]) < num_partitions:
            free = set(range(num_partitions)).difference(owned[topic_id])
            unassigned.append((topic_id, sorted(free)))

    room = [quota[m] - held[m] for m in range(count)]
    may_take_spare = [quota[m] == min_quota for m in range(count)]
    if view.rack_aware:
        partition_racks: list[frozenset[str]] = []
        for topic_id, partitions in unassigned:
            racks_of = view.topics[topic_id].partition_racks
            partition_racks.extend(racks_of.get(p, NO_RACKS) for p in partitions)
        owners = rack_placement.place(
            partition_racks, view.member_racks, room, may_take_spare, spares
        )
    else:
        owners = _in_member_order(room, may_take_spare, spares)

    additions: list[dict[TopicId, list[int]]] = [{} for _ in range(count)]
    position = 0
    for topic_id, partitions in unassigned:
        end = position + len(partitions)
        by_member: dict[int, list[int]] = {}
        for partition, member in zip(partitions, owners[position:end], strict=True):
            by_member.setdefault(member, []).append(partition)
        position = end
        for member, received in by_member.items():
            additions[member][topic_id] = received
    result: Assignment = {}
    for member, member_id in enumerate(view.member_ids):
        assignment = dict(kept[member])
        for topic_id, partitions in additions[member].items():
            previous = assignment.get(topic_id)
            assignment[topic_id] = (
                frozenset(partitions) if previous is None else previous.union(partitions)
            )
        result[member_id] = assignment
    return result


def _in_member_order(room: list[int], may_take_spare: list[bool], spares: int) -> list[int]:
    """Owners of the unassigned partitions, in order: one run per member in member order, the
    first members that may take a spare taking one more."""
    owners: list[int] = []
    for member, count in enumerate(room):
        if spares > 0 and may_take_spare[member]:
            count += 1
            spares -= 1
        owners.extend([member] * count)
    return owners


def _trim(
    view: GroupView, member: int, quota: int, topic_rank: dict[TopicId, int]
) -> tuple[dict[TopicId, frozenset[int]], list[tuple[TopicId, int]]]:
    """The member's current partitions cut down to its quota, and the partitions it gives up."""
    current = view.current[member]
    held = [(topic_id, p) for topic_id, partitions in current.items() for p in partitions]
    rack = view.member_racks[member] if view.rack_aware else None
    if rack is None:
        held.sort(key=lambda tp: (topic_rank[tp[0]], tp[1]))
    else:
        held.sort(key=lambda tp: (rack not in view.partition_racks(*tp), topic_rank[tp[0]], tp[1]))
    keep: dict[TopicId, list[int]] = {}
    for topic_id, partition in held[:quota]:
        keep.setdefault(topic_id, []).append(partition)
    kept = {
        topic_id: current[topic_id]
        if len(partitions) == len(current[topic_id])
        else frozenset(partitions)
        for topic_id, partitions in keep.items()
    }
    return kept, held[quota:]
