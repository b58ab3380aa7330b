"""What a server-side assignor (KIP-848) is given and what it returns.

The group coordinator describes the group as members (subscriptions by topic id, rack, and the
partitions each member's current target assignment gives it) and the subscribed topics (partition
counts and the racks of each partition's replicas); the assignor answers with the new target
assignment. Assignors are pure: no IO, no clock, no randomness, the same input gives the same
output.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

TopicId = uuid.UUID


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    # Static membership (KIP-345): the range assignor orders static members by instance id, so a
    # static member that rejoins under a new member id gets the same ranges back.
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[TopicId]
    # The member's current target assignment (what the previous target gave it): the uniform
    # assignor keeps as much of it as balance allows (stickiness).
    current: Mapping[TopicId, frozenset[int]]


@dataclass(frozen=True, slots=True)
class TopicSpec:
    topic_id: TopicId
    name: str
    num_partitions: int
    # partition -> racks of its replicas (empty when unknown / no racks)
    partition_racks: Mapping[int, frozenset[str]]


# member id -> topic id -> partitions
Assignment = dict[str, dict[TopicId, frozenset[int]]]


class ServerAssignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]
    ) -> Assignment: ...
