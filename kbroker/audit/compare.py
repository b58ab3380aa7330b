"""Comparing the ``__audit`` counts of several tiers, window by window (``kbroker audit``).

A tier is what one place holds of a topic: a cluster's ``__audit`` counts, or a consumer
group's committed position. The group tier is derived from the counts of the cluster the
group consumes, by offsets: a window whose last offset is below the group's committed offset
was consumed in full (it counts as that cluster's count); a window with records at or above
the committed offset is not consumed yet, and the group tier lacks it. That is exact without
reading any record, because ``__audit`` carries each window's first and last offsets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kbroker.audit.counter import WindowCount, window_start
from kbroker.audit.records import WindowKey

MATCH = "match"
MISSING = "missing"
MISMATCH = "mismatch"

TierCounts = Mapping[WindowKey, WindowCount]


class CompareError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class WindowRow:
    key: WindowKey
    # Tier name -> count; None where the tier has no such window.
    counts: tuple[tuple[str, int | None], ...]
    status: str


def rewindow(counts: TierCounts, published_ms: int, window_ms: int) -> dict[WindowKey, WindowCount]:
    """Counts of ``published_ms`` windows summed into windows of ``window_ms``, a multiple."""
    if window_ms % published_ms:
        raise CompareError(
            f"--window {window_ms} ms is not a multiple of the published windows"
            f" ({published_ms} ms)"
        )
    out: dict[WindowKey, WindowCount] = {}
    for key, count in counts.items():
        wide = WindowKey(key.topic, key.partition, window_start(key.window_start_ms, window_ms))
        known = out.get(wide)
        out[wide] = count if known is None else known.plus(count)
    return out


def consumed(
    counts: TierCounts, committed: Mapping[tuple[str, int], int]
) -> dict[WindowKey, WindowCount]:
    """The windows a group consumed in full: all their records below its committed offset."""
    return {
        key: count
        for key, count in counts.items()
        if count.last_offset < committed.get((key.topic, key.partition), 0)
    }


def compare(tiers: Sequence[tuple[str, TierCounts]], topics: set[str]) -> list[WindowRow]:
    """One row per window of ``topics`` any tier has, in topic, partition, window order."""
    keys = sorted({k for _, counts in tiers for k in counts if k.topic in topics})
    rows = []
    for key in keys:
        found = tuple(
            (name, None if key not in counts else counts[key].count) for name, counts in tiers
        )
        values = [v for _, v in found]
        if None in values:
            status = MISSING
        elif len(set(values)) > 1:
            status = MISMATCH
        else:
            status = MATCH
        rows.append(WindowRow(key, found, status))
    return rows


@dataclass(frozen=True, slots=True)
class TierProblems:
    """One tier's bad windows of one topic."""

    # Windows another tier has and this one lacks.
    missing: int = 0
    # Windows this tier counts differently from the first tier (the reference: the source).
    mismatched: int = 0


def tier_problems(
    rows: Sequence[WindowRow], tiers: Sequence[str], topics: Sequence[str]
) -> dict[tuple[str, str], TierProblems]:
    """Per (topic, tier), every pair present even at zero, so that an alert on a tier's
    missing windows sees a zero, not an absent series, once the tier caught up."""
    missing = {(topic, tier): 0 for topic in topics for tier in tiers}
    mismatched = dict(missing)
    for row in rows:
        reference = row.counts[0][1]
        for tier, count in row.counts:
            pair = (row.key.topic, tier)
            if count is None:
                missing[pair] += 1
            elif reference is not None and count != reference:
                mismatched[pair] += 1
    return {pair: TierProblems(missing[pair], mismatched[pair]) for pair in missing}
