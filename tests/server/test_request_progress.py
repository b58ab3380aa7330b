"""The read-rate rule for partial requests (issue 29, item 1), with a fake clock."""

from __future__ import annotations

from kbroker.server.request_progress import ProgressMeter


def test_a_request_trickling_below_the_rate_is_dropped_after_the_window() -> None:
    meter = ProgressMeter(min_bytes_per_second=1000, window_seconds=5)
    verdicts = [meter.too_slow(float(t), 10 + t, reading=True) for t in range(7)]
    assert verdicts == [False] * 5 + [True, True]


def test_a_request_arriving_at_the_rate_is_kept() -> None:
    meter = ProgressMeter(min_bytes_per_second=1000, window_seconds=5)
    assert not any(meter.too_slow(float(t), 1000 * t + 1, reading=True) for t in range(60))


def test_only_the_last_window_counts() -> None:
    meter = ProgressMeter(min_bytes_per_second=1000, window_seconds=5)
    # A fast start, then a stall: dropped once the stall fills the window.
    for t in range(3):
        assert not meter.too_slow(float(t), 1_000_000 * (t + 1), reading=True)
    stalled = [meter.too_slow(float(t), 3_000_000, reading=True) for t in range(3, 10)]
    assert stalled == [False, False, False, False, True, True, True]


def test_time_not_read_does_not_count() -> None:
    meter = ProgressMeter(min_bytes_per_second=1000, window_seconds=5)
    assert not meter.too_slow(0.0, 100, reading=True)
    assert not meter.too_slow(1.0, 100, reading=True)
    # Paused by the broker for a minute: the client could not send.
    for t in range(2, 62):
        assert not meter.too_slow(float(t), 100, reading=False)
    verdicts = [meter.too_slow(float(t), 100, reading=True) for t in range(62, 68)]
    assert verdicts == [False, False, False, False, True, True]


def test_a_new_request_starts_afresh() -> None:
    meter = ProgressMeter(min_bytes_per_second=1000, window_seconds=5)
    for t in range(4):
        meter.too_slow(float(t), 10, reading=True)
    # The request completed and a smaller part of the next one is here.
    assert not meter.too_slow(4.0, 5, reading=True)
    assert not meter.too_slow(8.0, 5, reading=True)
    assert meter.too_slow(9.0, 5, reading=True)
    meter.restart()
    assert not meter.too_slow(10.0, 5, reading=True)
    assert not meter.too_slow(11.0, 0, reading=True)
    assert not meter.too_slow(20.0, 5, reading=True)
