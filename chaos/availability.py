"""Availability per fault mix: pure, so it is tested on hand-made histories.

Each mix of faults (chaos/schedule.py) is a window of wall-clock time, from its first fault's
start to its last fault's heal, recorded by chaos/run.py in the history as ``mixes``:
[start, end, name] per mix. For each window:

- ``attempts``: values the producer handed to the client while the window was open (the
  history's ``attempts`` holds the time of each value ``v<n>`` at index n); ``acked``: how
  many of them were acknowledged by the end of the run (the producer retries until
  ``message.timeout.ms``, past the run's end, so this counts writes given up on);
  ``acked_within_5s``: how many were acknowledged within 5 s of being handed over, what a
  producer with ``delivery.timeout.ms=5000`` would have seen succeed;
- ``longest_unavailable_s``: the longest time without any acknowledgement that overlaps
  the window, from the window's start at the earliest to the next acknowledgement however
  late (the recovery after the heal is part of the fault's cost);
- ``seconds_with_ack``: the checker's measure, the fraction of the window's one-second
  buckets in which a write was acknowledged.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from chaos.checker import availability

# A producer that gives up after this long would count the later acknowledgements as failures.
PROMPT_S = 5.0


def per_mix(history: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per mix window, in the order they ran."""
    attempt_times: list[float] = history["attempts"]
    acked_at = {int(value[1:]): t for t, _, _, value in history["acked"]}
    ack_times = sorted(t for t, *_ in history["acked"])
    out = []
    for start, end, name in history["mixes"]:
        first = bisect.bisect_left(attempt_times, start)
        last = bisect.bisect_left(attempt_times, end)
        seconds = availability(history["acked"], [[start, end, name, []]], *_span(history))
        out.append(
            {
                "mix": name,
                "start": start,
                "end": end,
                "attempts": last - first,
                "acked": sum(1 for n in range(first, last) if n in acked_at),
                "acked_within_5s": sum(
                    1
                    for n in range(first, last)
                    if acked_at.get(n, float("inf")) - attempt_times[n] <= PROMPT_S
                ),
                "longest_unavailable_s": round(_longest_gap(ack_times, start, end), 1),
                "seconds_with_ack": round(seconds.get(name, 0.0), 3),
            }
        )
    return out


def _span(history: dict[str, Any]) -> tuple[float, float]:
    return history["start"], history["end"]


def _longest_gap(ack_times: list[float], start: float, end: float) -> float:
    """The longest stretch without an acknowledgement that overlaps [start, end)."""
    i = bisect.bisect_right(ack_times, start)
    previous = start
    longest = 0.0
    while True:
        following = ack_times[i] if i < len(ack_times) else end
        longest = max(longest, following - previous)
        if following >= end:
            return longest
        previous = following
        i += 1


def aggregate_mixes(windows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Windows of many runs, summed per mix: the fractions are of the attempts."""
    by_mix: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for window in windows:
        by_mix[window["mix"]].append(window)
    out = {}
    for name, group in sorted(by_mix.items()):
        attempts = sum(w["attempts"] for w in group)
        acked = sum(w["acked"] for w in group)
        prompt = sum(w["acked_within_5s"] for w in group)
        gaps = [w["longest_unavailable_s"] for w in group]
        out[name] = {
            "windows": len(group),
            "attempts": attempts,
            "acked": acked,
            "acked_eventually": round(acked / attempts, 3) if attempts else None,
            "acked_within_5s": round(prompt / attempts, 3) if attempts else None,
            "seconds_with_ack": round(sum(w["seconds_with_ack"] for w in group) / len(group), 3),
            "longest_unavailable_s": max(gaps),
            "mean_longest_unavailable_s": round(sum(gaps) / len(gaps), 1),
        }
    return out
