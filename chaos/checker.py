"""Check a recorded history: pure, so it is tested on hand-made histories.

The history (written by chaos/workload.py, faults added by chaos/run.py) is JSON:

- ``acked``: [time, partition, offset, value] per acknowledged write (offset null when the
  client reported none, see ``Report.acked_without_offset``);
- ``failed``: [time, value, error] per write the producer gave up on (outcome unknown);
- ``seen``: [time, partition, offset, value] per record a consumer read during the run;
- ``final``: {partition: [[offset, value], ...]}, every record from the log start to the
  high watermark, read after every fault healed; ``final_complete`` says the read got there;
- ``faults``: [start, end, kind, nodes] per injected fault (wall-clock seconds);
- ``start``, ``end``: when the producer started and stopped writing.

Anomalies, as in Jepsen's Kafka analysis: an acknowledged value missing from the final log
(lost), a value present twice (duplicate), an acknowledged value at another offset than the
one acknowledged (offset changed), a value a consumer read that is not at that offset at the
end (vanished: a consumer read above what was committed), and offsets that do not increase
in a consumer's reads or in the final log (out of order). Availability per fault kind is the
fraction of one-second buckets, while that kind of fault was active, in which at least one
write was acknowledged.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

NO_FAULT = "none"


@dataclass
class Report:
    acked: int
    failed: int
    final_records: int
    final_complete: bool
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    offset_changed: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    out_of_order: int = 0
    # Acknowledged with no offset: librdkafka's idempotent producer, when a request's outcome
    # was unknown (timeout, broken connection) and a later batch of the partition succeeds,
    # reports the earlier messages delivered without an offset (rd_kafka_dr_implicit_ack:
    # the broker accepted the later sequence numbers, so it has the earlier ones). Such a
    # value must still be in the final log once, in its partition.
    acked_without_offset: int = 0
    availability: dict[str, float] = field(default_factory=dict)

    @property
    def safe(self) -> bool:
        """What acks=all with min.insync.replicas=2 promises."""
        return self.final_complete and not (
            self.lost
            or self.duplicates
            or self.offset_changed
            or self.vanished
            or self.out_of_order
        )

    def summary(self) -> dict[str, Any]:
        return {
            "acked": self.acked,
            "failed": self.failed,
            "final_records": self.final_records,
            "final_complete": self.final_complete,
            "lost": len(self.lost),
            "duplicates": len(self.duplicates),
            "offset_changed": len(self.offset_changed),
            "vanished": len(self.vanished),
            "out_of_order": self.out_of_order,
            "acked_without_offset": self.acked_without_offset,
            "availability": {k: round(v, 3) for k, v in sorted(self.availability.items())},
            "safe": self.safe,
            "examples": {
                "lost": self.lost[:5],
                "duplicates": self.duplicates[:5],
                "offset_changed": self.offset_changed[:5],
                "vanished": self.vanished[:5],
            },
        }


def check(history: dict[str, Any]) -> Report:
    final: dict[int, list[tuple[int, str]]] = {
        int(p): [(int(o), str(v)) for o, v in records] for p, records in history["final"].items()
    }
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, records in final.items():
        for offset, value in records:
            where[value].append((p, offset))
    report = Report(
        acked=len(history["acked"]),
        failed=len(history["failed"]),
        final_records=sum(len(r) for r in final.values()),
        final_complete=bool(history["final_complete"]),
    )
    report.duplicates = sorted(v for v, places in where.items() if len(places) > 1)
    for _, p, offset, value in history["acked"]:
        places = where.get(value)
        if offset is None:
            report.acked_without_offset += 1
        if not places:
            report.lost.append(f"{value}@{p}:{offset}")
        elif offset is None and any(place[0] == p for place in places):
            continue
        elif (p, offset) not in places:
            report.offset_changed.append(f"{value}@{p}:{offset} now {places}")
    for _, p, offset, value in history["seen"]:
        if (p, offset) not in where.get(value, []):
            report.vanished.append(f"{value}@{p}:{offset}")
    report.out_of_order = _out_of_order(history["seen"], final)
    report.availability = availability(
        history["acked"], history["faults"], history["start"], history["end"]
    )
    return report


def _out_of_order(seen: list[list[Any]], final: dict[int, list[tuple[int, str]]]) -> int:
    count = 0
    last: dict[int, int] = {}
    for _, p, offset, _ in seen:
        if offset <= last.get(p, -1):
            count += 1
        last[p] = offset
    for records in final.values():
        count += sum(1 for a, b in zip(records, records[1:], strict=False) if b[0] <= a[0])
    return count


def availability(
    acked: list[list[Any]], faults: list[list[Any]], start: float, end: float
) -> dict[str, float]:
    """Per fault kind (and ``none``), the fraction of one-second buckets with an ack."""
    acked_buckets = Counter(int(t - start) for t, *_ in acked)
    total: Counter[str] = Counter()
    good: Counter[str] = Counter()
    for bucket in range(int(end - start)):
        middle = start + bucket + 0.5
        kinds = {kind for s, e, kind, _ in faults if s <= middle < e} or {NO_FAULT}
        for kind in kinds:
            total[kind] += 1
            good[kind] += acked_buckets[bucket] > 0
    return {kind: good[kind] / total[kind] for kind in total}


def aggregate(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' summaries in one: counts added, availability averaged per fault kind."""
    faults: Counter[str] = Counter()
    availability: dict[str, list[float]] = defaultdict(list)
    for summary in summaries:
        faults.update(summary["faults"])
        for kind, value in summary["availability"].items():
            availability[kind].append(value)
    totals = {
        key: sum(s[key] for s in summaries)
        for key in ("acked", "lost", "duplicates", "offset_changed", "vanished", "out_of_order")
    }
    return {
        "runs": len(summaries),
        "safe_runs": sum(bool(s["safe"]) for s in summaries),
        "faults": dict(sorted(faults.items())),
        **totals,
        "availability": {k: round(sum(v) / len(v), 3) for k, v in sorted(availability.items())},
    }
