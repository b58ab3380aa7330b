"""One log segment: `<20-digit base offset>.log` plus its `.index` and `.timeindex`, and a
`.txnindex` when it holds abort markers.

The `.log` file is a plain concatenation of RecordBatch v2 batches (the wire format, offsets
and leader epochs already assigned), exactly as Kafka stores them; the first batch's base
offset is the segment's base offset, the file name. The file is append-only: each append is
one os.write of whole batches on an unbuffered file, so appended bytes are visible to
os.pread/sendfile at once. Only headers are ever parsed here (61 bytes per batch); records
stay opaque (partition_log.py decodes one batch for a timestamp lookup).

The indexes are documented in offset_index.py, time_index.py and txn_index.py.

Suffixes appended to a segment's file names during its lifecycle:
- `.deleted`: the segment left the log (retention, DeleteRecords, truncation, replaced by a
  cleaned segment); the files are unlinked after `file.delete.delay.ms` (the open `.log`
  may still back fetch responses) or at the next start-up;
- `.cleaned`: a segment being written by the log cleaner (cleaner.py), deleted at start-up;
- `.swap`: a finished cleaned segment waiting to replace the segments it covers; start-up
  completes the replacement (cleaner.py describes the steps).

After a clean shutdown, sealed segments are opened lazily (`LazySegment`): only their size
is read at start-up; files and indexes are opened, and checked, on first use.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from kbroker.log.fileio import fsync, pread_exact, unlink_quietly, write_all
from kbroker.log.log_config import LogConfig
from kbroker.log.offset_index import OffsetIndex
from kbroker.log.time_index import NO_TIMESTAMP, TimeIndex
from kbroker.log.txn_index import SUFFIX as TXNINDEX_SUFFIX
from kbroker.log.txn_index import TxnIndex
from wire.errors import DecodeError, KafkaError
from wire.records.batch import BATCH_HEADER_SIZE, BatchHeader, read_header, validate_batch

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
INT32_MAX = 0x7FFFFFFF
# pread sizes: small for the header walks of reads, large for the full scans of recovery.
READ_CHUNK = 4096
SCAN_CHUNK = 1 << 20


def file_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def txn_index_path(directory: Path, base_offset: int, extra: str = "") -> Path:
    """The .txnindex path of a segment, with `extra` appended."""
    return directory / (file_stem(base_offset) + TXNINDEX_SUFFIX + extra)


def _sane(header: BatchHeader) -> bool:
    return header.magic == 2 and header.size >= BATCH_HEADER_SIZE


def scan_batches(
    fd: int, start: int, end: int, *, chunk: int = READ_CHUNK, with_bytes: bool = False
) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
    """Yield (position, header, batch bytes if `with_bytes`) for the whole batches in
    [start, end) of a segment file, stopping at a partial batch or a header that cannot be a
    v2 batch (a torn or garbage tail)."""
    buf = memoryview(b"")
    buf_pos = start
    pos = start
    while end - pos >= BATCH_HEADER_SIZE:
        off = pos - buf_pos
        if off + BATCH_HEADER_SIZE > len(buf):
            buf = memoryview(pread_exact(fd, min(chunk, end - pos), pos))
            buf_pos, off = pos, 0
            if len(buf) < BATCH_HEADER_SIZE:
                return
        header = read_header(buf, off)
        if not _sane(header) or pos + header.size > end:
            return
        data = None
        if with_bytes:
            if off + header.size <= len(buf):
                data = buf[off : off + header.size]
            elif header.size > chunk:
                data = memoryview(pread_exact(fd, header.size, pos))
            else:
                buf = memoryview(pread_exact(fd, min(chunk, end - pos), pos))
                buf_pos = pos
                data = buf[: header.size]
            if len(data) < header.size:
                return
        yield pos, header, data
        pos += header.size


class LogSegment:
    """A segment file and its two indexes."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        file: BinaryIO,
        index: OffsetIndex,
        time_index: TimeIndex,
        created_ms: int,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.file = file
        self.index = index
        self.time_index = time_index
        self.txn_index = TxnIndex(txn_index_path(directory, base_offset))
        self.created_ms = created_ms
        self.size = os.fstat(file.fileno()).st_size
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        # Max timestamp of the first batch: segment.ms age is measured from it (Kafka's
        # rolling-based timestamp), else from the segment's creation.
        self.rolling_timestamp: int | None = None
        self._last_indexed_position = 0
        self.dirty = False
        # Set by open() when the file does not end with a whole batch.
        self.tail_problem: str | None = None

    @property
    def loaded(self) -> bool:
        """False for a LazySegment not opened yet."""
        return True

    @property
    def log_path(self) -> Path:
        return self.directory / (file_stem(self.base_offset) + LOG_SUFFIX)

    @property
    def fd(self) -> int:
        return self.file.fileno()

    @staticmethod
    def _paths(directory: Path, base_offset: int, extra: str = "") -> tuple[Path, Path, Path]:
        stem = file_stem(base_offset)
        return (
            directory / (stem + LOG_SUFFIX + extra),
            directory / (stem + INDEX_SUFFIX + extra),
            directory / (stem + TIMEINDEX_SUFFIX + extra),
        )

    @classmethod
    def paths(cls, directory: Path, base_offset: int, extra: str = "") -> tuple[Path, Path, Path]:
        """The .log, .index and .timeindex paths of a segment, with `extra` appended."""
        return cls._paths(directory, base_offset, extra)

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int
    ) -> LogSegment:
        """A new empty segment (existing files of that name are emptied). The caller makes
        the directory durable (an fsync of it, in the background: background_sync.py)."""
        log_path, index_path, time_path = cls._paths(directory, base_offset)
        open(log_path, "wb").close()
        unlink_quietly(txn_index_path(directory, base_offset))
        file = open(log_path, "a+b", buffering=0)
        segment = cls(
            directory,
            base_offset,
            config,
            file,
            OffsetIndex.create(index_path, base_offset, config.segment_index_bytes),
            TimeIndex.create(time_path, base_offset, config.segment_index_bytes),
            now_ms,
        )
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """Open an existing segment, trusting its indexes when they pass the sanity checks
        (see `needs_rebuild`); the log end is found by walking headers from the last index
        entry."""
        log_path, index_path, time_path = cls._paths(directory, base_offset)
        file = open(log_path, "a+b", buffering=0)
        index = OffsetIndex.open(index_path, base_offset, config.segment_index_bytes)
        time_index = TimeIndex.open(time_path, base_offset, config.segment_index_bytes)
        segment = cls(directory, base_offset, config, file, index, time_index, now_ms)
        index.check_against(segment.size)
        start = index.last_position if index.problem is None else 0
        next_offset = base_offset
        end = start
        for pos, header, _ in scan_batches(segment.fd, start, segment.size):
            next_offset = header.next_offset
            end = pos + header.size
        if start > 0 and next_offset == base_offset:
            index.problem = "last entry does not point at a batch"
        if end != segment.size:
            segment.tail_problem = f"partial or invalid batch at position {end}"
        segment.next_offset = next_offset
        time_index.check_against(next_offset)
        segment.max_timestamp, segment.offset_of_max_timestamp = time_index.last_entry()
        segment._last_indexed_position = index.last_position
        segment._load_rolling_timestamp()
        return segment

    def _load_rolling_timestamp(self) -> None:
        self.rolling_timestamp = None
        for _, header, _ in scan_batches(self.fd, 0, self.size):
            self.rolling_timestamp = header.max_timestamp
            break

    @property
    def largest_timestamp(self) -> int:
        """Max timestamp for retention: the batches' max, else the file's modification time
        (Kafka's fallback for segments without timestamps)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.fd).st_mtime * 1000)

    @property
    def needs_rebuild(self) -> bool:
        return (
            self.index.problem is not None
            or self.time_index.problem is not None
            or self.tail_problem is not None
        )

    # Appending -------------------------------------------------------------------------

    def append(
        self, data: bytes | bytearray | memoryview, batches: list[BatchHeader], positions: list[int]
    ) -> None:
        """Append whole batches (`data`); `batches`/`positions` are their final headers and
        positions within `data`."""
        start = self.size
        try:
            write_all(self.fd, data)
        except OSError:
            # A failed write (ENOSPC, EIO) may have left part of the data: cut it off, so the
            # file still ends on a whole batch and the next append (O_APPEND) lands at `size`.
            os.ftruncate(self.fd, start)
            raise
        self.size += len(data)
        self.dirty = True
        for header, rel in zip(batches, positions, strict=True):
            self._account(header, start + rel)

    def _account(self, header: BatchHeader, position: int) -> None:
        """Update indexes and timestamps for one batch written at `position`."""
        if position == 0:
            self.rolling_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        # Kafka's rule: index a batch once more than index.interval.bytes lie between it and
        # the previously indexed batch.
        if position - self._last_indexed_position > self.config.index_interval_bytes:
            self.index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._last_indexed_position = position
        self.next_offset = header.next_offset

    def should_roll(
        self, append_bytes: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """Whether an append must go to a new segment (Kafka's LogSegment.shouldRoll)."""
        if self.size == 0:
            return False
        if self.size > self.config.segment_bytes - append_bytes:
            return True
        if self.rolling_timestamp is not None and self.rolling_timestamp >= 0:
            waited = max_timestamp - self.rolling_timestamp
        else:
            waited = now_ms - self.created_ms
        if waited > self.config.segment_ms - self.config.segment_jitter_ms:
            return True
        return self.index.is_full or self.time_index.is_full or not self.index.fits(last_offset)

    # Reading ---------------------------------------------------------------------------

    def batches_from(
        self, position: int, *, chunk: int = READ_CHUNK
    ) -> Iterator[tuple[int, BatchHeader]]:
        for pos, header, _ in scan_batches(self.fd, position, self.size, chunk=chunk):
            yield pos, header

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset` (through the offset index)."""
        _, position = self.index.lookup(offset)
        for pos, header in self.batches_from(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def find_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch with max timestamp >= `timestamp` and offsets >= `min_offset`."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, position = self.index.lookup(max(ts_offset, min_offset))
        for pos, header in self.batches_from(position):
            if header.max_timestamp >= timestamp and header.last_offset >= min_offset:
                return pos, header
        return None

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return pread_exact(self.fd, header.size, position)

    # Recovery and truncation -------------------------------------------------------------

    def recover(self, on_batch: Callable[[BatchHeader], None]) -> int:
        """Validate every batch (header sanity, offsets, CRC-32C), truncate at the first bad
        one, rebuild both indexes; returns the number of bytes truncated."""
        valid_end = 0
        expected = self.base_offset
        index_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self.rolling_timestamp = None
        last_indexed = 0
        self.next_offset = self.base_offset
        # After a crash the scanned bytes may be in the page cache only: the next flush
        # fsyncs them (flush skips clean segments).
        self.dirty = True
        for pos, header, data in scan_batches(
            self.fd, 0, self.size, chunk=SCAN_CHUNK, with_bytes=True
        ):
            if header.base_offset < expected or header.last_offset_delta < 0:
                log.warning(
                    "%s: non-monotonic offset %d at position %d",
                    self.log_path,
                    header.base_offset,
                    pos,
                )
                break
            if header.last_offset - self.base_offset > INT32_MAX:
                log.warning(
                    "%s: offset %d out of the segment's range", self.log_path, header.last_offset
                )
                break
            try:
                assert data is not None
                validate_batch(data, 0, header)
            except (KafkaError, DecodeError) as exc:
                log.warning("%s: corrupt batch at position %d: %s", self.log_path, pos, exc)
                break
            if pos == 0:
                self.rolling_timestamp = header.max_timestamp
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            if pos - last_indexed > self.config.index_interval_bytes:
                if len(index_entries) < self.index.max_entries:
                    index_entries.append((header.last_offset, pos))
                if len(time_entries) < self.time_index.max_entries and (
                    not time_entries or self.max_timestamp > time_entries[-1][0]
                ):
                    time_entries.append((self.max_timestamp, self.offset_of_max_timestamp))
                last_indexed = pos
            on_batch(header)
            expected = header.next_offset
            self.next_offset = header.next_offset
            valid_end = pos + header.size
        truncated = self.size - valid_end
        if truncated:
            log.warning(
                "%s: truncating %d bytes of invalid or torn data at position %d",
                self.log_path,
                truncated,
                valid_end,
            )
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
        self.index.replace(index_entries)
        self.time_index.replace(time_entries)
        self.tail_problem = None
        self._last_indexed_position = last_indexed
        return truncated

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is >= `offset` (whole batches only)."""
        found = self.find_batch(offset)
        if found is None:
            return
        position, _ = found
        os.ftruncate(self.fd, position)
        self.size = position
        self.dirty = True
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # Recompute the tail state from the last surviving index entry.
        self._last_indexed_position = self.index.last_position
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        _, ts_position = self.index.lookup(self.offset_of_max_timestamp)
        self.next_offset = self.base_offset
        for _, header in self.batches_from(
            min(ts_position, self.index.last_position), chunk=SCAN_CHUNK
        ):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            self.next_offset = header.next_offset
        if self.size == 0:
            self.rolling_timestamp = None

    # Lifecycle -------------------------------------------------------------------------

    def seal(self) -> None:
        """The segment stops being active: record its max timestamp as the final time index
        entry (so it can be read back on open) and make everything durable."""
        self._finish_time_index()
        self.flush()

    def seal_unsynced(self) -> list[int]:
        """`seal`, leaving the fsyncs to the caller: the descriptors to fsync (see
        `take_unsynced`)."""
        self._finish_time_index()
        return self.take_unsynced()

    def _finish_time_index(self) -> None:
        if self.max_timestamp != NO_TIMESTAMP:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )

    def take_unsynced(self) -> list[int]:
        """Descriptors of the files written since their last fsync (duplicates, or opened
        anew: the caller fsyncs and closes them, in the background, even after this segment
        closed its own); the segment counts as synced from then on."""
        fds = [os.dup(self.fd)] if self.dirty else []
        self.dirty = False
        for index in (self.index, self.time_index, self.txn_index):
            fd = index.take_unsynced()
            if fd is not None:
                fds.append(fd)
        return fds

    def flush(self) -> None:
        # A clean segment was fsynced since its last write: at 10,000 partitions a clean
        # shutdown spent most of its time in fsyncs of unchanged files.
        if self.dirty:
            fsync(self.fd)
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        self.dirty = False

    def close(self) -> None:
        self.index.close()
        self.time_index.close()
        self.file.close()

    def close_indexes(self) -> None:
        self.index.close()
        self.time_index.close()

    def rename_to_deleted(self) -> list[Path]:
        """Rename the three files to `<name>.deleted` (the .log stays open for fetches in
        flight), close the indexes; returns the renamed paths, to unlink later."""
        self.close_indexes()
        return rename_segment_files(self.directory, self.base_offset, "", DELETED_SUFFIX)

    def delete_files(self) -> None:
        """Unlink the files; the .log stays open (a FileRegion may still be sent from it)
        until `close_log_file`."""
        self.index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        unlink_quietly(self.log_path)

    def close_log_file(self) -> None:
        self.file.close()


def rename_segment_files(directory: Path, base_offset: int, old: str, new: str) -> list[Path]:
    """Rename the segment files `<stem><suffix><old>` that exist to `<stem><suffix><new>`
    (the .log last, so its presence means the indexes went first); returns the new paths."""
    renamed = []
    for suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX, LOG_SUFFIX):
        source = directory / (file_stem(base_offset) + suffix + old)
        target = directory / (file_stem(base_offset) + suffix + new)
        try:
            os.replace(source, target)
        except FileNotFoundError:
            continue
        renamed.append(target)
    return renamed


class LazySegment(LogSegment):
    """A sealed segment opened lazily (after a clean shutdown or below the recovery point).

    Only `base_offset`, `config` and `dirty` are set; `size` costs one stat on first use,
    `txn_index` is read on its own;
    the first access to anything else opens the files through `LogSegment.open`, recovers
    the segment if its indexes fail the sanity checks, and turns this object into a plain
    LogSegment (class swap), so later accesses cost nothing extra."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> None:
        self.__dict__.update(
            directory=directory,
            base_offset=base_offset,
            config=config,
            dirty=False,
            _now_ms=now_ms,
        )

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "size":
            size = os.stat(self.log_path).st_size
            self.__dict__["size"] = size
            return size
        if name == "txn_index":
            # Read on its own: a read_committed fetch or the cleaner's plan needs the aborted
            # transactions of a segment, not its data.
            index = TxnIndex(txn_index_path(self.directory, self.base_offset))
            self.__dict__["txn_index"] = index
            return index
        self._load()
        return getattr(self, name)

    def _load(self) -> None:
        d = self.__dict__
        real = LogSegment.open(d["directory"], d["base_offset"], d["config"], d["_now_ms"])
        if real.needs_rebuild:
            log.warning(
                "%s: rebuilding on first use (offset index: %s, time index: %s, log: %s)",
                real.log_path,
                real.index.problem or "ok",
                real.time_index.problem or "ok",
                real.tail_problem or "ok",
            )
            real.recover(lambda _header: None)
        self.__dict__.clear()
        self.__dict__.update(real.__dict__)
        self.__class__ = LogSegment  # type: ignore[assignment]

    @property
    def loaded(self) -> bool:
        return False

    def close(self) -> None:
        """Nothing is open yet."""

    def close_indexes(self) -> None:
        """Nothing is open yet."""

    def close_log_file(self) -> None:
        """Nothing is open yet."""

    def delete_files(self) -> None:
        for path in self.paths(self.directory, self.base_offset):
            unlink_quietly(path)
        unlink_quietly(txn_index_path(self.directory, self.base_offset))
