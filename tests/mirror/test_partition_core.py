"""A mirror partition's fetcher state, backoff and truncation decisions, with a fake clock."""

from __future__ import annotations

from kbroker.mirror.partition_core import (
    Backoff,
    Continue,
    Diverged,
    MirrorPartitionCore,
    MirrorState,
    StartOver,
    Truncate,
    check_divergence,
)

BACKOFF = Backoff(initial_ms=100, max_ms=1000)


def test_an_empty_log_fetches_at_once_without_a_check() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=0)
    assert core.wants_fetch(0)
    assert not core.wants_check(0)


def test_a_log_with_records_checks_for_divergence_first() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=42)
    assert core.wants_check(0)
    assert not core.wants_fetch(0)
    core.on_checked(Continue(), 5)
    assert core.wants_fetch(5)


def test_backoff_doubles_up_to_its_cap_and_resets_on_success() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=0)
    delays = []
    now = 0.0
    for _ in range(6):
        core.on_error("connection refused", now, leader_moved=True)
        delays.append(core.retry_at_ms - now)
        assert not core.wants_fetch(core.retry_at_ms - 1)
        now = core.retry_at_ms
        assert core.wants_fetch(now)
    assert delays == [100, 200, 400, 800, 1000, 1000]
    core.on_fetched(10, 12, now)
    core.on_error("timeout", now, leader_moved=False)
    assert core.retry_at_ms - now == 100


def test_an_error_that_says_the_leader_moved_asks_for_metadata() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=0)
    core.on_metadata()
    core.on_error("UNKNOWN_LEADER_EPOCH", 0, leader_moved=False)
    assert not core.needs_metadata
    core.on_error("NOT_LEADER_OR_FOLLOWER", 0, leader_moved=True)
    assert core.needs_metadata
    core.on_metadata()
    assert not core.needs_metadata


def test_backing_off_during_a_check_checks_again_after_the_wait() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=7)
    core.on_error("connection reset", 0, leader_moved=True)
    assert core.state is MirrorState.BACKING_OFF
    assert core.wants_check(100)


def test_pause_holds_fetching_until_resume() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=0)
    core.pause()
    assert not core.wants_fetch(10_000)
    core.on_error("late answer", 10_000, leader_moved=False)
    assert core.state is MirrorState.PAUSED
    core.resume(10_001)
    assert core.wants_fetch(10_001)


def test_pause_while_backing_off_resumes_into_the_interrupted_step() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=3)
    core.on_error("connection refused", 0, leader_moved=True)
    core.pause()
    core.resume(50)
    assert core.wants_check(50)


def test_lag_is_the_source_high_watermark_past_our_end() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=0)
    assert core.lag == -1
    core.on_fetched(40, 100, 1)
    assert core.lag == 60
    core.on_fetched(100, 100, 2)
    assert core.lag == 0


def test_out_of_range_behind_the_source_log_start_starts_over_there() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=0)
    core.on_fetched(10, 10, 1)
    assert core.on_out_of_range(500, 2) == StartOver(500)
    core.on_started_over(500, 2)
    assert core.log_end_offset == 500
    assert core.wants_fetch(2)


def test_out_of_range_past_the_source_end_checks_for_divergence() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=0)
    core.on_fetched(80, 80, 1)
    assert core.on_out_of_range(0, 2) == Continue()
    assert core.wants_check(2)


def test_same_epoch_with_the_source_ending_later_continues() -> None:
    decision = check_divergence(
        requested_epoch=3, source_epoch=3, source_end_offset=120, log_end_offset=100
    )
    assert decision == Continue()


def test_a_source_that_lost_our_tail_truncates_to_its_end() -> None:
    decision = check_divergence(
        requested_epoch=3, source_epoch=3, source_end_offset=90, log_end_offset=100
    )
    assert decision == Truncate(90)


def test_an_epoch_the_source_never_had_truncates_where_its_lower_epoch_ends() -> None:
    # Our last batch has epoch 5, which the source lost in an unclean election: its epoch 4
    # ends at 70 there.
    decision = check_divergence(
        requested_epoch=5, source_epoch=4, source_end_offset=70, log_end_offset=100
    )
    assert decision == Truncate(70)


def test_no_history_at_the_source_stops_the_partition() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=100)
    decision = check_divergence(
        requested_epoch=5, source_epoch=-1, source_end_offset=-1, log_end_offset=100
    )
    assert isinstance(decision, Diverged)
    core.on_checked(decision, 1)
    assert core.state is MirrorState.DIVERGED
    assert "epoch" in core.last_error
    core.on_error("anything", 2, leader_moved=True)
    core.resume(3)
    assert not core.wants_fetch(10_000)
    assert not core.wants_check(10_000)


def test_a_truncation_is_checked_again() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=100)
    core.on_checked(Truncate(70), 1)
    assert core.wants_check(1)


def test_lag_in_time_counts_from_the_last_caught_up_fetch() -> None:
    core = MirrorPartitionCore(BACKOFF, 0, log_end_offset=0)
    core.on_fetched(10, 50, 1_000)
    assert core.lag_ms(5_000) == -1  # never caught up yet
    core.on_fetched(50, 50, 6_000)
    assert core.lag_ms(9_000) == 0
    core.on_fetched(60, 80, 10_000)
    assert core.lag_ms(12_500) == 6_500
