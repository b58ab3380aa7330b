"""LeaderIsr: high watermark over the ISR, caught-up times, shrink and expand candidates."""

from __future__ import annotations

from replication.isr import LeaderIsr

LAG = 1000


def leader(isr: tuple[int, ...] = (1, 2, 3), hw: int = 0, epoch_start: int = 0) -> LeaderIsr:
    return LeaderIsr(1, (1, 2, 3), isr, hw, epoch_start, now_ms=0)


def test_high_watermark_is_the_minimum_log_end_over_the_isr() -> None:
    state = leader()
    assert not state.update_high_watermark(10)  # followers' ends are unknown
    state.on_follower_fetch(2, 7, 10, now_ms=1)
    assert not state.update_high_watermark(10)
    state.on_follower_fetch(3, 5, 10, now_ms=2)
    assert state.update_high_watermark(10)
    assert state.high_watermark == 5
    state.on_follower_fetch(3, 10, 10, now_ms=3)
    state.update_high_watermark(10)
    assert state.high_watermark == 7


def test_high_watermark_never_goes_down() -> None:
    state = leader(isr=(1, 2), hw=8)
    state.on_follower_fetch(2, 3, 10, now_ms=1)
    assert not state.update_high_watermark(10)
    assert state.high_watermark == 8


def test_leader_alone_commits_its_log_end() -> None:
    state = LeaderIsr(1, (1,), (1,), 0, 0, now_ms=0)
    assert state.update_high_watermark(4)
    assert state.high_watermark == 4


def test_a_follower_that_stops_fetching_is_shrunk_after_the_lag() -> None:
    state = leader()
    state.on_follower_fetch(2, 10, 10, now_ms=100)
    state.on_follower_fetch(3, 10, 10, now_ms=100)
    assert state.shrink_candidates(now_ms=1000, lag_max_ms=LAG) == set()
    state.on_follower_fetch(2, 10, 10, now_ms=1500)
    assert state.shrink_candidates(now_ms=1200, lag_max_ms=LAG) == {3}


def test_a_follower_behind_but_reaching_the_previous_end_stays_caught_up() -> None:
    state = leader()
    # Fetch at 5 while the leader is at 10: not caught up now.
    state.on_follower_fetch(2, 5, 10, now_ms=100)
    # Next fetch reaches 10 (the leader's end at the previous fetch) while the leader grew:
    # the follower was caught up at the time of that previous fetch.
    state.on_follower_fetch(2, 10, 20, now_ms=900)
    assert state.followers[2].last_caught_up_ms == 100
    assert 2 not in state.shrink_candidates(now_ms=1050, lag_max_ms=LAG)
    assert 2 in state.shrink_candidates(now_ms=1200, lag_max_ms=LAG)


def test_a_follower_that_never_catches_up_is_shrunk() -> None:
    state = leader()
    for t in range(0, 2000, 100):
        state.on_follower_fetch(2, t // 100, 1000 + t, now_ms=t)
    assert 2 in state.shrink_candidates(now_ms=2000, lag_max_ms=LAG)


def test_expand_needs_the_high_watermark_and_the_epoch_start() -> None:
    state = leader(isr=(1, 2), hw=0, epoch_start=8)
    state.on_follower_fetch(2, 10, 10, now_ms=1)
    state.update_high_watermark(10)
    state.on_follower_fetch(3, 9, 10, now_ms=1)
    assert state.expand_candidates() == set()  # 9 < high watermark 10
    state.on_follower_fetch(3, 10, 10, now_ms=2)
    assert state.expand_candidates() == {3}
    state.set_isr((1, 2, 3))
    assert state.expand_candidates() == set()


def test_unknown_replicas_are_ignored_and_replica_changes_apply() -> None:
    state = leader()
    state.on_follower_fetch(9, 10, 10, now_ms=1)
    assert 9 not in state.followers
    state.set_replicas((1, 2, 4), now_ms=5)
    assert set(state.followers) == {2, 4}
