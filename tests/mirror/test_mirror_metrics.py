"""Mirror partitions on the metrics endpoint."""

from __future__ import annotations

from kbroker.metrics import Exposition
from kbroker.mirror.link import PartitionStatus
from kbroker.mirror.metrics import expose_mirrors


def test_lag_state_and_copied_counters_per_partition() -> None:
    out = Exposition()
    status = PartitionStatus(1, "backing-off", 40, 100, 60, 2500.0, "timeout", 40, 4096)
    expose_mirrors(out, {"orders": [status]})
    text = out.render()
    labels = 'topic="orders",partition="1"'
    assert f"kbroker_mirror_lag{{{labels}}} 60" in text
    assert f"kbroker_mirror_lag_ms{{{labels}}} 2500" in text
    assert f'kbroker_mirror_state{{{labels},state="backing-off"}} 1' in text
    assert f'kbroker_mirror_state{{{labels},state="fetching"}} 0' in text
    assert f"kbroker_mirror_copied_offsets_total{{{labels}}} 40" in text
    assert f"kbroker_mirror_copied_bytes_total{{{labels}}} 4096" in text
