"""``kbroker audit --watch``'s gauges: missing and mismatched windows per topic and tier,
against the first tier, present at zero, and the time of the last good check."""

from __future__ import annotations

from kbroker.audit.compare import TierProblems, compare, tier_problems
from kbroker.audit.counter import WindowCount
from kbroker.audit.records import WindowKey
from kbroker.audit.watch import AuditWatch


def key(window: int, topic: str = "t") -> WindowKey:
    return WindowKey(topic, 0, window)


SOURCE = {
    key(0): WindowCount(3, 0, 2),
    key(60): WindowCount(2, 3, 4),
    key(0, "u"): WindowCount(1, 0, 0),
}
MIRROR = {
    key(0): WindowCount(2, 0, 1),
    key(120): WindowCount(1, 5, 5),
    key(0, "u"): WindowCount(1, 0, 0),
}
TIERS = [("source", SOURCE), ("mirror", MIRROR)]


def test_problems_per_topic_and_tier_against_the_first_tier() -> None:
    rows = compare(TIERS, {"t", "u", "idle"})
    assert tier_problems(rows, ["source", "mirror"], ["t", "u", "idle"]) == {
        # Window 120 is only on the mirror: the source lacks it.
        ("t", "source"): TierProblems(missing=1, mismatched=0),
        # Window 0 counted 2 instead of 3; window 60 not there.
        ("t", "mirror"): TierProblems(missing=1, mismatched=1),
        ("u", "source"): TierProblems(),
        ("u", "mirror"): TierProblems(),
        ("idle", "source"): TierProblems(),
        ("idle", "mirror"): TierProblems(),
    }


def test_gauges_show_the_last_good_check() -> None:
    watch = AuditWatch(["t", "u"])
    samples = [line for line in watch.render().splitlines() if not line.startswith("#")]
    # No check yet: no time to show, and no tier known.
    assert samples == [
        'kbroker_audit_checks_total{result="failed"} 0',
        'kbroker_audit_checks_total{result="ok"} 0',
    ]

    watch.checked(["source", "mirror"], compare(TIERS, {"t", "u"}), 1_700_000_000.5)
    watch.failed()
    lines = set(watch.render().splitlines())
    assert {
        'kbroker_audit_missing_windows{topic="t",tier="source"} 1',
        'kbroker_audit_missing_windows{topic="t",tier="mirror"} 1',
        'kbroker_audit_missing_windows{topic="u",tier="mirror"} 0',
        'kbroker_audit_mismatched_windows{topic="t",tier="mirror"} 1',
        'kbroker_audit_mismatched_windows{topic="t",tier="source"} 0',
        'kbroker_audit_compared_windows{topic="t"} 3',
        'kbroker_audit_compared_windows{topic="u"} 1',
        "kbroker_audit_last_check_timestamp_seconds 1700000000.5",
        'kbroker_audit_checks_total{result="ok"} 1',
        'kbroker_audit_checks_total{result="failed"} 1',
        "# TYPE kbroker_audit_missing_windows gauge",
    } <= lines

    healed = [("source", SOURCE), ("mirror", SOURCE)]
    watch.checked(["source", "mirror"], compare(healed, {"t", "u"}), 1_700_000_060)
    lines = set(watch.render().splitlines())
    assert 'kbroker_audit_missing_windows{topic="t",tier="mirror"} 0' in lines
    assert 'kbroker_audit_mismatched_windows{topic="t",tier="mirror"} 0' in lines
    assert "kbroker_audit_last_check_timestamp_seconds 1700000060" in lines
