"""The seeded schedules as data: one fault at a time as before, or mixes that overlap."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import pytest

from chaos.schedule import KINDS, PROCESS_KINDS, Fault, make_schedule, mix_name, mixes

BROKERS = ("broker-1", "broker-2", "broker-3")
SESSION_S = 6.0


def schedule(
    seed: int, duration: float = 40.0, kinds: Sequence[str] = KINDS, overlap: int = 1
) -> list[Fault]:
    return make_schedule(seed, duration, "zookeeper", BROKERS, SESSION_S, kinds, overlap)


def test_one_at_a_time_replays_the_schedules_seeds_gave_before_mixes() -> None:
    # Seed 9 over 45 s, as tests/chaos/test_smoke.py and earlier notes ran it.
    assert schedule(9, 45.0) == [
        Fault(3.4, 7.7, "pause", ("broker-2",), 0),
        Fault(18.4, 4.9, "partition", ("broker-2", "broker-3"), 1),
        Fault(29.1, 3.4, "disk", ("broker-3",), 2),
        Fault(37.3, 6.8, "kill", ("broker-3",), 3),
    ]


def test_one_at_a_time_never_overlaps() -> None:
    for seed in range(50):
        faults = schedule(seed)
        assert all(len(mix) == 1 for mix in mixes(faults))
        assert all(a.end < b.at for a, b in zip(faults, faults[1:], strict=False))


@pytest.mark.parametrize("overlap", [2, 3])
def test_every_fault_of_a_mix_is_active_at_once_and_mixes_follow_each_other(
    overlap: int,
) -> None:
    for seed in range(100):
        faults = schedule(seed, overlap=overlap)
        assert faults and all(f.end <= 40.0 for f in faults)
        groups = mixes(faults)
        for mix in groups:
            assert 2 <= len(mix) <= overlap
            assert len({f.kind for f in mix}) == len(mix)
            # The last to start starts before the first to heal.
            assert max(f.at for f in mix) < min(f.end for f in mix)
        for before, after in zip(groups, groups[1:], strict=False):
            assert max(f.end for f in before) < min(f.at for f in after)


def test_a_seed_gives_the_same_overlapping_schedule_and_another_seed_another() -> None:
    first = schedule(42, 90.0, overlap=3)
    assert first == schedule(42, 90.0, overlap=3)
    assert first != schedule(43, 90.0, overlap=3)


@pytest.mark.parametrize("overlap", [2, 3])
def test_every_mix_of_kinds_comes_up_within_fifty_seeds(overlap: int) -> None:
    expected = {
        "+".join(sorted(kinds))
        for size in range(2, overlap + 1)
        for kinds in combinations(KINDS, size)
    }
    seen = {mix_name(mix) for seed in range(50) for mix in mixes(schedule(seed, overlap=overlap))}
    assert seen == expected


def test_process_faults_of_a_mix_hit_different_brokers() -> None:
    for seed in range(200):
        for mix in mixes(schedule(seed, overlap=3)):
            hit = [f.nodes[0] for f in mix if f.kind in PROCESS_KINDS]
            assert len(hit) == len(set(hit)), mix


def test_pauses_and_zookeeper_cuts_outlast_the_session_in_mixes_too() -> None:
    held = [
        f for seed in range(50) for f in schedule(seed, overlap=3) if f.kind in ("pause", "zk-cut")
    ]
    assert held and all(f.hold > SESSION_S for f in held)


def test_mixes_of_the_kinds_asked_for_only() -> None:
    names = {
        mix_name(mix)
        for seed in range(20)
        for mix in mixes(schedule(seed, kinds=("pause", "kill"), overlap=3))
    }
    assert names == {"kill+pause"}


def test_overlap_needs_two_kinds() -> None:
    with pytest.raises(ValueError):
        schedule(1, kinds=("kill",), overlap=2)
    with pytest.raises(ValueError):
        schedule(1, overlap=0)
