"""A share group (KIP-932): its members, epochs and assignments, and the ``simple`` assignor.
Pure data and functions; the heartbeat logic that drives them is in share_heartbeat.py.

Unlike a consumer group, a share group's members may share partitions (the partition leader
hands each record to one member at a time, kbroker/share/), so there is no revocation: a member
takes its target assignment at once, its member epoch being the assignment epoch. Only
partitions whose share-partition state the share coordinator has initialized are assigned; the
group keeps which are (initialized) and which are being set up (initializing), as Kafka's
share-state partition metadata record does.

Group states: Empty (no member) or Stable.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

TopicId = uuid.UUID
Assignment = Mapping[TopicId, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroupData:
    """The share-group part of a group; copied before each change, so a change whose records
    cannot be written leaves it as it was."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    # Share partitions with state at the share coordinator, and those being set up.
    initialized: dict[TopicId, frozenset[int]] = field(default_factory=dict)
    initializing: dict[TopicId, frozenset[int]] = field(default_factory=dict)
    # Not stored: when each member's session ends.
    session_deadlines: dict[str, int] = field(default_factory=dict)

    def copy(self) -> ShareGroupData:
        return ShareGroupData(
            self.group_epoch,
            self.assignment_epoch,
            self.metadata_hash,
            dict(self.members),
            dict(self.targets),
            dict(self.initialized),
            dict(self.initializing),
            dict(self.session_deadlines),
        )

    def remove_member(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        self.targets.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)

    def subscribed_topic_names(self) -> frozenset[str]:
        names: set[str] = set()
        for member in self.members.values():
            names |= member.subscribed_topic_names
        return frozenset(names)

    def state_name(self) -> str:
        """Kafka's ShareGroupState name."""
        return "Stable" if self.members else "Empty"


def assign_shares(
    subscriptions: Mapping[str, frozenset[TopicId]],
    partitions: Mapping[TopicId, frozenset[int]],
    current: Mapping[str, Assignment],
) -> dict[str, dict[TopicId, frozenset[int]]]:
    """The ``simple`` assignor: members with the same subscription split its partitions
    evenly; when they outnumber the partitions, each member gets one partition and each
    partition is shared by as even a number of members as can be. A member keeps what it has
    where balance allows. Deterministic: members and partitions in sorted order."""
    out: dict[str, dict[TopicId, frozenset[int]]] = {m: {} for m in subscriptions}
    by_subscription: dict[frozenset[TopicId], list[str]] = {}
    for member_id in sorted(subscriptions):
        by_subscription.setdefault(subscriptions[member_id], []).append(member_id)
    for topics, members in by_subscription.items():
        pool = sorted((t, p) for t in topics for p in partitions.get(t, frozenset()))
        if not pool:
            continue
        held = {m: {(t, p) for t, ps in current.get(m, {}).items() for p in ps} for m in members}
        if len(members) <= len(pool):
            chosen = _split(members, pool, held)
        else:
            chosen = _share(members, pool, held)
        for member_id, pairs in chosen.items():
            assignment = out[member_id]
            for t, p in pairs:
                assignment[t] = assignment.get(t, frozenset()) | {p}
    return out


def _split(
    members: list[str], pool: list[tuple[TopicId, int]], held: dict[str, set[tuple[TopicId, int]]]
) -> dict[str, list[tuple[TopicId, int]]]:
    """Each partition to one member, ``len(pool) // len(members)`` each and one more for the
    first ``len(pool) % len(members)``, keeping held partitions first."""
    base, extra = divmod(len(pool), len(members))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}
    chosen: dict[str, list[tuple[TopicId, int]]] = {m: [] for m in members}
    free = set(pool)
    for m in members:
        for pair in sorted(held[m] & free):
            if len(chosen[m]) < quota[m]:
                chosen[m].append(pair)
                free.discard(pair)
    rest = sorted(free)
    for m in members:
        while len(chosen[m]) < quota[m]:
            chosen[m].append(rest.pop(0))
    return chosen


def _share(
    members: list[str], pool: list[tuple[TopicId, int]], held: dict[str, set[tuple[TopicId, int]]]
) -> dict[str, list[tuple[TopicId, int]]]:
    """One partition per member, each partition shared by ``len(members) // len(pool)``
    members or one more, keeping a member's partition where it has room."""
    base, extra = divmod(len(members), len(pool))
    room = {pair: base + (1 if i < extra else 0) for i, pair in enumerate(pool)}
    chosen: dict[str, list[tuple[TopicId, int]]] = {}
    waiting = []
    for m in members:
        kept = next((pair for pair in sorted(held[m]) if room.get(pair, 0) > 0), None)
        if kept is None:
            waiting.append(m)
        else:
            chosen[m] = [kept]
            room[kept] -= 1
    for m in waiting:
        # The first partition (in order) with the most room left.
        pair = max(pool, key=lambda p: room[p])
        chosen[m] = [pair]
        room[pair] -= 1
    return chosen
