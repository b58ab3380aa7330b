"""Child process of test_crash: writes to a log while cleaning or enforcing retention
forever, printing what it did, until the parent kills it with SIGKILL.

Lines printed (each flushed once the operation returned):
    A <key> <seq> <offset>    a record appended (value b"<key>:<seq>")
    C / D                     a cleaner pass started / finished
    R / S                     a retention pass started / finished
"""

from __future__ import annotations

import sys
from pathlib import Path

from kbroker.log import LogConfig, LogManager
from kbroker.log.cleaner import CleanerConfig, LogCleaner
from kbroker.log.lifecycle import LifecycleSettings, StorageLifecycle
from wire.records.record import Record, build_batch

KEYS = 40
COMPACT = LogConfig(
    segment_bytes=3000,
    index_interval_bytes=300,
    cleanup_policy=("compact",),
    min_cleanable_dirty_ratio=0.2,
    retention_ms=-1,
    file_delete_delay_ms=0,
)
RETAIN = LogConfig(
    segment_bytes=2000,
    index_interval_bytes=300,
    retention_bytes=8000,
    retention_ms=-1,
    file_delete_delay_ms=0,
)


def config_for(mode: str) -> LogConfig:
    return COMPACT if mode == "clean" else RETAIN


def main() -> None:
    mode, root, start_seq = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    config = config_for(mode)
    manager = LogManager([root], config_for=lambda _t, _p: config)
    manager.open_all()
    plog = manager.get_or_create("t", 0, config)
    # Throttled, so that a pass takes long enough to be killed in the middle of.
    cleaner = LogCleaner(manager, CleanerConfig(io_max_bytes_per_second=400_000))
    lifecycle = StorageLifecycle(
        manager, LifecycleSettings(), stable_offset=lambda _tp: plog.log_end_offset
    )
    seq = start_seq
    while True:
        key = b"k%d" % (seq % KEYS)
        value = b"%s:%d:" % (key, seq) + b"p" * (seq * 7 % 90)
        data = bytearray(build_batch([Record(0, 1_700_000_000_000 + seq, key, value)]))
        result = plog.append_as_leader(data, leader_epoch=0, log_append_time_ms=None)
        print("A", key.decode(), seq, result.first_offset, flush=True)
        seq += 1
        if seq % 25 == 0:
            if mode == "clean":
                print("C", flush=True)
                cleaner.clean_once()
                print("D", flush=True)
            else:
                print("R", flush=True)
                lifecycle.enforce_retention()
                manager.flush_due()
                print("S", flush=True)


if __name__ == "__main__":
    main()
