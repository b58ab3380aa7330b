"""Storage lifecycle figures: disk use under retention, start-up time against the number of
segments (clean and unclean shutdown), and log cleaner throughput.

Run: .venv/bin/python bench/storage_lifecycle.py [--quick]

Everything runs in-process on the storage layer (kbroker/log), in a temporary directory:
1. continuous production into a log with retention.bytes, the retention duty run every
   --check-ms of wall time (as log.retention.check.interval.ms would), the partition
   directory's size sampled as it goes;
2. LogManager.open_all() timed for one partition of 10 and of 1,000 segments: after a clean
   shutdown, after an unclean one (recovery-point checkpoint present), after an unclean one
   without that checkpoint, and with lazy opening disabled (every segment opened and checked);
3. one cleaner pass over a log of repeatedly overwritten keys.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbroker.log import LogConfig, LogManager, PartitionLog  # noqa: E402
from kbroker.log.cleaner import CleanerConfig, LogCleaner  # noqa: E402
from kbroker.log.lifecycle import LifecycleSettings, StorageLifecycle  # noqa: E402
from kbroker.log.log_manager import (  # noqa: E402
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
)
from wire.records.record import Record, build_batch  # noqa: E402

MB = 1024 * 1024


def payload_batch(seq: int, records: int, value_size: int, keys: int = 0) -> bytearray:
    """One batch; with `keys`, record keys cycle through that many values."""
    value = os.urandom(value_size)
    recs = [
        Record(
            i,
            1_700_000_000_000 + seq,
            b"k%d" % ((seq * records + i) % keys) if keys else None,
            value,
        )
        for i in range(records)
    ]
    return bytearray(build_batch(recs))


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def disk_over_time(root: Path, total_mb: int, check_ms: int, rate_mb: float) -> None:
    config = LogConfig(
        segment_bytes=256 * 1024,
        retention_bytes=1 * MB,
        retention_ms=-1,
        file_delete_delay_ms=200,
    )
    manager = LogManager([root], config_for=lambda _t, _p: config)
    manager.open_all()
    plog = manager.get_or_create("bench", 0, config)
    lifecycle = StorageLifecycle(
        manager,
        LifecycleSettings(retention_check_interval_ms=check_ms),
        high_watermark=lambda _tp: plog.log_end_offset,
    )
    batch_bytes = 16 * 1024
    batches = total_mb * MB // batch_bytes
    samples = max(1, batches // 12)
    print(
        f"\n1. Disk use producing {rate_mb:g} MiB/s, retention.bytes=1 MiB, segment.bytes=256 KiB,"
        f" check every {check_ms} ms, file.delete.delay.ms=200 (.deleted files counted)"
    )
    print(
        f"   {'time s':>7} {'written MiB':>12} {'on disk KiB':>12} {'log KiB':>8}"
        f" {'segments':>9} {'log start':>10}"
    )
    start = last_check = time.monotonic()
    peak = 0
    for seq in range(batches):
        plog.append_as_leader(payload_batch(seq, 16, 1000), leader_epoch=0, log_append_time_ms=None)
        ahead = start + (seq + 1) * batch_bytes / (rate_mb * MB) - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        now = time.monotonic()
        if (now - last_check) * 1000 >= check_ms:
            lifecycle.enforce_retention()
            manager.flush_due()  # also unlinks .deleted files past file.delete.delay.ms
            last_check = now
        if seq % samples == 0 or seq == batches - 1:
            on_disk = dir_bytes(plog.directory)
            peak = max(peak, on_disk)
            print(
                f"   {now - start:7.2f} {(seq + 1) * batch_bytes / MB:12.1f} {on_disk / 1024:12.0f}"
                f" {plog.size_bytes / 1024:8.0f}"
                f" {len(plog.segment_base_offsets()):9d} {plog.log_start_offset:10d}"
            )
    print(f"   peak on disk: {peak / 1024:.0f} KiB for {total_mb} MiB written")
    manager.shutdown()


def build_log(root: Path, segments: int) -> None:
    config = LogConfig(segment_bytes=32 * 1024, index_interval_bytes=4096)
    manager = LogManager([root], config_for=lambda _t, _p: config)
    manager.open_all()
    plog = manager.get_or_create("bench", 0, config)
    seq = 0
    while len(plog.segment_base_offsets()) < segments:
        plog.append_as_leader(payload_batch(seq, 8, 500), leader_epoch=0, log_append_time_ms=None)
        seq += 1
    manager.shutdown()


def time_open(root: Path, repeat: int, *, lazy: bool = True) -> float:
    config = LogConfig(segment_bytes=32 * 1024, index_interval_bytes=4096)
    best = float("inf")
    for _ in range(repeat):
        marker = (root / CLEAN_SHUTDOWN_FILE).exists()
        t0 = time.perf_counter()
        if lazy:
            manager = LogManager([root], config_for=lambda _t, _p: config)
            manager.open_all()
        else:
            PartitionLog.open(root / "bench-0", config, recover=not marker, lazy=False)
        best = min(best, time.perf_counter() - t0)
        if lazy:
            # Close without rewriting anything (a shutdown would put the marker back).
            for plog in manager.logs().values():
                for segment in plog.segments():
                    segment.close()
        if marker:
            (root / CLEAN_SHUTDOWN_FILE).write_bytes(b"")
    return best


def startup(root: Path, repeat: int) -> None:
    print("\n2. Start-up time of one partition (LogManager.open_all, best of", repeat, "runs)")
    print(f"   {'segments':>9} {'clean':>9} {'unclean':>9} {'unclean, no':>12} {'eager':>9}")
    print(f"   {'':>9} {'':>9} {'(rp ckpt)':>9} {'checkpoint':>12} {'(clean)':>9}")
    for count in (10, 1000):
        base = root / f"seg{count}"
        build_log(base, count)
        clean = time_open(base, repeat)
        eager = time_open(base, repeat, lazy=False)
        (base / CLEAN_SHUTDOWN_FILE).unlink()
        unclean = time_open(base, repeat)
        (base / RECOVERY_POINT_CHECKPOINT).unlink()
        no_checkpoint = time_open(base, repeat)
        print(
            f"   {count:9d} {clean * 1000:7.1f}ms {unclean * 1000:7.1f}ms"
            f" {no_checkpoint * 1000:10.1f}ms {eager * 1000:7.1f}ms"
        )


def cleaning(root: Path, total_mb: int) -> None:
    config = LogConfig(
        segment_bytes=512 * 1024,
        cleanup_policy=("compact",),
        retention_ms=-1,
        file_delete_delay_ms=0,
    )
    manager = LogManager([root], config_for=lambda _t, _p: config)
    manager.open_all()
    plog = manager.get_or_create("compacted", 0, config)
    batches = total_mb * MB // (16 * 200)
    for seq in range(batches):
        plog.append_as_leader(
            payload_batch(seq, 16, 200, keys=2000), leader_epoch=0, log_append_time_ms=None
        )
    before = plog.size_bytes
    cleaner = LogCleaner(manager, CleanerConfig())
    t0 = time.perf_counter()
    cleaner.clean_log("compacted", 0)
    elapsed = time.perf_counter() - t0
    stats = cleaner.stats
    print("\n3. One cleaner pass, 2,000 keys overwritten, 200-byte values")
    print(
        f"   {before / MB:.1f} MiB -> {plog.size_bytes / MB:.2f} MiB in {elapsed:.2f} s"
        f" ({stats.bytes_read / MB / elapsed:.1f} MiB/s read, {stats.records_removed} records"
        " removed)"
    )
    manager.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller volumes")
    parser.add_argument("--check-ms", type=int, default=100)
    parser.add_argument("--rate-mb", type=float, default=4.0, help="production rate, MiB/s")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kbroker-bench-"))
    try:
        disk_over_time(root / "retention", 8 if args.quick else 24, args.check_ms, args.rate_mb)
        startup(root / "startup", 2 if args.quick else 3)
        cleaning(root / "cleaning", 4 if args.quick else 16)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
