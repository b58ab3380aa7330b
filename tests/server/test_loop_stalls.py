"""Event-loop stalls (kbroker/loop_stalls.py): the decisions with a fake clock, and a broker
whose loop is blocked reporting the stall with the code that blocked it."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.loop_stalls import IDLE, Stall, StallReports, StallTracker, describe_stack
from kbroker.metrics import BrokerMetrics
from tests.server.conftest import broker_config, free_port


def test_a_beat_past_the_threshold_is_a_stall_with_the_places_sampled_meanwhile() -> None:
    tracker = StallTracker(0.1)
    tracker.expect(due=10.0)
    # On time, or late by less than the threshold: no sample, no stall.
    assert tracker.should_sample(10.09) is None
    assert tracker.ran(10.05) is None
    tracker.expect(due=10.1)
    beat = tracker.should_sample(10.25)
    assert beat is not None
    tracker.sampled(beat, IDLE)
    tracker.sampled(beat, "kbroker/x.py:1 slow")
    tracker.sampled(beat, "kbroker/x.py:1 slow")
    tracker.sampled(beat, "kbroker/y.py:2 next")
    assert tracker.ran(10.4) == Stall(
        pytest.approx(0.3), "kbroker/x.py:1 slow; then kbroker/y.py:2 next"
    )


def test_a_stall_found_only_idle_has_no_place_and_samples_stop_at_three() -> None:
    tracker = StallTracker(0.1)
    tracker.expect(due=1.0)
    beat = tracker.should_sample(1.2)
    assert beat is not None
    tracker.sampled(beat, IDLE)
    assert tracker.ran(1.25) == Stall(pytest.approx(0.25), None)
    tracker.expect(due=2.0)
    beat = tracker.should_sample(2.2)
    assert beat is not None
    for place in ("a", "b", "c"):
        tracker.sampled(beat, place)
    assert tracker.should_sample(2.3) is None


def test_a_sample_for_a_beat_that_has_run_is_not_given_to_the_next() -> None:
    tracker = StallTracker(0.1)
    tracker.expect(due=1.0)
    beat = tracker.should_sample(1.2)
    assert beat is not None
    assert tracker.ran(1.25) == Stall(pytest.approx(0.25), None)
    tracker.expect(due=1.3)
    tracker.sampled(beat, "late sample")
    assert tracker.ran(1.5) == Stall(pytest.approx(0.2), None)


def test_reports_the_first_stall_of_a_window_and_any_longer_one() -> None:
    reports = StallReports(every=10.0)
    decisions = [
        reports.should_report(Stall(seconds, None), now)
        for seconds, now in (
            (0.2, 0.0),
            (0.1, 1.0),
            (0.2, 2.0),
            (0.5, 3.0),
            (0.3, 4.0),
            (0.1, 10.0),
        )
    ]
    assert decisions == [True, False, False, True, False, True]
    assert reports.unreported == 3


def test_a_stack_is_named_innermost_first() -> None:
    def inner() -> str:
        return describe_stack(sys._getframe())

    named = inner()
    assert named.startswith("tests/server/test_loop_stalls.py:")
    assert named.split(" < ")[:2][0].endswith(" inner")
    assert " test_a_stack_is_named_innermost_first" in named


def _hold_the_loop_for_a_while() -> None:
    time.sleep(0.8)


def _held(broker: Broker) -> list[Stall]:
    return [
        stall
        for stall in broker.loop_stalls.recent
        if stall.where is not None and "_hold_the_loop_for_a_while" in stall.where
    ]


async def test_a_blocked_loop_is_logged_with_its_cause_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = Broker(
        broker_config(tmp_path / "data", free_port(), event_loop_stall_threshold_ms="200")
    )
    await broker.start()
    # Past the start-up work (creating and loading __consumer_offsets), which stalls too.
    await broker.group_coordinator.wait_loaded()
    try:
        with caplog.at_level(logging.WARNING, logger="kbroker.loop_stalls"):
            asyncio.get_running_loop().call_soon(_hold_the_loop_for_a_while)
            deadline = time.monotonic() + 60
            while not _held(broker) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        (held,) = _held(broker)
        assert held.seconds >= 0.7
        # Reported unless a longer stall (a busy machine's) was reported just before.
        assert (
            "_hold_the_loop_for_a_while" in caplog.text or broker.loop_stalls.longest > held.seconds
        )
        exposed = BrokerMetrics(broker).render()
        assert "kbroker_event_loop_stall_seconds_count" in exposed
        assert "kbroker_event_loop_longest_stall_seconds" in exposed
    finally:
        await broker.stop()


async def test_minus_one_turns_the_watch_off(tmp_path: Path) -> None:
    broker = Broker(
        broker_config(tmp_path / "data", free_port(), event_loop_stall_threshold_ms="-1")
    )
    await broker.start()
    try:
        asyncio.get_running_loop().call_soon(_hold_the_loop_for_a_while)
        await asyncio.sleep(0.1)
        assert broker.loop_stalls.stalls.count == 0
        assert "kbroker_event_loop" not in BrokerMetrics(broker).render()
    finally:
        await broker.stop()
