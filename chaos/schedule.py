"""Seeded fault schedules: a pure function of (seed, duration, node names).

A schedule is a list of faults, one at a time: each starts ``at`` seconds after the workload
is ready, lasts ``hold`` seconds, and is then healed; a quiet gap follows. The same seed gives
the same schedule, printed before the run, so a failing run is replayed with ``--seed``.

Kinds:
- ``partition``: the nodes (ZooKeeper and the brokers) are split in two sides that cannot
  reach each other; the client reaches every node (a leader cut off from ZooKeeper stays
  reachable by producers: the zombie-leader case).
- ``zk-cut``: one broker cannot reach ZooKeeper, but still reaches the other brokers and is
  reached by them and the client (the zombie leader whose followers keep fetching from it).
- ``pause``: SIGSTOP a broker for longer than ``zookeeper.session.timeout.ms``, then SIGCONT.
- ``kill``: kill -9 a broker, restart it when the fault heals.
- ``disk``: fill a broker's log directory (a size-limited tmpfs), free it when it heals.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

KINDS = ("partition", "zk-cut", "pause", "kill", "disk")


@dataclass(frozen=True)
class Fault:
    at: float
    hold: float
    kind: str
    # partition: the side cut off from the others; otherwise the one broker affected.
    nodes: tuple[str, ...]

    def describe(self) -> str:
        return f"t+{self.at:6.1f}s {self.kind:9} {','.join(self.nodes):30} for {self.hold:4.1f}s"


def make_schedule(
    seed: int,
    duration: float,
    zookeeper: str,
    brokers: Sequence[str],
    session_timeout_s: float,
    kinds: Sequence[str] = KINDS,
) -> list[Fault]:
    """Faults filling ``duration`` seconds; the last one heals before it ends."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    t = rng.uniform(2.0, 5.0)
    while True:
        kind = rng.choice(list(kinds))
        if kind == "partition":
            nodes = [zookeeper, *brokers]
            side = tuple(sorted(rng.sample(nodes, rng.randint(1, len(nodes) // 2))))
            hold = rng.uniform(4.0, 15.0)
        elif kind in ("pause", "zk-cut"):
            # Past the session timeout: ZooKeeper expires the session, leadership moves.
            side = (rng.choice(list(brokers)),)
            hold = session_timeout_s + rng.uniform(1.0, 6.0)
        else:
            side = (rng.choice(list(brokers)),)
            hold = rng.uniform(3.0, 12.0)
        if t + hold > duration:
            return faults
        faults.append(Fault(round(t, 1), round(hold, 1), kind, side))
        t += hold + rng.uniform(3.0, 8.0)
