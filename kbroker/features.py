"""Feature versions (KIP-584): what this broker implements, and the levels the cluster runs at.

Clients read both from ApiVersions (v3+) and change behaviour by the finalized levels: a Kafka
4.x producer uses transaction version 2 (KIP-890's second part: the epoch bumped at every
transaction end, partitions added by their leaders) only when ``transaction.version`` is
finalized at 2 or more. Each feature kbroker knows is listed with the range it implements; a
feature is raised by the work that implements its next level. Levels at 0 are not finalized
(Kafka lists only features in use).
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSACTION_VERSION = "transaction.version"

# Feature -> (lowest, highest) level this broker implements.
SUPPORTED: dict[str, tuple[int, int]] = {
    TRANSACTION_VERSION: (0, 2),
    # KIP-848: the consumer group protocol.
    "group.version": (0, 1),
    # KIP-932: share groups.
    "share.version": (0, 1),
    # KIP-1071 (streams groups) and KIP-966 (eligible leader replicas): not implemented yet.
    "streams.version": (0, 0),
    "eligible.leader.replicas.version": (0, 0),
}


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The levels the cluster runs at, and the epoch of that decision (KIP-584)."""

    levels: dict[str, int]
    epoch: int

    def level(self, feature: str) -> int:
        return self.levels.get(feature, 0)


# A new cluster runs every feature at the highest level its brokers implement, as Kafka 4.x
# formats new clusters.
DEFAULT_FINALIZED = FinalizedFeatures(
    {name: high for name, (_, high) in SUPPORTED.items() if high > 0}, epoch=0
)
