"""Controller decisions as scenarios: elections on broker loss, bounce and return; preferred
leaders; unclean election; replica placement."""

from __future__ import annotations

from collections import Counter

from controller.decisions import (
    Reassignment,
    assign_replicas,
    cancel_reassignment,
    complete_reassignment,
    imbalanced_brokers,
    initial_state,
    on_brokers_changed,
    preferred_elections,
    rack_alternating,
    start_reassignment,
    unclean_elections,
)
from controller.zk_paths import PartitionState

TP = ("t", 0)
REPLICAS = {TP: (1, 2, 3)}
EPOCH = 7


def never(_: str) -> bool:
    return False


def always(_: str) -> bool:
    return True


def state(leader: int, epoch: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(leader, epoch, isr, 1)


def decide(
    current: PartitionState, live: set[int], bounced: frozenset[int] = frozenset(), unclean=never
) -> PartitionState:  # type: ignore[no-untyped-def]
    changes = on_brokers_changed({TP: current}, REPLICAS, live, set(bounced), EPOCH, unclean)
    return changes[0].new if changes else current


def test_leader_loss_elects_the_next_isr_replica_and_bumps_the_epoch() -> None:
    new = decide(state(1, 4, (1, 2, 3)), live={2, 3})
    assert new == PartitionState(2, 5, (2, 3), EPOCH)


def test_election_skips_replicas_outside_the_isr() -> None:
    new = decide(state(1, 4, (1, 3)), live={2, 3})
    assert new.leader == 3 and new.isr == (3,)


def test_dead_follower_leaves_the_isr_without_an_epoch_change() -> None:
    new = decide(state(1, 4, (1, 2, 3)), live={1, 2})
    assert new == PartitionState(1, 4, (1, 2), EPOCH)


def test_nothing_changes_when_all_is_well() -> None:
    current = state(1, 4, (1, 2, 3))
    assert on_brokers_changed({TP: current}, REPLICAS, {1, 2, 3}, set(), EPOCH, never) == []


def test_no_live_isr_member_goes_offline_and_keeps_the_isr() -> None:
    new = decide(state(1, 4, (1,)), live={2, 3})
    assert new == PartitionState(-1, 5, (1,), EPOCH)
    # Offline stays offline (no rewrite) until an ISR member returns...
    assert decide(new, live={2, 3}) == new
    # ...and then that member leads.
    back = decide(new, live={1, 2, 3})
    assert back.leader == 1 and back.leader_epoch == 6


def test_unclean_election_takes_any_live_replica() -> None:
    new = decide(state(1, 4, (1,)), live={3}, unclean=always)
    assert new == PartitionState(3, 5, (3,), EPOCH)


def test_bounced_leader_hands_over_to_another_isr_member() -> None:
    new = decide(state(1, 4, (1, 2, 3)), live={1, 2, 3}, bounced=frozenset({1}))
    assert new == PartitionState(2, 5, (2, 3), EPOCH)


def test_bounced_leader_alone_in_the_isr_leads_again_at_a_new_epoch() -> None:
    new = decide(state(1, 4, (1,)), live={1, 2, 3}, bounced=frozenset({1}))
    assert new == PartitionState(1, 5, (1,), EPOCH)


def test_bounced_follower_leaves_the_isr() -> None:
    new = decide(state(1, 4, (1, 2, 3)), live={1, 2, 3}, bounced=frozenset({3}))
    assert new == PartitionState(1, 4, (1, 2), EPOCH)


def test_preferred_election_only_when_the_preferred_replica_is_in_sync() -> None:
    states = {TP: state(2, 5, (2, 3))}
    assert preferred_elections(states, REPLICAS, {1, 2, 3}, EPOCH) == []
    states = {TP: state(2, 5, (1, 2, 3))}
    (change,) = preferred_elections(states, REPLICAS, {1, 2, 3}, EPOCH)
    assert change.new == PartitionState(1, 6, (1, 2, 3), EPOCH)
    assert preferred_elections(states, REPLICAS, {2, 3}, EPOCH) == []


def test_initial_state_uses_live_replicas() -> None:
    assert initial_state((3, 1, 2), {1, 2, 3}, 4) == PartitionState(3, 0, (3, 1, 2), 4)
    assert initial_state((3, 1, 2), {1, 2}, 4) == PartitionState(1, 0, (1, 2), 4)


def test_assignment_spreads_leaders_and_replicas_evenly() -> None:
    brokers = dict.fromkeys(range(1, 7))
    replicas = assign_replicas(brokers, 12, 3, start_index=0)
    assert all(len(set(r)) == 3 for r in replicas)
    assert Counter(r[0] for r in replicas) == Counter({b: 2 for b in brokers})
    assert Counter(b for r in replicas for b in r) == Counter({b: 6 for b in brokers})


def test_assignment_is_rack_aware() -> None:
    brokers = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert rack_alternating(brokers) == [1, 3, 5, 2, 4, 6]
    for r in assign_replicas(brokers, 6, 3, start_index=2):
        assert len({brokers[b] for b in r}) == 3


def test_added_partitions_continue_the_rotation() -> None:
    brokers = dict.fromkeys((1, 2, 3))
    whole = assign_replicas(brokers, 6, 2, start_index=1)
    tail = assign_replicas(brokers, 3, 2, start_index=1, first_partition=3)
    assert whole[3:] == tail


def test_unclean_election_on_request_only_for_partitions_without_a_live_leader() -> None:
    states = {TP: state(1, 4, (1,)), ("t", 1): state(2, 1, (2, 3))}
    assignments = {**REPLICAS, ("t", 1): (2, 3, 1)}
    (change,) = unclean_elections(states, assignments, {2, 3}, EPOCH)
    assert change.partition == TP
    assert change.new == PartitionState(2, 5, (2,), EPOCH)


def test_reassignment_lists_target_then_leaving_replicas() -> None:
    moving = start_reassignment(Reassignment((1, 2, 3), (), ()), (3, 4, 5))
    assert moving == Reassignment((3, 4, 5, 1, 2), (4, 5), (1, 2))
    assert moving.target == (3, 4, 5) and moving.original == (3, 1, 2)
    # A new target replaces the one in progress, from the original replicas.
    again = start_reassignment(moving, (1, 4))
    assert again == Reassignment((1, 4, 3, 2), (4,), (3, 2))
    assert cancel_reassignment(again).replicas == (1, 3, 2)


def test_reassignment_completes_once_the_target_is_in_sync() -> None:
    moving = Reassignment((2, 3, 1), (3,), (1,))
    assert complete_reassignment(state(1, 4, (1, 2)), moving, {1, 2, 3}, EPOCH) is None
    done = complete_reassignment(state(1, 4, (1, 2, 3)), moving, {1, 2, 3}, EPOCH)
    # The leader was being removed: the first target replica in sync takes over.
    assert done == PartitionState(2, 5, (2, 3), EPOCH)
    kept = complete_reassignment(state(2, 4, (1, 2, 3)), moving, {1, 2, 3}, EPOCH)
    assert kept == PartitionState(2, 4, (2, 3), EPOCH)


def test_imbalance_counts_preferred_partitions_led_elsewhere() -> None:
    assignments = {("t", p): (1 + p % 2, 2 - p % 2) for p in range(10)}
    # Broker 1 prefers the 5 even partitions and leads all of them; broker 2 prefers the
    # 5 odd ones and leads 4.
    states = {("t", p): state(1 if p % 2 == 0 or p == 9 else 2, 1, (1, 2)) for p in range(10)}
    assert imbalanced_brokers(states, assignments, 10) == {2}
    assert imbalanced_brokers(states, assignments, 20) == set()
