"""Child process of test_kill9_txn: transactions of three producers, interleaved, committed
or aborted at random, forever; prints each append once it returned."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from kbroker.log import LogConfig, PartitionLog
from tests.log.txn_helpers import marker, txn_batch

PRODUCERS = (21, 22, 23)


def main() -> None:
    directory = Path(sys.argv[1])
    config = LogConfig(segment_bytes=6_000, index_interval_bytes=500)
    plog = PartitionLog.open(directory, config, recover=True)
    rng = random.Random(int(sys.argv[2]))
    sequences = dict.fromkeys(PRODUCERS, 0)
    open_txns: set[int] = set()
    while True:
        pid = rng.choice(PRODUCERS)
        if pid in open_txns and rng.random() < 0.3:
            data = marker(pid, commit=rng.random() < 0.5)
            open_txns.discard(pid)
        else:
            count = rng.randint(1, 4)
            data = txn_batch(pid, sequences[pid], count, tag=pid)
            sequences[pid] += count
            open_txns.add(pid)
        result = plog.append_as_leader(data, leader_epoch=0, log_append_time_ms=None)
        print(result.first_offset, result.last_offset, flush=True)


if __name__ == "__main__":
    main()
