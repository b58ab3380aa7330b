"""The controller's decisions, pure (DESIGN rule 3): replica placement and leader election.

Given the partitions' current states, their replica assignments and which brokers are alive,
these functions return the new states to write; the ZooKeeper backend performs the writes
(conditional on the znode versions and the controller epoch) and never decides anything itself.

Election rules (Kafka's ZooKeeper controller):
- a partition whose leader is gone gets the first replica, in assignment order, that is alive
  and in the ISR; the leader epoch goes up by one and the ISR keeps its live members;
- a broker that re-registered with a new session ("bounced": killed and restarted before its
  old session expired) is treated as having failed: it loses its leaderships when another ISR
  member can take them, and leaves the ISR until it catches up again;
- with no live ISR member the partition goes offline (leader -1) and keeps its ISR, so the
  last in-sync replica is elected when it returns; unclean.leader.election.enable lets any
  live replica lead instead (committed records may then be lost, as documented by Kafka);
- followers that died are dropped from the ISR without an epoch change;
- a replica whose log directory failed on a broker that lives on (KIP-112: the broker says
  so, see controller/zk_paths.py) counts as dead for that partition only: it loses its
  leadership to another ISR member, leaves the ISR, and is never elected, not even
  uncleanly, until its broker registers again; the broker's other replicas are untouched.
  A failed replica that was the last ISR member keeps its ISR place (leader -1), so it is
  elected when its broker returns with the directory healthy, as for a dead broker;
- preferred election moves leadership to the first assigned replica when it is alive and in
  sync (auto.leader.rebalance.enable and the ElectLeaders API); the automatic one only for
  brokers whose share of preferred partitions they do not lead is above
  leader.imbalance.per.broker.percentage.

Reassignment (KIP-455): the partition's replicas become the target followed by the original
replicas leaving, with "adding" and "removing" recorded; new replicas follow the leader and
join the ISR as they catch up; once every target replica is in the ISR the controller
completes it: the ISR keeps only target replicas, a leader outside the target hands over to
the first target replica in the ISR (new epoch), and the replicas become the target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from controller.zk_paths import PartitionState

TopicPartition = tuple[str, int]
NO_LEADER = -1
# The replicas of each partition whose log directory failed (KIP-112), by partition.
OfflineReplicas = Mapping[TopicPartition, frozenset[int]]
NOTHING_OFFLINE: OfflineReplicas = {}


@dataclass(frozen=True, slots=True)
class StateChange:
    """One partition state to write: ``new`` replaces ``old``."""

    partition: TopicPartition
    old: PartitionState
    new: PartitionState


def offline_by_partition(
    by_broker: Mapping[int, Iterable[TopicPartition]], live: set[int]
) -> dict[TopicPartition, frozenset[int]]:
    """The failed replicas of each partition, from what each live broker reports."""
    out: dict[TopicPartition, set[int]] = {}
    for broker, partitions in by_broker.items():
        if broker in live:
            for key in partitions:
                out.setdefault(key, set()).add(broker)
    return {key: frozenset(brokers) for key, brokers in out.items()}


def rack_alternating(brokers: Mapping[int, str | None]) -> list[int]:
    """Broker ids ordered so consecutive ids sit on different racks where possible (racks
    taken round-robin, brokers sorted within a rack); plain sorted order without racks."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(brokers[broker_id] or "", []).append(broker_id)
    ordered: list[int] = []
    racks = [by_rack[r] for r in sorted(by_rack)]
    for i in range(max((len(r) for r in racks), default=0)):
        ordered.extend(rack[i] for rack in racks if i < len(rack))
    return ordered


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int,
    first_partition: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists for partitions ``first_partition ..``: leaders rotate over the brokers
    from ``start_index``, followers follow at a shift that grows every full round, so
    leaders and replicas spread evenly; with racks, the rack-alternating order puts each
    partition's replicas on different racks where possible."""
    ordered = rack_alternating(brokers)
    n = len(ordered)
    result: list[tuple[int, ...]] = []
    for p in range(first_partition, first_partition + num_partitions):
        first = (start_index + p) % n
        shift = p // n % max(n - 1, 1)
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[(first + 1 + (shift + j) % (n - 1)) % n])
        result.append(tuple(replicas))
    return result


def initial_state(replicas: Sequence[int], live: set[int], controller_epoch: int) -> PartitionState:
    """A new partition: the first live replica leads, the live replicas are in sync."""
    isr = tuple(r for r in replicas if r in live)
    leader = isr[0] if isr else NO_LEADER
    return PartitionState(leader, 0, isr or tuple(replicas), controller_epoch)


def _elect(
    state: PartitionState,
    replicas: Sequence[int],
    live: set[int],
    usable: set[int],
    unclean: bool,
    controller_epoch: int,
) -> PartitionState:
    for allowed in (usable, live):
        isr_members = tuple(b for b in state.isr if b in allowed)
        leader = next((r for r in replicas if r in isr_members), None)
        if leader is not None:
            return PartitionState(leader, state.leader_epoch + 1, isr_members, controller_epoch)
    if unclean:
        leader = next((r for r in replicas if r in live), None)
        if leader is not None:
            return PartitionState(leader, state.leader_epoch + 1, (leader,), controller_epoch)
    if state.leader == NO_LEADER:
        return state
    return PartitionState(NO_LEADER, state.leader_epoch + 1, state.isr, controller_epoch)


