"""The `uniform` server-side assignor (KIP-848), Kafka's default: balanced, sticky, and placing
the partitions it moves on their replicas' racks where members say their rack.

Kafka's built-in assignors stopped looking at racks in 3.8 (KAFKA-16694) and leave rack-aware
placement to custom assignors; ours places by rack only where the choice is free (which member
receives a partition that moves anyway, which excess partitions a member gives up), so with racks
it is as balanced and as sticky as without them.
"""

from __future__ import annotations

from collections.abc import Mapping

from kbroker.group.assignors.group_view import build_view
from kbroker.group.assignors.spec import Assignment, MemberSpec, TopicId, TopicSpec
from kbroker.group.assignors.uniform_heterogeneous import HeterogeneousBuilder
from kbroker.group.assignors.uniform_homogeneous import assign_homogeneous


class UniformAssignor:
    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, TopicSpec]
    ) -> Assignment:
        view = build_view(members, topics)
        if not view.topics:
            return {member_id: {} for member_id in view.member_ids}
        if view.homogeneous:
            return assign_homogeneous(view)
        return HeterogeneousBuilder(view).build()
