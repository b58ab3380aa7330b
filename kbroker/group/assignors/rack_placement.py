"""Where the partitions that must move go when racks are known: to a member on a rack of the
partition's replicas, within the room balance leaves each member.

Fetching from a replica in the consumer's own rack (KIP-392) saves cross-rack traffic, so the
uniform builders place the partitions they hand out (new, orphaned or given up) here once they
know how many each member receives. Racks never move a partition that balance lets a member keep,
and never change how many partitions a member gets.

Greedy, in two passes. First the partitions with replicas on some member's rack, grouped by the
set of such racks, the groups with the fewest racks first (the most constrained): a group's
partitions are shared among its racks so as to even out the room left on them (water-filling;
ties to the rack named first), in order, and a rack's share fills its members' room as runs in
member order; what finds no room may take one of the spare slots (the "+1" of an uneven split)
on one of its racks while any are left. Then the rest, in order, fill the remaining room in
member order, then the remaining spare slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Rack:
    name: str
    members: list[int] = field(default_factory=list)
    room: int = 0
    next_with_room: int = 0
    spare_takers: list[int] = field(default_factory=list)
    next_spare_taker: int = 0


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
    for member, name in enumerate(member_racks):
        if name is None:
            continue
        rack = racks.get(name)
        if rack is None:
            rack = racks[name] = _Rack(name)
        rack.members.append(member)
        rack.room += room[member]
        if may_take_spare[member]:
            rack.spare_takers.append(member)

    # Partitions grouped by the member racks among their replicas' racks.
    groups: dict[frozenset[str], list[int]] = {}
    matching: dict[frozenset[str], frozenset[str]] = {}
    for index, replica_racks in enumerate(partition_racks):
        candidates = matching.get(replica_racks)
        if candidates is None:
            candidates = matching[replica_racks] = replica_racks.intersection(racks)
        groups.setdefault(candidates, []).append(index)

    owners = [-1] * len(partition_racks)
    for candidates in sorted(groups, key=lambda names: (len(names), sorted(names))):
        if not candidates:
            continue
        indices = groups[candidates]
        shares = _water_fill([racks[name] for name in sorted(candidates)], len(indices))
        position = 0
        for rack, share in shares:
            for index in indices[position : position + share]:
                owners[index] = _take_room(rack, room)
            position += share
        for index in indices[position:]:
            if spares == 0:
                break
            member = _spare_taker([racks[name] for name in candidates], may_take_spare)
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


def _water_fill(racks: list[_Rack], count: int) -> list[tuple[_Rack, int]]:
    """How many of `count` partitions each rack takes: always to the rack with the most room
    left (ties to the first), never beyond its room."""
    shares = [0] * len(racks)
    left = [rack.room for rack in racks]
    while count > 0:
        top = max(left)
        if top == 0:
            break
        at_top = [i for i, value in enumerate(left) if value == top]
        below = max((value for value in left if value < top), default=0)
        # Bring the racks at the top down to the next level, or as far as `count` reaches.
        step = min(top - below, count // len(at_top))
        if step == 0:
            for i in at_top[:count]:
                shares[i] += 1
                left[i] -= 1
            count -= min(count, len(at_top))
            continue
        for i in at_top:
            shares[i] += step
            left[i] -= step
        count -= step * len(at_top)
    return list(zip(racks, shares, strict=True))


def _take_room(rack: _Rack, room: list[int]) -> int:
    while room[rack.members[rack.next_with_room]] == 0:
        rack.next_with_room += 1
    member = rack.members[rack.next_with_room]
    room[member] -= 1
    rack.room -= 1
    return member


def _spare_taker(racks: list[_Rack], may_take_spare: list[bool]) -> int | None:
    """The first member, in member order, on one of these racks that may still take a spare."""
    best: int | None = None
    for rack in racks:
        takers = rack.spare_takers
        while (
            rack.next_spare_taker < len(takers)
            and not may_take_spare[takers[rack.next_spare_taker]]
        ):
            rack.next_spare_taker += 1
        if rack.next_spare_taker < len(takers):
            member = takers[rack.next_spare_taker]
            if best is None or member < best:
                best = member
    return best
