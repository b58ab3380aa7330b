"""`.lock` in each log directory: one broker process per directory at a time.

Two processes writing the same logs (a restarted broker whose predecessor is still shutting
down, two brokers given the same `log.dirs`) would corrupt them, so a broker takes a POSIX
record lock (fcntl.lockf, what Kafka's FileChannel.tryLock takes on Linux) on `.lock` before
it reads or writes anything there, and refuses to start when another process holds it. The
kernel drops the lock when the process ends, kill -9 included; the file itself stays.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class LogDirInUse(Exception):
    """Another process holds a log directory's lock."""


def acquire(directory: Path) -> int:
    """Lock `directory` for this process; the descriptor that holds the lock."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise LogDirInUse(
            f"log directory {directory} is in use by another process (it holds {path})"
        ) from exc
    return fd


def release(fd: int) -> None:
    os.close(fd)
