"""Broker memory as the log grows: RSS after each GB written, up to --gigabytes.

The broker keeps no records in memory (the page cache holds them), so its
resident set should stay flat however much log it has. This writes 1 KB records
with kcat, a GB at a time, into one partition of a kbroker it starts, and
prints the broker's RSS (and peak RSS) after each GB, then reads the whole log
back once and prints RSS again. Benchmarks print figures; they are not tests.

    .venv/bin/python bench/rss_growth.py --gigabytes 10
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import throughput

RECORD_BYTES = 1000
RECORDS_PER_GB = 1_000_000


def rss_mb(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of a process in MB, from /proc."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gigabytes", type=int, default=10)
    args = parser.parse_args()
    with throughput.own_broker() as broker, tempfile.TemporaryDirectory() as work:
        topic = f"rss-{uuid.uuid4().hex[:8]}"
        settings = throughput.Settings(
            broker.bootstrap, topic, RECORDS_PER_GB, RECORD_BYTES, 1, 1, "1", 5, 1_000_000, "none"
        )
        throughput.create_topic(settings)
        chunk = Path(work) / "gb.txt"
        chunk.write_bytes((b"x" * (RECORD_BYTES - 1) + b"\n") * RECORDS_PER_GB)
        command = [
            "kcat", "-b", broker.bootstrap, "-P", "-q", "-t", topic,
            *throughput.kcat_properties(settings), "-l", str(chunk),
        ]  # fmt: skip
        print(f"{'log GB':>6} {'RSS MB':>8} {'peak MB':>8} {'write s':>8}")
        for gigabyte in range(1, args.gigabytes + 1):
            started = time.perf_counter()
            subprocess.run(command, check=True, stdin=subprocess.DEVNULL)
            elapsed = time.perf_counter() - started
            current, peak = rss_mb(broker.pid)
            print(f"{gigabyte:>6} {current:>8.1f} {peak:>8.1f} {elapsed:>8.1f}", flush=True)
        started = time.perf_counter()
        total = args.gigabytes * RECORDS_PER_GB
        subprocess.run(
            ["kcat", "-b", broker.bootstrap, "-C", "-q", "-t", topic, "-o", "beginning",
             "-e", "-c", str(total), "-f", "."],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        current, peak = rss_mb(broker.pid)
        print(
            f"read back {args.gigabytes} GB in {time.perf_counter() - started:.1f} s: "
            f"RSS {current:.1f} MB, peak {peak:.1f} MB"
        )


if __name__ == "__main__":
    main()
