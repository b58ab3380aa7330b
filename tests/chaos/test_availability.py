"""Availability per fault mix on hand-made histories."""

from __future__ import annotations

from typing import Any

from chaos.availability import aggregate_mixes, per_mix


def history(acked_at: dict[int, float], mixes: list[list[Any]]) -> dict[str, Any]:
    """Values v0..v9 handed over at 100.0, 101.0, ..., 109.0; ``acked_at`` maps n to the
    time v<n> was acknowledged."""
    return {
        "attempts": [100.0 + n for n in range(10)],
        "acked": [[t, 0, i, f"v{n}"] for i, (n, t) in enumerate(sorted(acked_at.items()))],
        "mixes": mixes,
        "start": 100.0,
        "end": 110.0,
    }


def test_a_window_counts_its_attempts_acks_and_the_outage_until_the_next_ack() -> None:
    # v0..v2 acked at once; the fault starts at 102.5; v3..v5 wait until 108.2; v6 is
    # given up on; v7..v9 acked at once.
    acked_at = {0: 100.1, 1: 101.1, 2: 102.1, 3: 108.2, 4: 108.2, 5: 108.2}
    acked_at |= {7: 107.1, 8: 108.1, 9: 109.1}
    [window] = per_mix(history(acked_at, [[102.5, 106.5, "kill+pause"]]))
    assert window["mix"] == "kill+pause"
    # Handed over inside [102.5, 106.5): v3, v4, v5, v6.
    assert window["attempts"] == 4
    assert window["acked"] == 3
    # v3 took 5.2 s, v4 4.2 s, v5 3.2 s.
    assert window["acked_within_5s"] == 2
    # No ack from 102.5 (the start; the last one was at 102.1) until 107.1.
    assert window["longest_unavailable_s"] == 4.6
    # The one-second buckets whose middle is in the window are 2..5 (middles 102.5 to
    # 105.5); only bucket 2 has an ack (at 102.1, before the fault): 1 of 4.
    assert window["seconds_with_ack"] == 0.25


def test_an_outage_that_outlasts_the_window_counts_in_full() -> None:
    acked_at = {0: 100.1, 9: 109.5}
    [window] = per_mix(history(acked_at, [[101.0, 103.0, "disk+kill"]]))
    assert window["longest_unavailable_s"] == 8.5


def test_no_outage_in_a_window_full_of_acks() -> None:
    acked_at = {n: 100.0 + n + 0.2 for n in range(10)}
    [window] = per_mix(history(acked_at, [[103.0, 106.0, "partition+zk-cut"]]))
    assert window["acked"] == window["acked_within_5s"] == window["attempts"] == 3
    assert window["longest_unavailable_s"] == 1.0
    assert window["seconds_with_ack"] == 1.0


def test_windows_of_one_mix_add_up_across_runs() -> None:
    one = {"mix": "kill+pause", "attempts": 10, "acked": 10, "acked_within_5s": 6}
    two = {"mix": "kill+pause", "attempts": 30, "acked": 29, "acked_within_5s": 30}
    other = {"mix": "disk+kill", "attempts": 5, "acked": 5, "acked_within_5s": 5}
    total = aggregate_mixes(
        [
            {**one, "longest_unavailable_s": 9.0, "seconds_with_ack": 0.5},
            {**two, "longest_unavailable_s": 3.0, "seconds_with_ack": 1.0},
            {**other, "longest_unavailable_s": 1.0, "seconds_with_ack": 1.0},
        ]
    )
    assert list(total) == ["disk+kill", "kill+pause"]
    assert total["kill+pause"] == {
        "windows": 2,
        "attempts": 40,
        "acked": 39,
        "acked_eventually": 0.975,
        "acked_within_5s": 0.9,
        "seconds_with_ack": 0.75,
        "longest_unavailable_s": 9.0,
        "mean_longest_unavailable_s": 6.0,
    }
