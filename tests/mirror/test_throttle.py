"""The link's fetch rate cap (kbroker/mirror/throttle.py), on a fake clock."""

from __future__ import annotations

from kbroker.mirror.throttle import LinkThrottle


def test_without_a_cap_nothing_waits() -> None:
    throttle = LinkThrottle()
    throttle.record(10_000_000, 0.0)
    assert throttle.delay(0.0) == 0.0
    assert throttle.fetch_max_bytes(52_428_800) == 52_428_800


def test_fetches_are_paced_to_the_cap() -> None:
    throttle = LinkThrottle(100_000)
    assert throttle.fetch_max_bytes(52_428_800) == 100_000
    now = 0.0
    copied = 0
    # Copy 1 MB as fast as the throttle lets: it takes 9 s after the first fetch (which
    # goes at once), 100 KB/s.
    while copied < 1_000_000:
        now += throttle.delay(now)
        throttle.record(100_000, now)
        copied += 100_000
    assert now == 9.0
    # Idle time is not saved up beyond the fetch under way.
    now = 100.0
    throttle.record(50_000, now)
    assert throttle.delay(now) == 0.5


def test_a_changed_cap_applies_to_the_next_fetch() -> None:
    throttle = LinkThrottle(1000)
    throttle.record(10_000, 0.0)
    assert throttle.delay(0.0) == 10.0
    throttle.set_rate(None)
    assert throttle.delay(0.0) == 0.0
    throttle.set_rate(10)
    assert throttle.fetch_max_bytes(52_428_800) == 1024
