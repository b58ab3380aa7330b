"""``kbroker audit --watch``: the last comparison of the tiers as Prometheus gauges.

The audit as a service: the command compares the tiers every few seconds and its metrics
endpoint (kbroker.metrics.MetricsServer, the broker's) shows the last result, so an alert
fires on a missing window without anyone running ``kbroker audit`` by hand:

- ``kbroker_audit_missing_windows{topic,tier}``: windows of the topic another tier has and
  this tier lacks (records lost on the way, or not there yet: a tier behind by one publish
  interval shows the newest window missing for that long);
- ``kbroker_audit_mismatched_windows{topic,tier}``: windows this tier counts differently from
  the first tier (the reference);
- ``kbroker_audit_compared_windows{topic}``: windows compared in the last check;
- ``kbroker_audit_last_check_timestamp_seconds``: when the last check succeeded (Unix time);
  a stale value means the tiers cannot be read;
- ``kbroker_audit_checks_total{result}``: checks done (``ok``) and failed (``failed``: a
  tier's cluster could not be read; the gauges keep the last successful check's values).
"""

from __future__ import annotations

from collections.abc import Sequence

from kbroker.audit.compare import TierProblems, WindowRow, tier_problems
from kbroker.metrics import Exposition


class AuditWatch:
    """The results of the checks of ``topics`` so far."""

    def __init__(self, topics: Sequence[str]) -> None:
        self._topics = sorted(set(topics))
        self._problems: dict[tuple[str, str], TierProblems] = {}
        self._compared: dict[str, int] = {}
        self.last_check_s: float | None = None
        self.checks = {"ok": 0, "failed": 0}

    def checked(self, tiers: Sequence[str], rows: Sequence[WindowRow], now_s: float) -> None:
        """A check compared ``tiers`` at ``now_s`` (Unix seconds) and found ``rows``."""
        self._problems = tier_problems(rows, tiers, self._topics)
        self._compared = {topic: 0 for topic in self._topics}
        for row in rows:
            self._compared[row.key.topic] += 1
        self.last_check_s = now_s
        self.checks["ok"] += 1

    def failed(self) -> None:
        """A check could not read every tier."""
        self.checks["failed"] += 1

    def expose(self, out: Exposition) -> None:
        problems = sorted(self._problems.items())
        for name, attribute, text in (
            (
                "kbroker_audit_missing_windows",
                "missing",
                "Windows another tier has and this tier lacks, in the last check.",
            ),
            (
                "kbroker_audit_mismatched_windows",
                "mismatched",
                "Windows this tier counts differently from the first tier, in the last check.",
            ),
        ):
            out.family(name, "gauge", text)
            for (topic, tier), found in problems:
                out.sample(name, (("topic", topic), ("tier", tier)), getattr(found, attribute))
        out.family("kbroker_audit_compared_windows", "gauge", "Windows compared in the last check.")
        for topic, count in sorted(self._compared.items()):
            out.sample("kbroker_audit_compared_windows", (("topic", topic),), count)
        out.family(
            "kbroker_audit_last_check_timestamp_seconds",
            "gauge",
            "Unix time of the last check that read every tier.",
        )
        if self.last_check_s is not None:
            out.sample("kbroker_audit_last_check_timestamp_seconds", (), self.last_check_s)
        out.family("kbroker_audit_checks_total", "counter", "Checks of the tiers, by result.")
        for result, count in sorted(self.checks.items()):
            out.sample("kbroker_audit_checks_total", (("result", result),), count)

    def render(self) -> str:
        out = Exposition()
        self.expose(out)
        return out.render()
