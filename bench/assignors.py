"""Time of the server-side assignors (KIP-848, kbroker/group/assignors) per target assignment.

The group coordinator computes a group's target assignment on its event loop at every group
epoch change, so this is time the broker answers nothing else. Measured for the events a group
goes through: the first assignment, the same group again (nothing changed), one member joining,
one member leaving; homogeneous subscriptions (the common case), three racks (replicas on two
of them, members spread over all three), and heterogeneous subscriptions (member i subscribes
to the first 1 + i % topics topics). Figures are the best and the median of `--repeat` runs, in
milliseconds of one core.

    .venv/bin/python bench/assignors.py [--sizes 50x1000,1000x10000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kbroker.group.assignors import (  # noqa: E402
    ASSIGNORS,
    Assignment,
    MemberSpec,
    ServerAssignor,
    TopicId,
    TopicSpec,
)

RACKS = ["rack-a", "rack-b", "rack-c"]
TOPIC_COUNT = 10

Members = dict[str, MemberSpec]
Topics = dict[TopicId, TopicSpec]


def make_topics(partitions: int, racks: bool) -> Topics:
    per_topic = partitions // TOPIC_COUNT
    topics: Topics = {}
    for n in range(TOPIC_COUNT):
        topic_id = uuid.UUID(int=(n + 1) * 0x9E3779B97F4A7C15)
        replica_racks = (
            {p: frozenset({RACKS[p % 3], RACKS[(p + 1) % 3]}) for p in range(per_topic)}
            if racks
            else {}
        )
        topics[topic_id] = TopicSpec(topic_id, f"topic-{n}", per_topic, replica_racks)
    return topics


def make_members(count: int, topics: Topics, racks: bool, heterogeneous: bool) -> Members:
    topic_ids = list(topics)
    members: Members = {}
    for n in range(count):
        # Client-chosen member ids are 22-character base64 Uuids; the exact text does not matter.
        member_id = f"{uuid.UUID(int=n * 0x5851F42D4C957F2D + 1).hex[:22]}"
        subscribed = topic_ids[: 1 + n % len(topic_ids)] if heterogeneous else topic_ids
        members[member_id] = MemberSpec(
            member_id, None, RACKS[n % 3] if racks else None, frozenset(subscribed), {}
        )
    return members


def settled(members: Members, assignment: Assignment) -> Members:
    return {
        m: MemberSpec(m, s.instance_id, s.rack_id, s.subscribed_topic_ids, assignment[m])
        for m, s in members.items()
    }


def timed(
    assignor: ServerAssignor, members: Members, topics: Topics, repeat: int
) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        assignor.assign(members, topics)
        samples.append((time.perf_counter() - start) * 1000)
    return min(samples), statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50x1000,1000x10000", help="MEMBERSxPARTITIONS,...")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    print(f"{'group':46} {'event':12} {'assignor':8} {'best ms':>8} {'median ms':>9}")
    for size in args.sizes.split(","):
        member_count, partition_count = (int(x) for x in size.split("x"))
        for kind in ("homogeneous", "racks", "heterogeneous"):
            racks, heterogeneous = kind == "racks", kind == "heterogeneous"
            topics = make_topics(partition_count, racks)
            fresh = make_members(member_count, topics, racks, heterogeneous)
            for name, assignor in ASSIGNORS.items():
                group = settled(fresh, assignor.assign(fresh, topics))
                joiner = make_members(member_count + 1, topics, racks, heterogeneous)
                new_id, new_spec = list(joiner.items())[-1]
                events = {
                    "first": fresh,
                    "unchanged": group,
                    "member joins": {**group, new_id: new_spec},
                    "member leaves": dict(list(group.items())[1:]),
                }
                label = f"{member_count} members, {partition_count} partitions, {kind}"
                for event, members in events.items():
                    best, median = timed(assignor, members, topics, args.repeat)
                    print(f"{label:46} {event:12} {name:8} {best:8.2f} {median:9.2f}")


if __name__ == "__main__":
    main()
