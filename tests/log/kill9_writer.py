"""Child process of test_kill9: appends forever, printing each batch once append returned."""

from __future__ import annotations

import sys
from pathlib import Path

from kbroker.log import LogConfig, PartitionLog
from tests.log.helpers import batch


def main() -> None:
    directory = Path(sys.argv[1])
    config = LogConfig(segment_bytes=20_000, index_interval_bytes=500)
    plog = PartitionLog.open(directory, config, recover=True)
    tag = 0
    while True:
        count = 1 + tag % 5
        data = batch(
            count,
            value_size=(tag * 37) % 700,
            tag=tag,
            producer_id=11,
            producer_epoch=0,
            base_sequence=plog.log_end_offset,
        )
        result = plog.append_as_leader(data, leader_epoch=1, log_append_time_ms=None)
        print(result.first_offset, result.last_offset, tag, flush=True)
        tag += 1


if __name__ == "__main__":
    main()
