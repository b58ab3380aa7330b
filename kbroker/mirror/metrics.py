"""Mirror partitions on the metrics endpoint: lag, fetcher state, what was copied.

Per mirror partition this broker leads (labels ``topic``, ``partition``):

- ``kbroker_mirror_lag``: offsets the source has committed (its high watermark at the last
  fetch) that the mirror has not copied yet; -1 before the first answer;
- ``kbroker_mirror_lag_ms``: the lag in time, milliseconds since a fetch last found the
  partition caught up (0 while it is; -1 before the first time);
- ``kbroker_mirror_state``: 1 for the fetcher's state (label ``state``: checking, fetching,
  backing-off, paused, diverged);
- ``kbroker_mirror_copied_offsets_total`` and ``kbroker_mirror_copied_bytes_total``: offsets and
  batch bytes appended since this broker began following the partition (rate() gives the
  link's records and bytes per second).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kbroker.metrics import Exposition
from kbroker.mirror.link import PartitionStatus
from kbroker.mirror.partition_core import MirrorState


def expose_mirrors(out: Exposition, statuses: Mapping[str, Sequence[PartitionStatus]]) -> None:
    rows = [
        ((("topic", topic), ("partition", str(s.index))), s)
        for topic, found in sorted(statuses.items())
        for s in found
    ]
    out.family("kbroker_mirror_lag", "gauge", "Source offsets not yet copied (-1: unknown).")
    for labels, status in rows:
        out.sample("kbroker_mirror_lag", labels, status.lag)
    out.family(
        "kbroker_mirror_lag_ms",
        "gauge",
        "Milliseconds since the partition was last caught up (0: caught up, -1: not yet).",
    )
    for labels, status in rows:
        out.sample("kbroker_mirror_lag_ms", labels, status.lag_ms)
    out.family("kbroker_mirror_state", "gauge", "1 for the state of the partition's fetcher.")
    for labels, status in rows:
        for state in MirrorState:
            value = 1 if state.value == status.state else 0
            out.sample("kbroker_mirror_state", (*labels, ("state", state.value)), value)
    for name, attribute, text in (
        ("kbroker_mirror_copied_offsets_total", "copied_offsets", "Offsets appended."),
        ("kbroker_mirror_copied_bytes_total", "copied_bytes", "Record batch bytes appended."),
    ):
        out.family(name, "counter", text)
        for labels, status in rows:
            out.sample(name, labels, getattr(status, attribute))
