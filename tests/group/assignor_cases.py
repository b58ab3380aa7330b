"""Compact notation for assignor tests: topics by name, members as dicts, assignments as
{member: {topic name: [partitions]}}."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kbroker.group.assignors import Assignment, MemberSpec, TopicId, TopicSpec

# Topic ids in Kafka's Uuid order (signed 64-bit halves): t1 < t2 < t3 < t4 < t5.
TOPIC_IDS: dict[str, TopicId] = {f"t{n}": uuid.UUID(int=n << 64) for n in range(1, 6)}
# The top bit set: Kafka orders this id before every id above.
TOPIC_IDS["t0"] = uuid.UUID(int=0x8000_0000_0000_0000 << 64)
TOPIC_NAMES: dict[TopicId, str] = {topic_id: name for name, topic_id in TOPIC_IDS.items()}

Readable = dict[str, dict[str, list[int]]]


@dataclass(frozen=True)
class Member:
    topics: Sequence[str]
    current: Mapping[str, Sequence[int]] = field(default_factory=dict)
    rack: str | None = None
    instance: str | None = None


def topic_specs(
    partitions: Mapping[str, int], racks: Mapping[str, Mapping[int, set[str]]] | None = None
) -> dict[TopicId, TopicSpec]:
    racks = racks or {}
    return {
        TOPIC_IDS[name]: TopicSpec(
            TOPIC_IDS[name],
            name,
            count,
            {p: frozenset(r) for p, r in racks.get(name, {}).items()},
        )
        for name, count in partitions.items()
    }


def member_specs(members: Mapping[str, Member]) -> dict[str, MemberSpec]:
    return {
        member_id: MemberSpec(
            member_id=member_id,
            instance_id=member.instance,
            rack_id=member.rack,
            subscribed_topic_ids=frozenset(TOPIC_IDS[name] for name in member.topics),
            current={TOPIC_IDS[name]: frozenset(ps) for name, ps in member.current.items()},
        )
        for member_id, member in members.items()
    }


def readable(assignment: Assignment) -> Readable:
    return {
        member_id: {
            TOPIC_NAMES[topic_id]: sorted(partitions) for topic_id, partitions in topics.items()
        }
        for member_id, topics in assignment.items()
    }
