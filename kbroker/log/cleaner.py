"""The log cleaner: compaction of logs whose cleanup.policy includes "compact".

Kafka's design, step by step:
1. Choice (event loop thread, `grab_filthiest`): for each compacted log, the cleanable range
   is [log start, first uncleanable offset) where the first uncleanable offset is the lowest
   of the active segment's base offset (the active segment is never cleaned), the last
   stable offset (below the high watermark, and no undecided transaction), and the base of
   the first segment holding a record newer than min.compaction.lag.ms. Only whole segments
   below it are cleanable. The part from the first dirty offset (the cleaner checkpoint) on
   is the dirty head; the dirty ratio is dirty bytes / cleanable bytes. The log with the
   highest ratio above min.cleanable.dirty.ratio is cleaned; so is a log whose dirty head is
   older than max.compaction.lag.ms, or whose earliest tombstone delete horizon has passed.
2. Map (cleaner thread, `build`): key -> last offset over the dirty head, whole segments
   only, bounded by log.cleaner.dedupe.buffer.size (24 bytes an entry, as Kafka counts,
   times log.cleaner.io.buffer.load.factor, shared by the cleaner threads). Records of
   aborted transactions (the aborted-transaction indexes, read on the loop thread when
   planning) are left out.
3. Rewrite (cleaner thread): the segments from the log start to the end of the mapped range,
   grouped so that each group's output fits one segment (segment.bytes, the index size,
   an int32 offset range), are rewritten into `<base>.*.cleaned` files keeping what
   compaction.py's rules keep; indexes are rebuilt for the new files (the aborted-transaction
   index from the abort markers kept), everything fsynced.
   Reads go through the cleaner's own file descriptors, so retention on the event loop
   can never pull a file from under it. Reading and writing are throttled to
   log.cleaner.io.max.bytes.per.second over all cleaner threads.
4. Swap (event loop thread, `install`): if every segment of the plan is still in the log,
   each group is replaced through swap.py's crash-safe steps; otherwise the clean is
   abandoned and its files deleted. The first dirty offset becomes the end of the mapped
   range and is checkpointed.

File format of `cleaner-offset-checkpoint` (one per log dir, Kafka's): the text format of
log_manager.py's checkpoints, `<topic> <partition> <first dirty offset>` lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbroker.log.compaction import (
    ActiveProducer,
    CleanedTransactions,
    encode_batch,
    filter_batch,
)
from kbroker.log.fileio import fsync_dir, unlink_quietly, write_all
from kbroker.log.log_config import LONG_MAX
from kbroker.log.log_manager import LogManager, TopicPartition, read_offset_checkpoint
from kbroker.log.log_manager import write_offset_checkpoint as write_checkpoint
from kbroker.log.offset_index import OffsetIndex
from kbroker.log.partition_log import PartitionLog
from kbroker.log.segment import (
    CLEANED_SUFFIX,
    INT32_MAX,
    SCAN_CHUNK,
    LogSegment,
    scan_batches,
    txn_index_path,
)
from kbroker.log.time_index import TimeIndex
from kbroker.log.txn_index import TxnIndex
from kbroker.producer_state import AbortedTxn
from wire.records.batch import BatchHeader, read_header
from wire.records.compression import DecompressionLimitError
from wire.records.record import decode_batch

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
# Kafka sizes the dedupe map at 24 bytes an entry (a 16-byte key hash and an 8-byte offset).
MAP_ENTRY_BYTES = 24


class CleanAborted(Exception):
    """The cleaner is stopping, or a segment it planned to read is gone."""


@dataclass(frozen=True)
class CleanerConfig:
    """Broker-level cleaner settings (Kafka's log.cleaner.* properties)."""

    enable: bool = True
    threads: int = 1
    io_max_bytes_per_second: float = math.inf
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_load_factor: float = 0.9
    backoff_ms: int = 15_000

    @classmethod
    def from_broker(cls, get: Callable[[str], Any]) -> CleanerConfig:
        """From a BrokerConfig's `get(name)`."""
        return cls(
            enable=bool(get("log.cleaner.enable")),
            threads=int(get("log.cleaner.threads")),
            io_max_bytes_per_second=float(get("log.cleaner.io.max.bytes.per.second")),
            dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size")),
            io_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor")),
            backoff_ms=int(get("log.cleaner.backoff.ms")),
        )

    @property
    def max_map_entries(self) -> int:
        per_thread = self.dedupe_buffer_size / max(1, self.threads)
        return max(1, int(per_thread * self.io_buffer_load_factor / MAP_ENTRY_BYTES))


class Throttler:
    """Bounds the IO rate of every thread sharing it (bytes per second): each `acquire`
    reserves time on a shared schedule and sleeps until its reservation starts."""

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next = 0.0

    def acquire(self, nbytes: int) -> None:
        if math.isinf(self.rate) or nbytes <= 0:
            return
        with self._lock:
            now = self._clock()
            start = max(self._next, now)
            self._next = start + nbytes / self.rate
        if start > now:
            self._sleep(start - now)


@dataclass(frozen=True)
class SegmentRef:
    """What the cleaner thread needs of one sealed segment (read on the loop thread)."""

    segment: LogSegment
    base_offset: int
    end_offset: int  # the next segment's base offset
    size: int
    path: Path
    aborted: tuple[AbortedTxn, ...]  # the aborted transactions overlapping it


@dataclass
class CleanPlan:
    """One clean of one log, decided on the event loop."""

    tp: TopicPartition
    plog: PartitionLog
    first_dirty: int
    cleanable: list[SegmentRef]  # from the log start to the first uncleanable offset
    dirty_index: int  # cleanable[dirty_index:] is the dirty head
    producers: dict[int, ActiveProducer]
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_bytes: int
    index_interval_bytes: int
    # Bounds decompression (wire.records.compression.decompression_cap).
    max_message_bytes: int


@dataclass
class CleanResult:
    """Files written by `build`, waiting for `install`."""

    plan: CleanPlan
    groups: list[list[SegmentRef]]
    next_dirty: int
    min_delete_horizon: int | None
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    cleaned_files: list[Path] = field(default_factory=list)


@dataclass
class CleanerStats:
    cleans: int = 0
    aborted: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0


def group_segments(
    refs: list[SegmentRef], *, segment_bytes: int, index_bytes: int, index_interval_bytes: int
) -> list[list[SegmentRef]]:
    """Consecutive segments whose cleaned output surely fits one segment: total size within
    segment.bytes, offsets within an int32 of the base, index entries (at most one per
    index.interval.bytes, 12 bytes each in the time index) within segment.index.bytes."""
    groups: list[list[SegmentRef]] = []
    for ref in refs:
        if groups:
            group = groups[-1]
            size = sum(r.size for r in group) + ref.size
            entries = size // max(1, index_interval_bytes) + len(group) + 2
            if (
                size <= segment_bytes
                and ref.end_offset - 1 - group[0].base_offset <= INT32_MAX
                and entries * 12 <= index_bytes
            ):
                group.append(ref)
                continue
        groups.append([ref])
    return groups


class LogCleaner:
    """Compacts the logs of a LogManager: `start()`/`stop()` run it as a service on the
    event loop (log.cleaner.threads workers), `clean_once()` and `clean_log()` are
    synchronous passes (tests, tools)."""

    def __init__(
        self,
        logs: LogManager,
        config: CleanerConfig,
        *,
        stable_offset: Callable[[TopicPartition], int | None] = lambda _tp: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`stable_offset(tp)`, the last stable offset, bounds the cleanable range (None: the
        log end offset)."""
        self.logs = logs
        self.config = config
        self._stable_offset = stable_offset
        self._clock = clock
        self.throttler = Throttler(config.io_max_bytes_per_second)
        self.stats = CleanerStats()
        self._first_dirty: dict[TopicPartition, int] = {}
        for log_dir in logs.dirs:
            self._first_dirty.update(read_offset_checkpoint(log_dir / CHECKPOINT_FILE))
        self._horizons: dict[TopicPartition, int] = {}
        # The log object each first dirty offset was recorded for (none for checkpointed
        # ones), to notice a log deleted and created again.
        self._owners: dict[TopicPartition, PartitionLog] = {}
        self._in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        self._abort = threading.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._pool: ThreadPoolExecutor | None = None
        # Started as a service (with or without workers): reconfigure() starts it again.
        self._serving = False

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # Choosing -------------------------------------------------------------------------

    def first_dirty_offset(self, tp: TopicPartition, plog: PartitionLog) -> int:
        """Where the dirty head of the log starts (the checkpoint, within the log)."""
        owner = self._owners.get(tp)
        if owner is not None and owner is not plog:  # deleted and created again since
            self._first_dirty.pop(tp, None)
            self._owners.pop(tp, None)
        offset = self._first_dirty.get(tp, plog.log_start_offset)
        if offset > plog.log_end_offset:  # the log was recreated: start over
            offset = plog.log_start_offset
        return max(offset, plog.log_start_offset)

    def plan_for(
        self, tp: TopicPartition, plog: PartitionLog, *, force: bool = False
    ) -> tuple[float, CleanPlan] | None:
        """(dirty ratio, plan) when the log needs cleaning (or has anything cleanable, with
        `force`); None otherwise."""
        config = plog.config
        if "compact" not in config.cleanup_policy:
            return None
        now_ms = self._now_ms()
        segments = plog.segments()
        stable = self._stable_offset(tp)
        uncleanable = segments[-1].base_offset
        if stable is not None:
            uncleanable = min(uncleanable, stable)
        first_dirty = self.first_dirty_offset(tp, plog)
        refs: list[SegmentRef] = []
        for segment, following in zip(segments, segments[1:], strict=False):
            end = following.base_offset
            if end > uncleanable:
                break
            if (
                config.min_compaction_lag_ms > 0
                and end > first_dirty
                and now_ms - segment.largest_timestamp < config.min_compaction_lag_ms
            ):
                break
            ref = SegmentRef(
                segment,
                segment.base_offset,
                end,
                segment.size,
                segment.log_path,
                tuple(plog.aborted_transactions(segment.base_offset, end)),
            )
            refs.append(ref)
        if not refs:
            return None
        dirty_index = next((i for i, r in enumerate(refs) if r.end_offset > first_dirty), len(refs))
        dirty_bytes = sum(r.size for r in refs[dirty_index:])
        total = sum(r.size for r in refs)
        ratio = dirty_bytes / total if total else 0.0
        due = force or ratio > config.min_cleanable_dirty_ratio
        if not due and dirty_index < len(refs) and config.max_compaction_lag_ms < LONG_MAX:
            first = refs[dirty_index].segment.rolling_timestamp
            due = first is not None and now_ms - first > config.max_compaction_lag_ms
        horizon = self._horizons.get(tp)
        if not due and horizon is not None and now_ms >= horizon:
            due = True
        if not due:
            return None
        producers = {
            pid: ActiveProducer(
                entry.epoch, entry.batches[-1].last_offset if entry.batches else None
            )
            for pid, entry in plog.producers.entries().items()
        }
        plan = CleanPlan(
            tp=tp,
            plog=plog,
            first_dirty=first_dirty,
            cleanable=refs,
            dirty_index=dirty_index,
            producers=producers,
            now_ms=now_ms,
            delete_retention_ms=config.delete_retention_ms,
            segment_bytes=config.segment_bytes,
            index_bytes=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            max_message_bytes=config.max_message_bytes,
        )
        return ratio, plan

    def grab_filthiest(self) -> CleanPlan | None:
        """The plan for the log that most needs cleaning (marked in progress), or None."""
        best: tuple[float, CleanPlan] | None = None
        for tp, plog in self.logs.logs().items():
            if tp in self._in_progress or tp in self.uncleanable:
                continue
            found = self.plan_for(tp, plog)
            if found is not None and (best is None or found[0] > best[0]):
                best = found
        if best is None:
            return None
        self._in_progress.add(best[1].tp)
        return best[1]

    # Building (cleaner thread) ----------------------------------------------------------

    def _read_batches(self, ref: SegmentRef) -> Iterator[tuple[BatchHeader, memoryview]]:
        """The planned batches of a segment, read through the cleaner's own descriptor
        (throttled; raises CleanAborted when the cleaner stops or the file is gone)."""
        try:
            fd = os.open(ref.path, os.O_RDONLY)
        except FileNotFoundError as exc:
            raise CleanAborted(f"{ref.path} is gone") from exc
        try:
            for _, header, data in scan_batches(fd, 0, ref.size, chunk=SCAN_CHUNK, with_bytes=True):
                if self._abort.is_set():
                    raise CleanAborted("the cleaner is stopping")
                self.throttler.acquire(header.size)
                assert data is not None
                yield header, data
        finally:
            os.close(fd)

    def build(self, plan: CleanPlan) -> CleanResult:
        """Steps 2 and 3 (see the module docstring); runs in a cleaner thread."""
        latest: dict[bytes, int] = {}
        mapped_end = plan.first_dirty
        bytes_read = 0
        limit = self.config.max_map_entries
        dirty = plan.cleanable[plan.dirty_index :]
        transactions = CleanedTransactions.of(t for ref in dirty for t in ref.aborted)
        for ref in dirty:
            if latest and len(latest) >= limit:
                break
            bytes_read += ref.size
            for header, batch in self._read_batches(ref):
                if header.is_control:
                    transactions.on_control_batch(header, batch)
                    continue
                if transactions.on_data_batch(header):
                    continue  # aborted records never enter the map
                try:
                    _, records = decode_batch(batch, max_message_bytes=plan.max_message_bytes)
                except DecompressionLimitError as exc:
                    # Its keys stay unmapped, and filter_batch keeps the batch as it is.
                    log.error(
                        "%s: skipping batch at offset %d: %s", plan.tp, header.base_offset, exc
                    )
                    continue
                for record in records:
                    if record.key is not None:
                        latest[record.key] = record.offset
            mapped_end = ref.end_offset
        to_clean = [r for r in plan.cleanable if r.base_offset < mapped_end]
        if not to_clean:  # nothing dirty: a pass to drop tombstones whose horizon passed
            to_clean = list(plan.cleanable)
            mapped_end = max(plan.first_dirty, to_clean[-1].end_offset)
        groups = group_segments(
            to_clean,
            segment_bytes=plan.segment_bytes,
            index_bytes=plan.index_bytes,
            index_interval_bytes=plan.index_interval_bytes,
        )
        result = CleanResult(plan, groups, mapped_end, None, bytes_read=bytes_read)
        try:
            for group in groups:
                self._write_group(plan, group, latest, result)
        except BaseException:
            for path in result.cleaned_files:
                unlink_quietly(path)
            raise
        return result

    def _write_group(
        self,
        plan: CleanPlan,
        group: list[SegmentRef],
        latest: dict[bytes, int],
        result: CleanResult,
    ) -> None:
        base = group[0].base_offset
        directory = plan.plog.directory
        log_path, index_path, time_path = LogSegment.paths(directory, base, CLEANED_SUFFIX)
        result.cleaned_files += [log_path, index_path, time_path]
        input_max_ts = -1
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            out = _SegmentWriter(fd, base, plan.index_interval_bytes, self.throttler)
            transactions = CleanedTransactions.of(t for ref in group for t in ref.aborted)
            dropped_last: BatchHeader | None = None
            for ref in group:
                result.bytes_read += ref.size
                for header, batch in self._read_batches(ref):
                    input_max_ts = max(input_max_ts, header.max_timestamp)
                    filtered = filter_batch(
                        batch,
                        header,
                        latest=latest,
                        producers=plan.producers,
                        transactions=transactions,
                        now_ms=plan.now_ms,
                        delete_retention_ms=plan.delete_retention_ms,
                        max_message_bytes=plan.max_message_bytes,
                    )
                    result.records_removed += filtered.records_removed
                    if filtered.delete_horizon_ms is not None:
                        result.min_delete_horizon = min(
                            filtered.delete_horizon_ms,
                            result.min_delete_horizon or filtered.delete_horizon_ms,
                        )
                    if filtered.data is None:
                        dropped_last = header
                        continue
                    dropped_last = None
                    out.add(header if filtered.data is batch else None, filtered.data)
            if dropped_last is not None:
                # The group's last batch stays, empty: the cleaned segment then ends where
                # the group ended, which is how start-up recovery (swap.py) tells which old
                # segments a swap replaces.
                out.add(None, encode_batch(dropped_last, [], delete_horizon_ms=None))
            out.flush()
            result.bytes_written += out.position
            os.fsync(fd)
        finally:
            os.close(fd)
        # Kafka gives the cleaned segment the age of its inputs (their newest record, else
        # their newest modification time), so time-based retention of an emptied segment,
        # which falls back on the file's mtime, sees the same age as before.
        if input_max_ts < 0:
            input_max_ts = max(int(os.stat(r.path).st_mtime * 1000) for r in group)
        os.utime(log_path, ns=(input_max_ts * 1_000_000, input_max_ts * 1_000_000))
        OffsetIndex(index_path, base, plan.index_bytes).replace(out.index_entries)
        TimeIndex(time_path, base, plan.index_bytes).replace(out.final_time_entries())
        txn_path = txn_index_path(directory, base, CLEANED_SUFFIX)
        result.cleaned_files.append(txn_path)
        TxnIndex(txn_path).replace(transactions.cleaned_index)
        fsync_dir(directory)

    # Installing (event loop thread) -----------------------------------------------------

    def install(self, result: CleanResult, step_done: Callable[[int], None] | None = None) -> bool:
        """Step 4; returns False (and deletes the cleaned files) when the log changed."""
        plan = result.plan
        try:
            plog = plan.plog
            current = plog.segments()
            if self.logs.get(*plan.tp) is not plog or not all(
                any(ref.segment is s for s in current[:-1]) for g in result.groups for ref in g
            ):
                for path in result.cleaned_files:
                    unlink_quietly(path)
                self.stats.aborted += 1
                log.info("%s-%d: log changed while cleaning, clean abandoned", *plan.tp)
                return False
            for group in result.groups:
                plog.replace_with_cleaned(
                    [ref.segment for ref in group], step_done or (lambda _step: None)
                )
            self._first_dirty[plan.tp] = result.next_dirty
            self._owners[plan.tp] = plog
            if result.min_delete_horizon is not None:
                self._horizons[plan.tp] = result.min_delete_horizon
            else:
                self._horizons.pop(plan.tp, None)
            self._write_checkpoint(plog.directory.parent)
            self.stats.cleans += 1
            self.stats.bytes_read += result.bytes_read
            self.stats.bytes_written += result.bytes_written
            self.stats.records_removed += result.records_removed
            log.info(
                "%s-%d: cleaned %d segments into %d, %d records removed, %d -> %d bytes",
                *plan.tp,
                sum(len(g) for g in result.groups),
                len(result.groups),
                result.records_removed,
                sum(r.size for g in result.groups for r in g),
                result.bytes_written,
            )
            return True
        finally:
            self._in_progress.discard(plan.tp)

    def _write_checkpoint(self, log_dir: Path) -> None:
        entries = {
            tp: offset
            for tp, offset in self._first_dirty.items()
            if (plog := self.logs.get(*tp)) is not None and plog.directory.parent == log_dir
        }
        write_checkpoint(log_dir / CHECKPOINT_FILE, entries)

    def clean_once(self) -> bool:
        """Clean the filthiest log now, on this thread; False when none needed it."""
        plan = self.grab_filthiest()
        if plan is None:
            return False
        try:
            result = self.build(plan)
        except BaseException:
            self._in_progress.discard(plan.tp)
            raise
        return self.install(result)

    def clean_log(self, topic: str, partition: int, *, force: bool = True) -> bool:
        """Clean one log now (whatever its dirty ratio with `force`), on this thread."""
        plog = self.logs.get(topic, partition)
        found = None if plog is None else self.plan_for((topic, partition), plog, force=force)
        if found is None:
            return False
        self._in_progress.add((topic, partition))
        try:
            result = self.build(found[1])
        except BaseException:
            self._in_progress.discard((topic, partition))
            raise
        return self.install(result)

    # Service ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start log.cleaner.threads workers on the running event loop."""
        self._serving = True
        if not self.config.enable or self.config.threads <= 0:
            return
        self._abort.clear()
        self._pool = ThreadPoolExecutor(self.config.threads, thread_name_prefix="log-cleaner")
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._worker()) for _ in range(self.config.threads)]

    async def _worker(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            plan = self.grab_filthiest()
            if plan is None:
                await asyncio.sleep(self.config.backoff_ms / 1000)
                continue
            try:
                result = await loop.run_in_executor(self._pool, self.build, plan)
            except CleanAborted as exc:
                self._in_progress.discard(plan.tp)
                self.stats.aborted += 1
                log.info("%s-%d: clean aborted: %s", *plan.tp, exc)
                continue
            except Exception:
                self._in_progress.discard(plan.tp)
                if self.logs.get(*plan.tp) is not plan.plog:
                    log.info("%s-%d: log deleted while cleaning", *plan.tp)
                    continue
                # As Kafka does, a log the cleaner fails on (e.g. a corrupt batch in a sealed
                # segment) is left alone until the next start-up instead of failing forever.
                log.exception("%s-%d: cleaning failed, log marked uncleanable", *plan.tp)
                self.uncleanable.add(plan.tp)
                continue
            self.install(result)

    async def reconfigure(self, config: CleanerConfig) -> None:
        """Run with new settings (dynamic log.cleaner.* configs, KIP-226): as Kafka's cleaner
        does, the workers stop (a clean in progress is abandoned and done again later) and
        start again with the new number of threads, IO rate and dedupe buffer."""
        running = self._serving
        await self.stop()
        self.config = config
        self.throttler = Throttler(config.io_max_bytes_per_second)
        if running:
            self.start()
        log.info(
            "log cleaner reconfigured: %d threads, %s bytes/s, dedupe buffer %d bytes",
            config.threads if config.enable else 0,
            config.io_max_bytes_per_second,
            config.dedupe_buffer_size,
        )

    async def stop(self) -> None:
        """Stop the workers; a clean in progress is abandoned (its files are removed here
        or at the next start-up)."""
        self._serving = False
        self._abort.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class _SegmentWriter:
    """Writes a cleaned segment's batches in large chunks and builds its indexes the way
    segment.py does for appends (one entry after more than index.interval.bytes)."""

    def __init__(self, fd: int, base: int, index_interval_bytes: int, throttler: Throttler):
        self.fd = fd
        self.index_interval_bytes = index_interval_bytes
        self.throttler = throttler
        self.position = 0
        self.index_entries: list[tuple[int, int]] = []
        self.time_entries: list[tuple[int, int]] = []
        self.max_ts, self.offset_of_max = -1, base
        self._last_indexed = 0
        self._out: list[bytes | memoryview] = []
        self._pending = 0

    def add(self, header: BatchHeader | None, data: bytes | memoryview) -> None:
        """Append one batch (`header` is None when it must be read from `data`)."""
        if header is None:
            header = read_header(data)
        if header.max_timestamp > self.max_ts:
            self.max_ts, self.offset_of_max = header.max_timestamp, header.last_offset
        if self.position - self._last_indexed > self.index_interval_bytes:
            self.index_entries.append((header.last_offset, self.position))
            if not self.time_entries or self.max_ts > self.time_entries[-1][0]:
                self.time_entries.append((self.max_ts, self.offset_of_max))
            self._last_indexed = self.position
        self._out.append(data)
        self.position += len(data)
        self._pending += len(data)
        if self._pending >= SCAN_CHUNK:
            self.flush()

    def flush(self) -> None:
        chunk = b"".join(self._out)
        self._out.clear()
        self._pending = 0
        self.throttler.acquire(len(chunk))
        write_all(self.fd, chunk)

    def final_time_entries(self) -> list[tuple[int, int]]:
        """The time index entries plus the sealed segment's final (max timestamp) entry."""
        entries = list(self.time_entries)
        if self.max_ts != -1 and (not entries or self.max_ts > entries[-1][0]):
            entries.append((self.max_ts, self.offset_of_max))
        return entries
