"""Comparing tiers' window counts: match, missing, mismatch, wider windows, a group's
consumed windows, and the __audit record encoding."""

from __future__ import annotations

import pytest

from kbroker.audit.compare import (
    MATCH,
    MISMATCH,
    MISSING,
    CompareError,
    compare,
    consumed,
    rewindow,
)
from kbroker.audit.counter import WindowCount
from kbroker.audit.records import (
    WindowKey,
    decode_key,
    decode_value,
    encode_key,
    encode_range_key,
    encode_value,
    sum_by_window,
)


def key(window: int, topic: str = "t", partition: int = 0) -> WindowKey:
    return WindowKey(topic, partition, window)


def test_rows_say_match_missing_and_mismatch_per_window() -> None:
    source = {
        key(0): WindowCount(3, 0, 2),
        key(60): WindowCount(2, 3, 4),
        key(0, "u"): WindowCount(1, 0, 0),
    }
    mirror = {key(0): WindowCount(3, 0, 2), key(120): WindowCount(1, 5, 5)}
    rows = compare([("source", source), ("mirror", mirror)], {"t"})
    assert [(r.key.window_start_ms, r.counts, r.status) for r in rows] == [
        (0, (("source", 3), ("mirror", 3)), MATCH),
        (60, (("source", 2), ("mirror", None)), MISSING),
        (120, (("source", None), ("mirror", 1)), MISSING),
    ]
    changed = {key(0): WindowCount(2, 0, 1)}
    assert compare([("source", source), ("mirror", changed)], {"t"})[0].status == MISMATCH


def test_wider_windows_sum_the_published_ones() -> None:
    counts = {
        key(0): WindowCount(3, 5, 7),
        key(60): WindowCount(2, 0, 4),
        key(180): WindowCount(1, 9, 9),
    }
    assert rewindow(counts, 60, 180) == {
        key(0): WindowCount(5, 0, 7),
        key(180): WindowCount(1, 9, 9),
    }
    with pytest.raises(CompareError):
        rewindow(counts, 60, 90)


def test_a_group_consumed_the_windows_wholly_below_its_committed_offset() -> None:
    counts = {
        key(0): WindowCount(3, 0, 4),
        key(60): WindowCount(2, 2, 5),
        key(0, partition=1): WindowCount(1, 0, 0),
    }
    assert consumed(counts, {("t", 0): 5}) == {key(0): WindowCount(3, 0, 4)}


def test_audit_records_round_trip() -> None:
    assert decode_key(encode_key(WindowKey("a.b-c", 12, 600000))) == WindowKey("a.b-c", 12, 600000)
    assert decode_value(encode_value(WindowCount(7, 10, 20), 600000)) == (
        WindowCount(7, 10, 20),
        600000,
    )


def test_a_readers_offset_ranges_add_up_per_window() -> None:
    window = WindowKey("t", 1, 600000)
    first = encode_range_key(window, 0, 10)
    second = encode_range_key(window, 10, 25)
    assert first == b"t/1/600000/0-10"
    assert decode_key(first) == window
    other = WindowKey("t", 1, 1200000)
    assert sum_by_window(
        {
            first: WindowCount(10, 0, 9),
            second: WindowCount(4, 10, 13),
            encode_range_key(other, 10, 25): WindowCount(11, 14, 24),
            encode_key(WindowKey("u", 0, 0)): WindowCount(2, 5, 6),
        }
    ) == {
        window: WindowCount(14, 0, 13),
        other: WindowCount(11, 14, 24),
        WindowKey("u", 0, 0): WindowCount(2, 5, 6),
    }
