"""Server-side partition assignors of the consumer group protocol (KIP-848): pure functions from
a group's members and subscribed topics to its target assignment."""

from __future__ import annotations

from kbroker.group.assignors.range_assignor import RangeAssignor
from kbroker.group.assignors.spec import (
    Assignment,
    MemberSpec,
    ServerAssignor,
    TopicId,
    TopicSpec,
)
from kbroker.group.assignors.uniform_assignor import UniformAssignor

# By name, as group.consumer.assignors and the client's group.remote.assignor name them; Kafka's
# default is the first of group.consumer.assignors, "uniform".
ASSIGNORS: dict[str, ServerAssignor] = {
    assignor.name: assignor for assignor in (UniformAssignor(), RangeAssignor())
}

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "MemberSpec",
    "RangeAssignor",
    "ServerAssignor",
    "TopicId",
    "TopicSpec",
    "UniformAssignor",
]
