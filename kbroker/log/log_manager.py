"""All partition logs of a broker, spread over its log directories.

Layout of each log directory (`log.dirs`):
- `<topic>-<partition>/` one directory per partition log (partition_log.py);
- `.kafka_cleanshutdown` empty marker, written (fsync) after every log was flushed and closed
  by `shutdown()`, deleted by `open_all()` once the logs are open: when it is present at
  start-up the logs skip recovery of their active segment;
- `log-start-offset-checkpoint` Kafka's text checkpoint of log start offsets, written at
  shutdown and by `flush_due()` when a start offset moved (atomic rename):

      0                                  format version
      <count>
      <topic> <partition> <offset>       count lines

- `recovery-point-offset-checkpoint` the same format: per log, the offset below which every
  byte was fsynced; written by `flush_due()` when one moved and at shutdown. After an unclean
  shutdown only the segments from the one holding the recovery point are validated;
- `cleaner-offset-checkpoint` the same format, written by the log cleaner (cleaner.py);
- `<topic>-<partition>.<hex>-delete/` a deleted partition being removed; removed at start-up
  if a crash interrupted the removal;
- `.lock` held by the broker process using the directory (dir_lock.py).
The checkpoints, a new partition's directory entry and every log's fsyncs are written by one
background thread in the order asked (background_sync.py): the event loop never waits for the
disk, and a checkpoint's offsets become durable only after the data they vouch for.
A new partition goes to the log directory holding the fewest partitions (Kafka's rule).
Logs are opened lazily (segment.py's LazySegment): start-up cost does not grow with the
number of sealed segments.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from operator import attrgetter
from pathlib import Path

from kbroker.log import dir_lock
from kbroker.log.background_sync import BackgroundSync
from kbroker.log.dir_remover import DirRemover
from kbroker.log.fileio import (
    atomic_write,
    atomic_write_in,
    fsync_and_close,
    fsync_dir,
    one_sync,
    open_dir,
    unlink_quietly,
)
from kbroker.log.log_config import LogConfig
from kbroker.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
DELETE_SUFFIX = "-delete"

TopicPartition = tuple[str, int]


def parse_partition_dir(name: str) -> TopicPartition | None:
    """`<topic>-<partition>` -> (topic, partition); None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or name.endswith(DELETE_SUFFIX):
        return None
    return topic, int(partition)


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Entries of a `<topic> <partition> <offset>` checkpoint; {} when missing or bad."""
    try:
        lines = path.read_text().splitlines()
        if int(lines[0]) != 0:
            raise ValueError("unknown checkpoint version")
        count = int(lines[1])
        entries = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            entries[(topic, int(partition))] = int(offset)
        if len(entries) != count:
            raise ValueError("checkpoint shorter than its count")
        return entries
    except FileNotFoundError:
        return {}
    except (ValueError, IndexError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return {}


def format_offset_checkpoint(entries: dict[TopicPartition, int]) -> bytes:
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items()))
    return f"0\n{len(entries)}\n{body}".encode()


def write_offset_checkpoint(path: Path, entries: dict[TopicPartition, int]) -> None:
    atomic_write(path, format_offset_checkpoint(entries))


# A log directory a write failed in, and the error.
DirFailure = tuple[Path, OSError]


class LogManager:
    """Opens, creates, flushes and closes the partition logs of every log directory."""

    def __init__(
        self,
        log_dirs: list[Path],
        *,
        clock: Callable[[], float] = time.time,
        config_for: Callable[[str, int], LogConfig] | None = None,
        cordoned: Iterable[Path] = (),
    ) -> None:
        """`config_for(topic, partition)` gives the config of logs found by `open_all`
        (defaults to Kafka's defaults; `get_or_create` with a config updates it).
        `cordoned` directories take no new partition while another one can (KIP-1066)."""
        if not log_dirs:
            raise ValueError("at least one log directory is required")
        # The online log directories; one whose writes failed moves to offline_dirs.
        self._dirs = [Path(d) for d in log_dirs]
        self.cordoned = frozenset(Path(d) for d in cordoned)
        self.offline_dirs: list[Path] = []
        self._clock = clock
        self._config_for = config_for or (lambda _topic, _partition: LogConfig())
        self._logs: dict[TopicPartition, PartitionLog] = {}
        # (checkpoint file name, log dir) -> the entries last written there.
        self._checkpointed: dict[tuple[str, Path], dict[TopicPartition, int]] = {}
        # Removes deleted partitions' directories off the event loop.
        self.remover = DirRemover()
        # Runs the logs' fsyncs and writes the checkpoints off the event loop, in order.
        self.syncer = BackgroundSync()
        # The descriptors holding the directories' locks (lock_dirs), and whether another
        # process holds one: then this manager writes nothing, not even at shutdown.
        self._locks: list[int] = []
        self._in_use_elsewhere = False

    def lock_dirs(self) -> None:
        """Lock every log directory for this process (dir_lock.py); raises LogDirInUse,
        holding none, when another process uses one."""
        try:
            for log_dir in self._dirs:
                self._locks.append(dir_lock.acquire(log_dir))
        except dir_lock.LogDirInUse:
            self._release_locks()
            self._in_use_elsewhere = True
            raise

    def _release_locks(self) -> None:
        for fd in self._locks:
            dir_lock.release(fd)
        self._locks.clear()

    @property
    def dirs(self) -> list[Path]:
        return list(self._dirs)

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def dir_of(self, topic: str, partition: int) -> Path:
        """The directory of a partition's log (where it is, or would be created)."""
        plog = self._logs.get((topic, partition))
        if plog is not None:
            return plog.directory
        return self._pick_dir() / f"{topic}-{partition}"

    def _pick_dir(self) -> Path:
        """The directory with the fewest partitions (Kafka's rule for a new log), among those
        not cordoned when there are any."""
        candidates = [d for d in self._dirs if d not in self.cordoned] or self._dirs
        if len(candidates) == 1:
            # Counting would make creating n partitions cost O(n^2) for nothing.
            return candidates[0]
        counts = dict.fromkeys(candidates, 0)
        for plog in self._logs.values():
            parent = plog.directory.parent
            if parent in counts:
                counts[parent] += 1
        return min(candidates, key=lambda d: counts[d])

    def open_all(self) -> None:
        """Open every partition log found, recovering those of directories without a
        clean-shutdown marker, then delete the markers."""
        for log_dir in self._dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            starts = read_offset_checkpoint(log_dir / LOG_START_CHECKPOINT)
            points = read_offset_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
            for child in sorted(log_dir.iterdir()):
                if not child.is_dir():
                    continue
                if child.name.endswith(DELETE_SUFFIX):
                    shutil.rmtree(child, ignore_errors=True)
                    continue
                tp = parse_partition_dir(child.name)
                if tp is None:
                    continue
                if tp in self._logs:
                    raise RuntimeError(f"{tp} found in two log directories: {child}")
                self._logs[tp] = PartitionLog.open(
                    child,
                    self._config_for(*tp),
                    recover=not clean,
                    clock=self._clock,
                    log_start_offset=starts.get(tp),
                    recovery_point=points.get(tp),
                    lazy=True,
                    syncer=self.syncer,
                )
            self._checkpointed[(LOG_START_CHECKPOINT, log_dir)] = starts
            self._checkpointed[(RECOVERY_POINT_CHECKPOINT, log_dir)] = points
            unlink_quietly(marker)
            fsync_dir(log_dir)

    def get_or_create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The partition's log, created empty if needed; `config` replaces its config."""
        plog = self._logs.get((topic, partition))
        if plog is None:
            directory = self.dir_of(topic, partition)
            plog = PartitionLog.open(
                directory, config, recover=False, clock=self._clock, syncer=self.syncer
            )
            parent_fd = open_dir(directory.parent)
            self.syncer.submit(directory.parent, lambda: fsync_and_close([parent_fd]))
            self._logs[(topic, partition)] = plog
        elif plog.config != config:
            plog.update_config(config)
        return plog

    def delete(self, topic: str, partition: int) -> None:
        """Close the log without writing to it and rename its directory to a `-delete`
        name; dir_remover.py removes it in the background (a crash before that leaves the
        directory for start-up to remove), once the syncer has run the jobs asked for before:
        a pending checkpoint replaced inside the renamed directory after its files were
        removed would leave it behind, not empty."""
        plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return
        plog.abandon()
        doomed = plog.directory.with_name(
            f"{plog.directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        )
        os.rename(plog.directory, doomed)
        self.syncer.submit(doomed.parent, lambda: self.remover.remove(doomed))

    def mark_offline(self, log_dir: Path) -> list[TopicPartition]:
        """Take a log directory whose writes fail out of service (KIP-112): its logs are
        closed without another write and forgotten, and nothing more is written there (no
        checkpoint, no clean-shutdown marker, so the next start recovers its logs). Returns
        the partitions that were there."""
        if log_dir not in self._dirs:
            return []
        self._dirs.remove(log_dir)
        self.offline_dirs.append(log_dir)
        lost = [tp for tp, plog in self._logs.items() if plog.directory.parent == log_dir]
        for tp in lost:
            self._logs.pop(tp).abandon()
        return lost

    def flush_due(self) -> list[DirFailure]:
        """Periodic duty: flush the logs whose flush.ms elapsed, unlink `.deleted` files
        whose delay elapsed, checkpoint moved log start offsets and recovery points. The
        directories a write failed in, with the error: the caller takes them offline
        (KIP-112), as Kafka does when a flush or a checkpoint fails."""
        failures: list[DirFailure] = []
        for plog in list(self._logs.values()):
            try:
                plog.maybe_flush()
            except OSError as exc:
                failures.append((plog.directory.parent, exc))
        return failures + self._checkpoint_all(only_if_changed=True)

    def _checkpoint_all(self, *, only_if_changed: bool) -> list[DirFailure]:
        return self._checkpoint(
            LOG_START_CHECKPOINT, "log_start_offset", only_if_changed
        ) + self._checkpoint(RECOVERY_POINT_CHECKPOINT, "recovery_point", only_if_changed)

    def _checkpoint(self, name: str, attribute: str, only_if_changed: bool) -> list[DirFailure]:
        value = attrgetter(attribute)
        per_dir: dict[Path, dict[TopicPartition, int]]
        if len(self._dirs) == 1:
            # Every log is in the one directory (mark_offline forgets the others' logs): no
            # path per log to compute, 10,000 times a second.
            per_dir = {self._dirs[0]: {tp: value(plog) for tp, plog in self._logs.items()}}
        else:
            per_dir = {d: {} for d in self._dirs}
            for tp, plog in self._logs.items():
                parent = plog.directory.parent
                if parent in per_dir:
                    per_dir[parent][tp] = value(plog)
        failures: list[DirFailure] = []
        for log_dir, entries in per_dir.items():
            if only_if_changed and self._checkpointed.get((name, log_dir)) == entries:
                continue
            try:
                self.write_checkpoint(log_dir, name, entries)
            except OSError as exc:
                failures.append((log_dir, exc))
                continue
            self._checkpointed[(name, log_dir)] = entries
        return failures

    def write_checkpoint(
        self, log_dir: Path, name: str, entries: dict[TopicPartition, int]
    ) -> None:
        """Replace the offset checkpoint `name` of `log_dir` with `entries`, through the
        syncer: after every fsync asked for before, and off the event loop."""
        data = format_offset_checkpoint(entries)
        dir_fd = open_dir(log_dir)
        self.syncer.submit(log_dir, lambda: atomic_write_in(dir_fd, name, data))

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint log start offsets, then write the
        clean-shutdown markers (only after everything else is durable). The logs are made
        durable by one sync(2) after they are all closed (fileio.one_sync): a crash before
        the markers are written means a recovery at the next start, which checks and
        rebuilds every file closing writes."""
        if self._in_use_elsewhere:
            return
        self.syncer.stop()
        with one_sync():
            for plog in self._logs.values():
                plog.close()
        failed = {log_dir for log_dir, _ in self._checkpoint_all(only_if_changed=False)}
        self.syncer.stop()
        # A write the syncer could not make (a checkpoint, a log's fsync) leaves its
        # directory's state not durable, as a failed checkpoint here does.
        failed |= self.syncer.failed_dirs
        self._logs.clear()
        for log_dir in self._dirs:
            if log_dir in failed:
                # Its checkpoints are not durable: the next start recovers the directory.
                log.error("log directory %s: checkpoints not written at shutdown", log_dir)
                continue
            log_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(log_dir / CLEAN_SHUTDOWN_FILE, b"")
        self._release_locks()
