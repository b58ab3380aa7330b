"""Picks members by load for the heterogeneous uniform builder: the least loaded member to give
a partition to, the most loaded member to take one from.

The rules are those of Kafka's UniformHeterogeneousAssignmentBuilder (KAFKA-17710): members are
sorted by (assigned partitions, member index). The least loaded side is a prefix of that order
whose members all sit at one load level; it hands out partitions round-robin over the prefix, and
once every member of the prefix has received one, the level rises by one and the prefix takes in
the members that now match it. The most loaded side is the mirror image, from the end of the
order, and can drop members that have nothing left to give. Both sides count in levels, so the
caller knows the topic is balanced once the two levels are at most one apart.
"""

from __future__ import annotations

from collections.abc import Sequence


class LoadBalancer:
    def __init__(self, sizes: list[int]) -> None:
        # Shared with the builder, which updates a member's size on every (re)assignment.
        self._sizes = sizes
        self._order: list[int] = []
        self._least_end = 0  # the least loaded prefix is _order[:_least_end]
        self._least_level = 0
        self._least_next = 0
        self._most_start = 0  # the most loaded range is _order[_most_start:_most_end]
        self._most_end = 0
        self._most_level = 0
        self._most_next = -1  # going down

    def reset(self, members: Sequence[int]) -> int:
        """Starts over with these members (ascending member indices); returns the difference
        between the most and the least loaded member's sizes."""
        sizes = self._sizes
        # Stable: members of equal size stay in index order.
        order = sorted(members, key=sizes.__getitem__)
        self._order = order
        self._least_end = 0
        self._least_level = sizes[order[0]] - 1
        self._least_next = 0
        self._most_start = len(order)
        self._most_end = len(order)
        self._most_level = sizes[order[-1]] + 1
        self._most_next = len(order) - 1
        return sizes[order[-1]] - sizes[order[0]]

    def next_least_loaded(self) -> int:
        """The member to give the next partition to; the caller then gives it one."""
        order, sizes = self._order, self._sizes
        if self._least_next >= self._least_end:
            self._least_level += 1
            while (
                self._least_end < len(order) and sizes[order[self._least_end]] == self._least_level
            ):
                self._least_end += 1
            self._least_next = 0
        member = order[self._least_next]
        self._least_next += 1
        return member

    def next_most_loaded(self) -> int | None:
        """The member to take the next partition from, or None when no member is left."""
        order, sizes = self._order, self._sizes
        if self._most_next < self._most_start:
            if self._most_end <= self._most_start and self._most_start > 0:
                # Every member of the range was excluded: restart the level from the next
                # member down, so that the range grows again.
                self._most_level = sizes[order[self._most_start - 1]]
            else:
                self._most_level -= 1
            while self._most_start > 0 and sizes[order[self._most_start - 1]] == self._most_level:
                self._most_start -= 1
            self._most_next = self._most_end - 1
        if self._most_next < 0:
            return None
        member = order[self._most_next]
        self._most_next -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drops the member next_most_loaded just returned (it has nothing of the topic left)."""
        order = self._order
        position = self._most_next + 1
        last = self._most_end - 1
        order[position], order[last] = order[last], order[position]
        self._most_end -= 1

    def balanced(self) -> bool:
        return self._most_level - self._least_level <= 1
