"""The controller's decisions when a broker's log directory fails (KIP-112), as scenarios:
only the partitions with a replica in the failed directory change; their leaderships move to
another ISR member, the failed replicas leave the ISR, and nothing elects them again while
their broker lives on with the directory offline."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.decisions import (
    OfflineReplicas,
    on_brokers_changed,
    preferred_elections,
    unclean_elections,
)
from controller.zk_paths import PartitionState

EPOCH = 9
LIVE = {1, 2, 3}
# Broker 1 holds replicas of a-0 and a-1 in the directory that failed, b-0 in a healthy one.
ASSIGNMENTS = {("a", 0): (1, 2, 3), ("a", 1): (2, 1, 3), ("b", 0): (1, 3, 2), ("c", 0): (1,)}
FAILED_ON_1: OfflineReplicas = {("a", 0): frozenset({1}), ("a", 1): frozenset({1})}


def s(leader: int, epoch: int, *isr: int) -> PartitionState:
    return PartitionState(leader, epoch, isr, 1)


def never(_: str) -> bool:
    return False


def always(_: str) -> bool:
    return True


@dataclass(frozen=True)
class Scenario:
    name: str
    before: dict[tuple[str, int], PartitionState]
    offline: OfflineReplicas
    # The partitions that change, with their new leader, leader epoch and ISR.
    after: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]]
    unclean: bool = False
    bounced: frozenset[int] = frozenset()


SCENARIOS = [
    Scenario(
        "the failed leader hands over to the next ISR replica; a failed follower leaves the ISR; "
        "the broker's healthy replica keeps leading",
        before={("a", 0): s(1, 4, 1, 2, 3), ("a", 1): s(2, 2, 2, 1, 3), ("b", 0): s(1, 3, 1, 3, 2)},
        offline=FAILED_ON_1,
        after={("a", 0): (2, 5, (2, 3)), ("a", 1): (2, 2, (2, 3))},
    ),
    Scenario(
        "the next in assignment order that is in the ISR leads",
        before={("a", 0): s(1, 4, 1, 3)},
        offline=FAILED_ON_1,
        after={("a", 0): (3, 5, (3,))},
    ),
    Scenario(
        "the last ISR member failed: the partition goes offline, keeping the ISR for its return",
        before={("a", 0): s(1, 4, 1)},
        offline=FAILED_ON_1,
        after={("a", 0): (-1, 5, (1,))},
    ),
    Scenario(
        "an unclean election takes a live replica elsewhere, never the failed one",
        before={("a", 0): s(1, 4, 1)},
        offline=FAILED_ON_1,
        after={("a", 0): (2, 5, (2,))},
        unclean=True,
    ),
    Scenario(
        "a failed replica with no other replica and unclean election on: offline",
        before={("c", 0): s(1, 4, 1)},
        offline={("c", 0): frozenset({1})},
        after={("c", 0): (-1, 5, (1,))},
        unclean=True,
    ),
    Scenario(
        "an offline partition whose only ISR member is a failed replica stays offline",
        before={("a", 0): s(-1, 5, 1)},
        offline=FAILED_ON_1,
        after={},
    ),
    Scenario(
        "once the broker registers again (nothing offline), its ISR member leads again",
        before={("a", 0): s(-1, 5, 1)},
        offline={},
        after={("a", 0): (1, 6, (1,))},
    ),
    Scenario(
        "a bounced leader and a failed replica at once: the one usable ISR member leads",
        before={("a", 0): s(2, 4, 2, 1, 3)},
        offline=FAILED_ON_1,
        after={("a", 0): (3, 5, (3,))},
        bounced=frozenset({2}),
    ),
    Scenario(
        "failed replicas on two brokers: the third leads alone",
        before={("a", 0): s(1, 4, 1, 2, 3)},
        offline={("a", 0): frozenset({1, 2})},
        after={("a", 0): (3, 5, (3,))},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_log_dir_failure_scenario(scenario: Scenario) -> None:
    changes = on_brokers_changed(
        scenario.before,
        ASSIGNMENTS,
        LIVE,
        set(scenario.bounced),
        EPOCH,
        always if scenario.unclean else never,
        scenario.offline,
    )
    got = {c.partition: (c.new.leader, c.new.leader_epoch, c.new.isr) for c in changes}
    assert got == scenario.after
    assert all(c.old == scenario.before[c.partition] for c in changes)
    assert all(c.new.controller_epoch == EPOCH for c in changes)


def test_preferred_election_never_picks_a_failed_replica() -> None:
    # Even while the ISR still lists it (the controller's removal not written yet).
    states = {("a", 0): s(2, 5, 1, 2, 3), ("b", 0): s(3, 4, 1, 3, 2)}
    (change,) = preferred_elections(states, ASSIGNMENTS, LIVE, EPOCH, FAILED_ON_1)
    assert change.partition == ("b", 0) and change.new.leader == 1


def test_unclean_election_on_request_replaces_a_failed_leader_but_not_with_it() -> None:
    states = {("a", 0): s(1, 4, 1), ("b", 0): s(1, 3, 1, 3, 2), ("c", 0): s(1, 2, 1)}
    offline = {**FAILED_ON_1, ("c", 0): frozenset({1})}
    (change,) = unclean_elections(states, ASSIGNMENTS, LIVE, EPOCH, offline)
    assert change.partition == ("a", 0)
    assert change.new == PartitionState(2, 5, (2,), EPOCH)
