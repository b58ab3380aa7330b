"""Seeded fault schedules: a pure function of (seed, duration, node names, overlap).

A schedule is a list of faults sorted by start: each starts ``at`` seconds after the workload
is ready, lasts ``hold`` seconds, and is then healed. Faults come in mixes: with ``overlap``
1 (the default) a mix is one fault; with ``overlap`` N > 1 a mix is two to N faults of
different kinds that are all active at once for a while (each starts before any earlier one
of its mix has healed), like a partition while a broker is paused or ZooKeeper cut off from a
broker while another is killed. A quiet gap follows each mix. The same seed gives the same
schedule, printed before the run, so a failing run is replayed with ``--seed``.

Kinds:
- ``partition``: the nodes (ZooKeeper and the brokers) are split in two sides that cannot
  reach each other; the client reaches every node (a leader cut off from ZooKeeper stays
  reachable by producers: the zombie-leader case).
- ``zk-cut``: one broker cannot reach ZooKeeper, but still reaches the other brokers and is
  reached by them and the client (the zombie leader whose followers keep fetching from it).
- ``pause``: SIGSTOP a broker for longer than ``zookeeper.session.timeout.ms``, then SIGCONT.
- ``kill``: kill -9 a broker, restart it when the fault heals.
- ``disk``: fill a broker's log directory (a size-limited tmpfs), free it when it heals.

In one mix, the process faults (pause, kill, disk) hit different brokers: each broker's
process has one thing done to it at a time, so every heal undoes exactly its own fault.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

KINDS = ("partition", "zk-cut", "pause", "kill", "disk")
PROCESS_KINDS = ("pause", "kill", "disk")


@dataclass(frozen=True)
class Fault:
    at: float
    hold: float
    kind: str
    # partition: the side cut off from the others; otherwise the one broker affected.
    nodes: tuple[str, ...]
    # Faults of one mix share its number (the mixes are numbered in order from 0).
    mix: int = 0

    @property
    def end(self) -> float:
        return self.at + self.hold

    def describe(self) -> str:
        return (
            f"t+{self.at:6.1f}s {self.kind:9} {','.join(self.nodes):30} for {self.hold:4.1f}s"
            f"  (mix {self.mix})"
        )


def mix_name(faults: Sequence[Fault]) -> str:
    """The kinds of a mix's faults, sorted and joined by '+': 'kill+partition'."""
    return "+".join(sorted(f.kind for f in faults))


def mixes(schedule: Sequence[Fault]) -> list[list[Fault]]:
    """The schedule's faults grouped by mix, in order."""
    groups: dict[int, list[Fault]] = {}
    for fault in schedule:
        groups.setdefault(fault.mix, []).append(fault)
    return [groups[m] for m in sorted(groups)]


def make_schedule(
    seed: int,
    duration: float,
    zookeeper: str,
    brokers: Sequence[str],
    session_timeout_s: float,
    kinds: Sequence[str] = KINDS,
    overlap: int = 1,
) -> list[Fault]:
    """Mixes of faults filling ``duration`` seconds; the last one heals before it ends."""
    if overlap < 1:
        raise ValueError("overlap must be at least 1")
    if overlap > 1 and len(kinds) < 2:
        raise ValueError("overlapping faults need at least two kinds")
    rng = random.Random(seed)
    faults: list[Fault] = []
    t = rng.uniform(2.0, 5.0)
    while True:
        if overlap == 1:
            # The single-fault draws, in the order they always had: old seeds replay.
            kind = rng.choice(list(kinds))
            nodes, hold = _target(rng, kind, zookeeper, brokers, session_timeout_s, set())
            drafts = [(t, hold, kind, nodes)]
        else:
            drafts = _overlapping_mix(rng, t, zookeeper, brokers, session_timeout_s, kinds, overlap)
        mix_end = max(at + hold for at, hold, _, _ in drafts)
        if mix_end > duration:
            return faults
        number = faults[-1].mix + 1 if faults else 0
        faults.extend(
            Fault(round(at, 1), round(hold, 1), kind, nodes, number)
            for at, hold, kind, nodes in drafts
        )
        t = mix_end + rng.uniform(3.0, 8.0)


def _overlapping_mix(
    rng: random.Random,
    t: float,
    zookeeper: str,
    brokers: Sequence[str],
    session_timeout_s: float,
    kinds: Sequence[str],
    overlap: int,
) -> list[tuple[float, float, str, tuple[str, ...]]]:
    """Two to ``overlap`` faults of different kinds, all active together after the last starts."""
    size = rng.randint(2, min(overlap, len(kinds)))
    busy: set[str] = set()
    drafts: list[tuple[float, float, str, tuple[str, ...]]] = []
    start = t
    for kind in rng.sample(list(kinds), size):
        if drafts:
            # Start before every earlier fault of the mix heals: from then on all are active.
            earliest_end = min(at + hold for at, hold, _, _ in drafts)
            start += rng.uniform(0.0, min(3.0, (earliest_end - start) / 2))
        nodes, hold = _target(rng, kind, zookeeper, brokers, session_timeout_s, busy)
        if kind in PROCESS_KINDS:
            busy.add(nodes[0])
        drafts.append((start, hold, kind, nodes))
    return drafts


def _target(
    rng: random.Random,
    kind: str,
    zookeeper: str,
    brokers: Sequence[str],
    session_timeout_s: float,
    busy: set[str],
) -> tuple[tuple[str, ...], float]:
    """The nodes a fault hits and how long it holds; process faults avoid ``busy`` brokers."""
    if kind == "partition":
        nodes = [zookeeper, *brokers]
        side = tuple(sorted(rng.sample(nodes, rng.randint(1, len(nodes) // 2))))
        return side, rng.uniform(4.0, 15.0)
    if kind == "zk-cut":
        # Past the session timeout: ZooKeeper expires the session, leadership moves.
        return (rng.choice(list(brokers)),), session_timeout_s + rng.uniform(1.0, 6.0)
    free = [b for b in brokers if b not in busy]
    if not free:
        raise ValueError(f"no broker left for {kind}: {len(brokers)} brokers")
    if kind == "pause":
        return (rng.choice(free),), session_timeout_s + rng.uniform(1.0, 6.0)
    if kind in ("kill", "disk"):
        return (rng.choice(free),), rng.uniform(3.0, 12.0)
    raise ValueError(f"unknown fault kind {kind}")
