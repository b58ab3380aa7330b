"""High-watermark checkpoints: ``<log dir>/replication-offset-checkpoint``, one per log dir.

Kafka's format, the same as the log-start-offset checkpoint: a version line (``0``), a count
line, then one ``<topic> <partition> <offset>`` line per partition whose log lives in that
directory. Written whole through a temporary file and an atomic rename (DESIGN rule 6), by the
log manager's background syncer (kbroker/log/background_sync.py: its fsyncs held the event
loop 305 ms on a busy machine); a missing or unreadable file reads as empty, and a restarted
broker then starts its high watermarks at 0 and learns them again from the leaders or its
followers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kbroker.log.log_manager import DirFailure, LogManager, read_offset_checkpoint

CHECKPOINT_FILE = "replication-offset-checkpoint"
TopicPartition = tuple[str, int]


def read_high_watermarks(dirs: list[Path]) -> dict[TopicPartition, int]:
    entries: dict[TopicPartition, int] = {}
    for directory in dirs:
        entries.update(read_offset_checkpoint(directory / CHECKPOINT_FILE))
    return entries


def write_high_watermarks(
    logs: LogManager, high_watermarks: Mapping[TopicPartition, int]
) -> list[DirFailure]:
    """Write each directory's checkpoint; the directories whose write failed, with the
    error (the others are written all the same)."""
    failures: list[DirFailure] = []
    by_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in logs.dirs}
    for (topic, partition), offset in high_watermarks.items():
        directory = logs.dir_of(topic, partition).parent
        by_dir.setdefault(directory, {})[(topic, partition)] = offset
    for directory, entries in by_dir.items():
        try:
            logs.write_checkpoint(directory, CHECKPOINT_FILE, entries)
        except OSError as exc:
            failures.append((directory, exc))
    return failures