def on_brokers_changed(
    states: Mapping[TopicPartition, PartitionState],
    assignments: Mapping[TopicPartition, Sequence[int]],
    live: set[int],
    bounced: set[int],
    controller_epoch: int,
    unclean: Callable[[str], bool],
    offline: OfflineReplicas = NOTHING_OFFLINE,
) -> list[StateChange]:
    """New states after brokers died, returned or bounced, or replicas went offline with
    their log directory (see the module docstring)."""
    changes: list[StateChange] = []
    for key, state in sorted(states.items()):
        replicas = assignments.get(key, ())
        failed = offline.get(key, frozenset())
        live_here = live - failed
        usable = live_here - bounced
        if state.leader in usable:
            isr = tuple(b for b in state.isr if b in usable)
            new = (
                state
                if isr == state.isr
                else PartitionState(state.leader, state.leader_epoch, isr, controller_epoch)
            )
        else:
            new = _elect(state, replicas, live_here, usable, unclean(key[0]), controller_epoch)
        if new != state:
            changes.append(StateChange(key, state, new))
    return changes


def preferred_elections(
    states: Mapping[TopicPartition, PartitionState],
    assignments: Mapping[TopicPartition, Sequence[int]],
    live: set[int],
    controller_epoch: int,
    offline: OfflineReplicas = NOTHING_OFFLINE,
) -> list[StateChange]:
    """Move leadership to each partition's preferred (first assigned) replica when it is
    alive, online and in the ISR and does not lead already."""
    changes: list[StateChange] = []
    for key, state in sorted(states.items()):
        replicas = assignments.get(key, ())
        if not replicas:
            continue
        preferred = replicas[0]
        eligible = preferred in live and preferred not in offline.get(key, frozenset())
        if state.leader != preferred and eligible and preferred in state.isr:
            new = PartitionState(preferred, state.leader_epoch + 1, state.isr, controller_epoch)
            changes.append(StateChange(key, state, new))
    return changes


def unclean_elections(
    states: Mapping[TopicPartition, PartitionState],
    assignments: Mapping[TopicPartition, Sequence[int]],
    live: set[int],
    controller_epoch: int,
    offline: OfflineReplicas = NOTHING_OFFLINE,
) -> list[StateChange]:
    """Leaders for offline partitions, from the ISR if a member lives, else from any live
    replica whose log directory has not failed (the ElectLeaders API's unclean election)."""
    changes: list[StateChange] = []
    for key, state in sorted(states.items()):
        live_here = live - offline.get(key, frozenset())
        if state.leader in live_here:
            continue
        new = _elect(state, assignments.get(key, ()), live_here, live_here, True, controller_epoch)
        if new.leader != NO_LEADER:
            changes.append(StateChange(key, state, new))
    return changes


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition's replicas while moving (all of them), and those added and removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


def start_reassignment(current: Reassignment, target: Sequence[int]) -> Reassignment:
    """Move from the original replicas (those before any reassignment in progress) to
    ``target``; moving back to the original replicas ends the reassignment."""
    original = current.original
    removing = tuple(r for r in original if r not in target)
    adding = tuple(r for r in target if r not in original)
    return Reassignment(tuple(target) + removing, adding, removing)


def cancel_reassignment(current: Reassignment) -> Reassignment:
    return Reassignment(current.original, (), ())


def complete_reassignment(
    state: PartitionState, moving: Reassignment, live: set[int], controller_epoch: int
) -> PartitionState | None:
    """The partition's new state when every target replica is in sync, else None."""
    target = moving.target
    if not all(r in state.isr for r in target):
        return None
    isr = tuple(b for b in state.isr if b in target)
    if state.leader in target:
        return PartitionState(state.leader, state.leader_epoch, isr, controller_epoch)
    leader = next((r for r in target if r in isr and r in live), NO_LEADER)
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)


def imbalanced_brokers(
    states: Mapping[TopicPartition, PartitionState],
    assignments: Mapping[TopicPartition, Sequence[int]],
    percentage: int,
) -> set[int]:
    """Brokers that do not lead more than ``percentage`` % of the partitions they are the
    preferred replica of (Kafka's leader imbalance ratio)."""
    preferred: dict[int, int] = {}
    not_leading: dict[int, int] = {}
    for key, replicas in assignments.items():
        state = states.get(key)
        if not replicas or state is None:
            continue
        broker = replicas[0]
        preferred[broker] = preferred.get(broker, 0) + 1
        if state.leader != broker:
            not_leading[broker] = not_leading.get(broker, 0) + 1
    return {b for b, total in preferred.items() if not_leading.get(b, 0) * 100 > percentage * total}
