"""Where the partitions that must move go when racks are known: to a member on a rack of the
partition's replicas, within the room balance leaves each member.

Fetching from a replica in the consumer's own rack (KIP-392) saves cross-rack traffic, so the
uniform builders place the partitions they hand out (new, orphaned or given up) here once they
know how many each member receives. Racks never move a partition that balance lets a member keep,
and never change how many partitions a member gets.

Greedy, in two passes. First the partitions with replicas on some member's rack, those with the
fewest such racks first: each goes to the matching rack with the most room left (then by rack
name), to the first member there with room; when no matching member has base room, a matching
member may take one of the spare partitions (the "+1" of an uneven split) while any are left.
Then the rest, in order, fill the remaining room in member order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Rack:
    members: list[int]
    room: int
    next_with_room: int = 0
    next_spare_taker: int = 0
    spare_takers: list[int] = field(default_factory=list)


def place(
    partition_racks: Sequence[frozenset[str]],
    member_racks: Sequence[str | None],
    room: list[int],
    may_take_spare: list[bool],
    spares: int,
) -> list[int]:
    """The member index for each partition (same order as partition_racks).

    room[m] is how many partitions member m must still receive; may_take_spare[m] whether it may
    receive one more, spares how many members receive one more in all. The sum of room and
    spares equals the number of partitions. Changes room and may_take_spare.
    """
    racks: dict[str, _Rack] = {}
    for member, rack in enumerate(member_racks):
        if rack is None:
            continue
        entry = racks.get(rack)
        if entry is None:
            entry = racks[rack] = _Rack(members=[], room=0)
        entry.members.append(member)
        entry.room += room[member]
        if may_take_spare[member]:
            entry.spare_takers.append(member)

    owners = [-1] * len(partition_racks)
    matching = [(racks_of & racks.keys(), index) for index, racks_of in enumerate(partition_racks)]
    matching = [(candidates, index) for candidates, index in matching if candidates]
    matching.sort(key=lambda item: len(item[0]))
    for candidates, index in matching:
        rack_name = min(candidates, key=lambda name: (-racks[name].room, name))
        rack = racks[rack_name]
        if rack.room > 0:
            while room[rack.members[rack.next_with_room]] == 0:
                rack.next_with_room += 1
            member = rack.members[rack.next_with_room]
            room[member] -= 1
            rack.room -= 1
            owners[index] = member
        elif spares > 0:
            member = _spare_taker(candidates, racks, may_take_spare)
            if member is not None:
                may_take_spare[member] = False
                spares -= 1
                owners[index] = member

    leftovers = iter([index for index, owner in enumerate(owners) if owner == -1])
    for member, count in enumerate(room):
        for _ in range(count):
            owners[next(leftovers)] = member
    for member, may_take in enumerate(may_take_spare):
        if spares == 0:
            break
        if may_take:
            owners[next(leftovers)] = member
            spares -= 1
    return owners


def _spare_taker(
    candidates: frozenset[str], racks: dict[str, _Rack], may_take_spare: list[bool]
) -> int | None:
    best: int | None = None
    for name in candidates:
        rack = racks[name]
        while (
            rack.next_spare_taker < len(rack.spare_takers)
            and not may_take_spare[rack.spare_takers[rack.next_spare_taker]]
        ):
            rack.next_spare_taker += 1
        if rack.next_spare_taker < len(rack.spare_takers):
            member = rack.spare_takers[rack.next_spare_taker]
            if best is None or member < best:
                best = member
    return best
