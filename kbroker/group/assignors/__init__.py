"""INTERIM: replaced by the assignors branch (same interface)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

TopicId = uuid.UUID


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[TopicId]
    current: Mapping[TopicId, frozenset[int]]


@dataclass(frozen=True, slots=True)
class TopicSpec:
    topic_id: TopicId
    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]]


Assignment = dict[str, dict[TopicId, frozenset[int]]]


class ServerAssignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]
    ) -> Assignment: ...


class _RoundRobin:
    def __init__(self, name: str) -> None:
        self.name = name

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]
    ) -> Assignment:
        out: Assignment = {m: {} for m in members}
        for topic_id in sorted(topics, key=lambda t: topics[t].name):
            subscribed = sorted(m for m, s in members.items() if topic_id in s.subscribed_topic_ids)
            for p in range(topics[topic_id].num_partitions):
                if subscribed:
                    owner = subscribed[p % len(subscribed)]
                    out[owner][topic_id] = out[owner].get(topic_id, frozenset()) | {p}
        return out


ASSIGNORS: dict[str, ServerAssignor] = {
    "uniform": _RoundRobin("uniform"),
    "range": _RoundRobin("range"),
}
