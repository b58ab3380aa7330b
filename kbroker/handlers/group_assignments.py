"""Assignments as the consumer and share group APIs answer them (KIP-848, KIP-932).

ConsumerGroupHeartbeat and ShareGroupHeartbeat carry a member's partitions by topic id;
ConsumerGroupDescribe and ShareGroupDescribe add each topic's name. The two APIs of each kind
have their own generated classes of the same shape, so the builders take the classes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from kbroker.broker import Broker

Assignment = Mapping[uuid.UUID, frozenset[int]]
A = TypeVar("A")
P = TypeVar("P")


def _by_topic_id(assignment: Assignment) -> list[tuple[uuid.UUID, frozenset[int]]]:
    return sorted(assignment.items(), key=lambda item: item[0].bytes)


def heartbeat_assignment(
    assignment: Assignment | None,
    assignment_class: Callable[..., A],
    partitions_class: Callable[..., P],
) -> A | None:
    """A heartbeat answer's assignment: None when it did not change, topics without
    partitions left out."""
    if assignment is None:
        return None
    return assignment_class(
        topic_partitions=[
            partitions_class(topic_id=topic_id, partitions=sorted(indexes))
            for topic_id, indexes in _by_topic_id(assignment)
            if indexes
        ]
    )


def described_assignment(
    broker: Broker,
    assignment: Assignment,
    assignment_class: Callable[..., A],
    partitions_class: Callable[..., P],
) -> A:
    """A described member's assignment, with topic names ("" for a topic deleted since)."""
    partitions = []
    for topic_id, indexes in _by_topic_id(assignment):
        info = broker.metadata.topic_by_id(topic_id)
        partitions.append(
            partitions_class(
                topic_id=topic_id,
                topic_name=info.name if info is not None else "",
                partitions=sorted(indexes),
            )
        )
    return assignment_class(topic_partitions=partitions)
