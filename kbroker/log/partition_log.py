"""One partition's log: `<log.dir>/<topic>-<partition>/`.

Directory contents (formats in the modules named):
- `<20-digit base offset>.log`, `.index`, `.timeindex` per segment (segment.py,
  offset_index.py, time_index.py), ordered by base offset; the last one is the active segment;
- `<20-digit base offset>.txnindex` for segments holding abort markers (txn_index.py);
- `leader-epoch-checkpoint` (leader_epochs.py);
- `<20-digit offset>.snapshot` producer state snapshots (producer_snapshot.py);
- `*.tmp` files are unfinished atomic replacements; they are deleted on open;
- `*.deleted`, `*.cleaned`, `*.swap` segment files in transition (segment.py, swap.py).

The log start offset is held in memory and checkpointed by the LogManager (Kafka's
`log-start-offset-checkpoint`); without a checkpoint it is the first segment's base offset.
So is the recovery point (`recovery-point-offset-checkpoint`): every byte below it is fsynced.

The event loop never waits for the disk (background_sync.py): a roll writes the sealed
segment's last index entry and the producer snapshot to the page cache and hands their fsyncs,
and the directory's (the new segment's name), to the log's syncer, as Kafka's roll schedules
its "flush-log" task; a flush (flush.ms, flush.messages) does the same with the dirty segments.
The recovery point moves when those fsyncs have returned, not before; a truncation meanwhile
makes the ones still running count for nothing (their offsets may no longer hold those bytes).

Transactions (KIP-98): the producer state (producer_state.py) follows every appended batch,
markers included; an abort marker adds an entry to the aborted-transaction index of the
segment it lands in, on the leader and on followers alike. A segment scanned by recovery gets
its aborted-transaction index rebuilt: the producer state is replayed from the newest
snapshot at or below the first scanned segment, and the aborted transactions whose markers
lie in scanned segments are written again (a lone `.txnindex` missing from a segment that
needed no recovery cannot be told from one that never had an abort, as in Kafka).

Segments leave the log (retention, DeleteRecords, truncation, replacement by a cleaned
segment) by a rename to `<name>.deleted`; the files are unlinked file.delete.delay.ms later
(`delete_expired_files`, or at close), leftovers at the next open. The log cleaner
(cleaner.py) reads sealed segments from its own threads through its own file descriptors and
swaps its output in through `replace_with_cleaned` on the owner's thread.

Not thread-safe: one owner (the broker's event loop) calls it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kbroker.log import producer_snapshot
from kbroker.log.background_sync import INLINE, Syncer
from kbroker.log.file_region import FileRegion
from kbroker.log.fileio import TMP_SUFFIX, fsync_and_close, open_dir, unlink_quietly
from kbroker.log.leader_epochs import LeaderEpochCache
from kbroker.log.log_config import LogConfig
from kbroker.log.recovery import recover_segments
from kbroker.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIMEINDEX_SUFFIX,
    TXNINDEX_SUFFIX,
    LazySegment,
    LogSegment,
)
from kbroker.log.swap import install_cleaned, resolve_leftovers
from kbroker.producer_state import (
    AbortedTxn,
    BatchMetadata,
    ProducerBatch,
    ProducerStateManager,
    VerificationGuard,
    last_sequence,
)
from kbroker.txn.log_records import TV_1
from wire.errors import DecodeError, ErrorCode, KafkaError
from wire.records.batch import (
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    iter_batches,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
)
from wire.records.control import read_end_txn_marker
from wire.records.record import decode_batch

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1
LEFTOVER_SUFFIXES = (CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)


@dataclass(frozen=True)
class AppendResult:
    """Outcome of an append (offsets of the first and last record written)."""

    first_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False


def producer_batch(header: BatchHeader, data: bytes | bytearray | memoryview) -> ProducerBatch:
    """The producer-state view of a batch (offsets as in the header); `data` holds the bytes
    of a control batch, whose transaction marker is decoded (unused for data batches)."""
    marker = None
    if header.is_control:
        try:
            marker = read_end_txn_marker(data)
        except (KafkaError, DecodeError) as exc:
            log.warning("unreadable control batch at offset %d: %s", header.base_offset, exc)
    return ProducerBatch(
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        first_seq=header.base_sequence,
        last_seq=last_sequence(header.base_sequence, header.last_offset_delta),
        first_offset=header.base_offset,
        last_offset=header.last_offset,
        timestamp=header.max_timestamp,
        is_control=header.is_control,
        is_transactional=header.is_transactional,
        marker=marker,
    )


def _parse_batches(batches: bytearray | bytes | memoryview) -> list[tuple[int, BatchHeader]]:
    parsed = list(iter_batches(batches))
    end = parsed[-1][0] + parsed[-1][1].size if parsed else 0
    if not parsed or end != len(batches):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "records are empty or end in a partial batch")
    return parsed


class PartitionLog:
    """Segments, indexes, leader epochs and producer state of one partition."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Callable[[], float],
        segments: list[LogSegment],
        epochs: LeaderEpochCache,
        syncer: Syncer = INLINE,
    ) -> None:
        self.directory = directory
        self._syncer = syncer
        self._config = config
        self._clock = clock
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.epochs = epochs
        self.producers = ProducerStateManager()
        self.log_start_offset = segments[0].base_offset
        self._flushed_offset = self.log_end_offset
        self._last_flush_ms = self._now_ms()
        self._retired: list[tuple[int, LogSegment, list[Path]]] = []
        # Every byte below this offset is on disk (fsynced): the recovery point (Kafka's
        # recovery-point-offset-checkpoint, written by the LogManager; see `recovery_point`).
        self._recovery_point = self.log_end_offset
        # (truncations, offset) of the last fsync job done, set by the syncer's thread (one
        # tuple: a single store), and the count of truncations so far.
        self._synced: tuple[int, int] = (0, 0)
        self._truncations = 0
        # Set when open() had to scan and validate segments (unclean shutdown or bad indexes).
        self.recovered_segments: list[int] = []
        # Base offsets of the segments with a .txnindex, ascending; None when it must be
        # listed again (after a change to the set of segments or of index files).
        self._txn_index_bases: list[int] | None = None
        # Where the last read ended on a batch boundary: (segment, offset, position). A
        # consumer's next fetch starts there, so read_with_end knows the position without
        # reading a batch header; forgotten when the log is truncated.
        self._read_end: tuple[LogSegment, int, int] | None = None
        # The offset of the producer snapshot last loaded or written: close() need not write
        # it again while the log end is still there.
        self._snapshot_offset: int | None = None

    # Opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recover: bool,
        clock: Callable[[], float] = time.time,
        log_start_offset: int | None = None,
        recovery_point: int | None = None,
        lazy: bool = False,
        syncer: Syncer = INLINE,
    ) -> PartitionLog:
        """Open (or create) the log in `directory`. `recover=True` after an unclean shutdown:
        the segments from the one holding `recovery_point` (the active one when None) are
        validated batch by batch and truncated at the first torn or corrupt batch. Leftover
        `.cleaned`, `.swap` and `.deleted` files are resolved first (cleaner.py).
        Without `lazy`, every segment is opened and its indexes sanity-checked (and rebuilt if
        they fail); with `lazy`, segments that need no validation are opened on first use
        (LazySegment). `log_start_offset` comes from the LogManager's checkpoint. `syncer`
        runs the fsyncs (background_sync.py; at once by default)."""
        directory.mkdir(parents=True, exist_ok=True)
        now_ms = int(clock() * 1000)
        # One listing of plain names: start-up cost per segment stays a few microseconds.
        names = os.listdir(directory)
        for name in names:
            if name.endswith(TMP_SUFFIX):
                unlink_quietly(directory / name)
        if any(name.endswith(LEFTOVER_SUFFIXES) for name in names):
            resolve_leftovers(directory)
            names = os.listdir(directory)
        bases = sorted(
            int(name[: -len(LOG_SUFFIX)])
            for name in names
            if name.endswith(LOG_SUFFIX) and _is_offset_stem(name[: -len(LOG_SUFFIX)])
        )
        known = set(bases)
        for name in names:
            for suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX):
                stem = name[: -len(suffix)]
                if name.endswith(suffix) and _is_offset_stem(stem) and int(stem) not in known:
                    unlink_quietly(directory / name)
        validate_from = bases[-1] if bases else 0
        if recover and recovery_point is not None:
            validate_from = bases[max(0, bisect_right(bases, recovery_point) - 1)] if bases else 0
        segments: list[LogSegment] = []
        for i, base in enumerate(bases):
            if lazy and i < len(bases) - 1 and not (recover and base >= validate_from):
                segments.append(LazySegment(directory, base, config, now_ms))
            else:
                segments.append(LogSegment.open(directory, base, config, now_ms))
        if not segments:
            segments = [LogSegment.create(directory, log_start_offset or 0, config, now_ms)]
            dir_fd = open_dir(directory)
            syncer.submit(directory.parent, lambda: fsync_and_close([dir_fd]))
        epochs = LeaderEpochCache(directory, syncer)
        with epochs.batched():
            recovered = recover_segments(
                segments, unclean=recover, epochs=epochs, validate_from=validate_from
            )
            plog = cls(directory, config, clock, segments, epochs, syncer)
            plog.recovered_segments = recovered
            if log_start_offset is not None:
                plog.log_start_offset = min(
                    max(log_start_offset, segments[0].base_offset), plog.log_end_offset
                )
            # Epochs starting after the log end are forgotten (lost in a crash). One starting
            # at the end stays: a leader that had not written yet, as before the restart
            # (Kafka forgets it and writes it back when the broker leads again: two
            # checkpoint writes per empty partition at every start).
            epochs.truncate_from_end(plog.log_end_offset + 1)
            epochs.truncate_from_start(plog.log_start_offset)
        plog._flushed_offset = plog.log_end_offset
        plog._recovery_point = plog.log_end_offset
        plog._load_producer_state(rebuild_txn_indexes=set(recovered) & set(plog._bases))
        return plog

    def _load_producer_state(self, rebuild_txn_indexes: set[int] | None = None) -> None:
        """Load the newest snapshot at or below the log end (at or below the first segment
        of `rebuild_txn_indexes`, base offsets whose aborted-transaction index is rebuilt),
        then replay batches after it (from the first segment when there is none)."""
        leo = self.log_end_offset
        first_base = self._segments[0].base_offset
        present = producer_snapshot.delete_outside(self.directory, first_base, leo)
        upto = min(rebuild_txn_indexes) if rebuild_txn_indexes else leo
        loaded = producer_snapshot.load_latest(self.directory, upto, present)
        if loaded is None:
            self.producers.clear()
            start = first_base
        else:
            start, entries = loaded
            self.producers.load(entries)
            self._snapshot_offset = start
        aborted = self.producers.replay(self._producer_batches_from(start))
        if not rebuild_txn_indexes:
            return
        by_segment: dict[int, list[AbortedTxn]] = {base: [] for base in rebuild_txn_indexes}
        for entry in aborted:
            base = self._bases[self._segment_index(entry.last_offset)]
            if base in by_segment:
                by_segment[base].append(entry)
        for segment in self._segments:
            if segment.base_offset in by_segment:
                segment.txn_index.replace(by_segment[segment.base_offset])
        self._txn_index_bases = None

    def _producer_batches_from(self, offset: int) -> Iterable[ProducerBatch]:
        i = self._segment_index(offset)
        for segment in self._segments[i:]:
            if segment.next_offset <= offset:
                continue
            _, position = segment.index.lookup(offset)
            for pos, header in segment.batches_from(position, chunk=1 << 20):
                if header.base_offset >= offset and header.has_producer_id:
                    data = segment.read_batch(pos, header) if header.is_control else b""
                    yield producer_batch(header, data)

    # Properties ------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic configs (they take effect for new segments and appends)."""
        self._config = config
        for segment in self._segments:
            segment.config = config

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        """Every byte below this offset is fsynced (the syncer's jobs done so far)."""
        truncations, offset = self._synced
        if truncations == self._truncations and offset > self._recovery_point:
            self._recovery_point = offset
        return self._recovery_point

    def _sync_then_advance(self, fds: list[int], offset: int) -> None:
        """Hand `fds` to the syncer; once fsynced, the recovery point may move to `offset`
        (unless the log was truncated meanwhile)."""
        truncations = self._truncations

        def job() -> None:
            fsync_and_close(fds)
            self._synced = (truncations, offset)

        self._syncer.submit(self.directory.parent, job)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a copy of the list; the last one is active)."""
        return list(self._segments)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _segment_index(self, offset: int) -> int:
        """Index of the segment that would hold `offset` (the first one if below all)."""
        return max(0, bisect_right(self._bases, offset) - 1)

    # Appending -------------------------------------------------------------------------

    def append_as_leader(
        self,
        batches: bytearray | memoryview,
        *,
        leader_epoch: int,
        log_append_time_ms: int | None,
        from_coordinator: bool = False,
        verification: VerificationGuard | None = None,
        marker_version: int = TV_1,
    ) -> AppendResult:
        """Assign offsets to already-validated v2 batches (rewritten in place: base offset,
        partition leader epoch, and LogAppendTime when `log_append_time_ms` is given), check
        idempotent producers' sequences, append them to the active segment.
        `from_coordinator`: a group coordinator's transactional offset commit, whose sequences
        are not a client's (Kafka's AppendOrigin.COORDINATOR: epochs checked, not sequences).
        `verification` and `marker_version`: see ProducerStateManager.prepare (KIP-890)."""
        parsed = _parse_batches(batches)
        next_offset = self.log_end_offset
        planned: list[BatchHeader] = []
        for _, header in parsed:
            planned.append(header._replace(base_offset=next_offset))
            next_offset += header.last_offset_delta + 1
        checked = self.producers.prepare(
            [
                producer_batch(h, memoryview(batches)[pos : pos + h.size] if h.is_control else b"")
                for (pos, _), h in zip(parsed, planned, strict=True)
                if h.has_producer_id
            ],
            check_sequences=not from_coordinator,
            verification=verification,
            marker_version=marker_version,
        )
        if isinstance(checked, BatchMetadata):
            return AppendResult(
                checked.first_offset, checked.last_offset, -1, self.log_start_offset, True
            )
        final: list[BatchHeader] = []
        for (pos, _), header in zip(parsed, planned, strict=True):
            set_base_offset(batches, pos, header.base_offset)
            set_partition_leader_epoch(batches, pos, leader_epoch)
            header = header._replace(partition_leader_epoch=leader_epoch)
            if log_append_time_ms is not None:
                set_max_timestamp_log_append(batches, pos, log_append_time_ms)
                header = header._replace(
                    max_timestamp=log_append_time_ms,
                    attributes=header.attributes | TIMESTAMP_TYPE_BIT,
                )
            final.append(header)
        self._append(batches, final, [pos for pos, _ in parsed])
        self.epochs.assign(leader_epoch, final[0].base_offset)
        self._index_aborted(self.producers.commit(checked))
        self._maybe_flush_messages()
        return AppendResult(
            final[0].base_offset,
            final[-1].last_offset,
            -1 if log_append_time_ms is None else log_append_time_ms,
            self.log_start_offset,
        )

    def append_as_follower(self, batches: bytearray | bytes) -> AppendResult:
        """Append batches fetched from the leader as they are (offsets and epochs kept).
        Offsets must not go below the log end offset (gaps are allowed)."""
        parsed = _parse_batches(batches)
        expected = self.log_end_offset
        for _, header in parsed:
            if header.base_offset < expected:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"follower append at offset {header.base_offset} below {expected}",
                )
            expected = header.next_offset
        headers = [h for _, h in parsed]
        self._append(batches, headers, [pos for pos, _ in parsed])
        for header in headers:
            self.epochs.assign(header.partition_leader_epoch, header.base_offset)
        view = memoryview(batches)
        aborted = self.producers.replay(
            producer_batch(h, view[pos : pos + h.size] if h.is_control else b"")
            for pos, h in parsed
            if h.has_producer_id
        )
        self._index_aborted(aborted)
        self._maybe_flush_messages()
        return AppendResult(
            headers[0].base_offset, headers[-1].last_offset, -1, self.log_start_offset
        )

    def _index_aborted(self, aborted: list[AbortedTxn]) -> None:
        """Record aborted transactions whose markers were just appended (to the active
        segment)."""
        for entry in aborted:
            self.active_segment.txn_index.append(entry)
            self._txn_index_bases = None

    def _append(
        self, data: bytearray | bytes | memoryview, headers: list[BatchHeader], positions: list[int]
    ) -> None:
        max_ts = max(h.max_timestamp for h in headers)
        now_ms = self._now_ms()
        if self.active_segment.should_roll(len(data), max_ts, headers[-1].last_offset, now_ms):
            self._roll(headers[0].base_offset)
        elif not self.active_segment.index.fits(headers[-1].last_offset):
            # An empty segment cannot hold the offsets (a follower's gap): start one there.
            self._roll(headers[0].base_offset)
        self.active_segment.append(data, headers, positions)

    def _roll(self, new_base: int) -> None:
        """Seal the active segment and start a new one at `new_base`, snapshotting the
        producer state at that offset (Kafka takes one on every roll)."""
        active = self.active_segment
        now_ms = self._now_ms()
        fds: list[int] = []
        if active.size == 0:
            if active.base_offset == new_base:
                return
            self._segments.pop()
            self._bases.pop()
            active.delete_files()
            active.close()
        else:
            fds = active.seal_unsynced()
        fds.append(
            producer_snapshot.write_unsynced(self.directory, new_base, self.producers.entries())
        )
        self._snapshot_offset = new_base
        segment = LogSegment.create(self.directory, new_base, self._config, now_ms)
        self._segments.append(segment)
        self._bases.append(new_base)
        # Every segment below is sealed, its fsync handed over now or at an earlier roll: once
        # these are done, everything below the new segment is on disk.
        fds.append(open_dir(self.directory))
        self._sync_then_advance(fds, new_base)

    def roll(self) -> None:
        """Start a new segment at the log end offset (no-op when the active one is empty)."""
        self._roll(self.log_end_offset)

    def assign_epoch_start(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (a new leader does this at its log
        end offset when elected, KIP-101)."""
        self.epochs.assign(epoch, start_offset)

    # Reading ---------------------------------------------------------------------------

    def _check_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]",
            )

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int, min_one_batch: bool
    ) -> FileRegion | None:
        """`read_with_end` without the end offset."""
        found = self.read_with_end(
            offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch
        )
        return None if found is None else found[0]

    def read_with_end(
        self, offset: int, max_bytes: int, *, max_offset: int, min_one_batch: bool
    ) -> tuple[FileRegion, int] | None:
        """Whole batches from the one containing `offset`, all within one segment and below
        `max_offset` (the high watermark), at most `max_bytes` unless `min_one_batch` and the
        first batch is larger (KIP-74). Without `min_one_batch`, a first batch larger than
        `max_bytes` is returned cut at `max_bytes`, as Kafka does for pre-KIP-74 fetches, so
        the client can tell the batch is too large. None when there is nothing to return;
        else the region and the offset after its last (possibly cut) batch."""
        self._check_range(offset)
        if offset >= max_offset or offset >= self.log_end_offset:
            return None
        if max_bytes <= 0 and not min_one_batch:
            # Nothing fits: the fetch response is full (every partition after that point in
            # a fetch of many partitions), so no header is read.
            return None
        first_index = self._segment_index(offset)
        segment = self._segments[first_index]
        start = self._known_batch_start(segment, offset)
        if (
            start is not None
            and start < segment.size
            and segment.next_offset <= max_offset
            and segment.size - start <= max_bytes
        ):
            # The rest of the segment fits and is all below max_offset: it is the answer,
            # found without reading a header (a tailing consumer's fetch, or any fetch
            # from a segment's start).
            return self._remember_end(segment, start, segment.size, segment.next_offset)
        found = None
        for segment in self._segments[first_index:]:
            found = segment.find_batch(offset)
            if found is not None:
                break
        if found is None:
            return None
        start, first = found
        if first.next_offset > max_offset:
            return None
        if first.size > max_bytes:
            if min_one_batch:
                return FileRegion(segment.file, start, first.size), first.next_offset
            if max_bytes <= 0:
                return None
            return FileRegion(segment.file, start, max_bytes), first.next_offset
        end = start + first.size
        end_offset = first.next_offset
        for pos, header in segment.batches_from(end):
            if header.next_offset > max_offset or pos + header.size - start > max_bytes:
                break
            end = pos + header.size
            end_offset = header.next_offset
        return self._remember_end(segment, start, end, end_offset)

    def _known_batch_start(self, segment: LogSegment, offset: int) -> int | None:
        """The position of the first batch with last offset >= `offset` in `segment`, when
        known without reading: the segment's start for its base offset (its first batch has
        no lower offset), or where the last read ended."""
        if offset == segment.base_offset:
            return 0
        known = self._read_end
        if known is not None and known[0] is segment and known[1] == offset:
            return known[2]
        return None

    def _remember_end(
        self, segment: LogSegment, start: int, end: int, end_offset: int
    ) -> tuple[FileRegion, int]:
        """The region [start, end) of whole batches, remembering where it ends."""
        self._read_end = (segment, end_offset, end)
        return FileRegion(segment.file, start, end - start), end_offset

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start, upper), from the aborted-transaction
        indexes of the segment holding `start` on (Kafka's collectAbortedTransactions)."""
        found: list[AbortedTxn] = []
        if self._txn_index_bases is None:
            present = set(self._bases)
            self._txn_index_bases = sorted(
                int(name[: -len(TXNINDEX_SUFFIX)])
                for name in os.listdir(self.directory)
                if name.endswith(TXNINDEX_SUFFIX)
                and _is_offset_stem(name[: -len(TXNINDEX_SUFFIX)])
                and int(name[: -len(TXNINDEX_SUFFIX)]) in present
            )
        bases = self._txn_index_bases
        floor = self._bases[self._segment_index(start)]
        for base in bases[bisect_left(bases, floor) :]:
            segment = self._segments[self._segment_index(base)]
            entries, complete = segment.txn_index.collect(start, upper)
            found.extend(entries)
            if complete:
                break
        return found

    def _record_at_or_after(
        self,
        segment: LogSegment,
        position: int,
        header: BatchHeader,
        timestamp: int,
        min_offset: int,
    ) -> tuple[int, int]:
        """(offset, timestamp) of the first record of a batch with timestamp >= `timestamp`
        and offset >= `min_offset`; decodes the batch unless it is LogAppendTime."""
        if header.timestamp_type == 1:
            # Every record of a LogAppendTime batch carries the batch's max timestamp.
            return max(header.base_offset, min_offset), header.max_timestamp
        batch = segment.read_batch(position, header)
        _, records = decode_batch(batch, max_message_bytes=self.config.max_message_bytes)
        for record in records:
            if record.timestamp >= timestamp and record.offset >= min_offset:
                return record.offset, record.timestamp
        return max(header.base_offset, min_offset), header.max_timestamp

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `ts`, or None."""
        for segment in self._segments:
            if segment.max_timestamp < ts or segment.next_offset <= self.log_start_offset:
                continue
            found = segment.find_timestamp(ts, self.log_start_offset)
            if found is not None:
                position, header = found
                return self._record_at_or_after(
                    segment, position, header, ts, self.log_start_offset
                )
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(timestamp, offset) of the first record with the greatest timestamp; (-1, -1)
        when the log has no timestamped record."""
        segment = max(self._segments, key=lambda s: s.max_timestamp)
        ts = segment.max_timestamp
        if ts == NO_TIMESTAMP:
            return NO_TIMESTAMP, -1
        _, position = segment.index.lookup(segment.offset_of_max_timestamp)
        for pos, header in segment.batches_from(position):
            if header.max_timestamp == ts:
                offset, _ = self._record_at_or_after(segment, pos, header, ts, 0)
                return ts, offset
        return ts, segment.offset_of_max_timestamp

    # Leader epochs ---------------------------------------------------------------------

    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch (KIP-101/279); (-1, -1) if unknown."""
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    # Deletion and truncation -------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset` (DeleteRecords, retention); segments
        wholly below it are deleted. Returns the new log start offset."""
        if offset > self.log_end_offset or offset < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot delete before {offset}: log end offset is {self.log_end_offset}",
            )
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        if offset == self.log_end_offset and self.active_segment.size > 0:
            self._roll(offset)
        while len(self._segments) > 1 and self._bases[1] <= offset:
            self._retire(self._segments.pop(0))
            self._bases.pop(0)
        self.epochs.truncate_from_start(offset)
        producer_snapshot.delete_outside(self.directory, self._bases[0], self.log_end_offset)
        return self.log_start_offset

    def enforce_retention(self, *, stable_offset: int) -> int:
        """Delete the oldest segments breaching retention.ms (now - largest timestamp >
        retention.ms) or retention.bytes (while the log stays at or above the limit without
        them), as Kafka's retention does; only segments wholly below `stable_offset` (the last
        stable offset: no undecided transaction is cut, nothing uncommitted goes) go, and
        nothing when cleanup.policy lacks "delete". Returns the number of segments deleted."""
        config = self._config
        if "delete" not in config.cleanup_policy:
            return 0
        now_ms = self._now_ms()
        count = 0
        excess = self.size_bytes - config.retention_bytes
        for i, segment in enumerate(self._segments):
            end = self._bases[i + 1] if i + 1 < len(self._bases) else segment.next_offset
            if end > stable_offset or (segment.size == 0 and i == len(self._segments) - 1):
                break
            by_time = 0 <= config.retention_ms < now_ms - segment.largest_timestamp
            by_size = config.retention_bytes >= 0 and excess >= segment.size
            if not (by_time or by_size):
                break
            excess -= segment.size
            count += 1
        if count:
            end = self._bases[count] if count < len(self._bases) else self.log_end_offset
            self.delete_records_before(max(end, self.log_start_offset))
        return count

    def replace_with_cleaned(
        self, group: list[LogSegment], step_done: Callable[[int], None] = lambda _step: None
    ) -> None:
        """Swap the cleaned segment `<base>.*.cleaned` (base: the first segment's) in for the
        consecutive sealed segments `group` (swap.py's crash-safe steps); the old files are
        renamed to `.deleted` and removed after file.delete.delay.ms."""
        i = next((i for i, s in enumerate(self._segments) if s is group[0]), -1)
        if i < 0 or i + len(group) >= len(self._segments):
            raise ValueError("cleaned segments must replace sealed segments of this log")
        if any(a is not b for a, b in zip(self._segments[i : i + len(group)], group, strict=True)):
            raise ValueError("cleaned segments must replace consecutive segments")
        base = group[0].base_offset
        deleted = install_cleaned(self.directory, base, group, step_done)
        segment = LogSegment.open(self.directory, base, self._config, self._now_ms())
        self._segments[i : i + len(group)] = [segment]
        self._bases[i : i + len(group)] = [base]
        self._txn_index_bases = None
        for old, paths in zip(group, deleted, strict=True):
            self._retire_renamed(old, paths)

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= `offset` (follower truncation). The
        new log end offset is the start of the first removed batch (`offset` itself when it
        falls on a batch boundary)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self._bases[0]:
            self._truncate_fully(offset)
        else:
            while self._bases[-1] >= offset:
                self._retire(self._segments.pop())
                self._bases.pop()
            self.active_segment.truncate_to(offset)
        self._txn_index_bases = None
        self._read_end = None
        leo = self.log_end_offset
        self.log_start_offset = min(self.log_start_offset, leo)
        self._flushed_offset = min(self._flushed_offset, leo)
        self._recovery_point = min(self.recovery_point, leo)
        self._truncations += 1
        self.epochs.truncate_from_end(leo)
        producer_snapshot.delete_outside(self.directory, self._bases[0], leo)
        self._load_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every record and continue empty from `offset` (log start = log end =
        `offset`): a follower whose log ends before the leader's log start can never fetch
        what it misses, so it restarts at the leader's log start, as Kafka's
        truncateFullyAndStartAt does."""
        self._truncate_fully(offset)
        self._flushed_offset = offset
        self._recovery_point = offset
        self.epochs.clear()
        producer_snapshot.delete_outside(self.directory, offset, offset)
        self._load_producer_state()

    def _truncate_fully(self, offset: int) -> None:
        for segment in self._segments:
            self._retire(segment)
        self._segments = [LogSegment.create(self.directory, offset, self._config, self._now_ms())]
        self._bases = [offset]
        self.log_start_offset = offset
        self._read_end = None
        self._truncations += 1
        dir_fd = open_dir(self.directory)
        self._syncer.submit(self.directory.parent, lambda: fsync_and_close([dir_fd]))

    def _retire(self, segment: LogSegment) -> None:
        """Take a segment out of the log: its files are renamed to `.deleted` now and
        unlinked after file.delete.delay.ms, when its .log (which may still back FileRegions
        being sent) is closed too."""
        self._retire_renamed(segment, segment.rename_to_deleted())

    def _retire_renamed(self, segment: LogSegment, paths: list[Path]) -> None:
        self._retired.append((self._now_ms(), segment, paths))
        self._txn_index_bases = None

    def _close_retired(self, *, force: bool) -> None:
        now_ms = self._now_ms()
        keep = []
        for retired_ms, segment, paths in self._retired:
            if force or now_ms - retired_ms >= self._config.file_delete_delay_ms:
                segment.close_log_file()
                for path in paths:
                    unlink_quietly(path)
            else:
                keep.append((retired_ms, segment, paths))
        self._retired = keep

    def delete_expired_files(self) -> None:
        """Unlink `.deleted` files whose file.delete.delay.ms elapsed (periodic duty)."""
        self._close_retired(force=False)

    # Flushing and closing --------------------------------------------------------------

    def _maybe_flush_messages(self) -> None:
        if self.log_end_offset - self._flushed_offset >= self._config.flush_messages:
            self.flush()

    def flush(self) -> None:
        """fsync every segment written since the last flush, and its indexes, through the
        syncer; the recovery point follows when they are done."""
        fds: list[int] = []
        for segment in self._segments:
            if segment.dirty:
                fds += segment.take_unsynced()
        self._flushed_offset = self.log_end_offset
        self._last_flush_ms = self._now_ms()
        self._sync_then_advance(fds, self.log_end_offset)

    def maybe_flush(self) -> bool:
        """Flush when flush.ms elapsed since the last flush and data is unflushed; close
        retired segment files. Returns whether it flushed."""
        # Called every second for every log: the cheap checks first (flush.ms is usually
        # "never" and no segment is retired).
        if self._retired:
            self._close_retired(force=False)
        if self._now_ms() - self._last_flush_ms < self._config.flush_ms:
            return False
        if not any(s.dirty for s in self._segments):
            return False
        self.flush()
        return True

    def close(self) -> None:
        """Seal the active segment, flush, snapshot producer state at the log end, close
        files; at once, on this thread (shutdown: the syncer has finished its jobs)."""
        self.active_segment.seal()
        for segment in self._segments:
            if segment.dirty:
                segment.flush()
        self._recovery_point = self.log_end_offset
        leo = self.log_end_offset
        # Unchanged since the last start or roll: the snapshot there is this state (with
        # 10,000 partitions, rewriting them all was two fsyncs each at every shutdown).
        if not (
            self._snapshot_offset == leo
            and producer_snapshot.snapshot_path(self.directory, leo).exists()
        ):
            self._write_producer_snapshot(leo)
        for segment in self._segments:
            segment.close()
        self._close_retired(force=True)

    def _write_producer_snapshot(self, offset: int) -> None:
        producer_snapshot.write(self.directory, offset, self.producers.entries())
        self._snapshot_offset = offset

    def abandon(self) -> None:
        """Close the files without writing anything more: the log's directory failed
        (KIP-112), and the next start recovers the log from what reached the disk."""
        for segment in self._segments:
            with contextlib.suppress(OSError):
                segment.close()
        with contextlib.suppress(OSError):
            self._close_retired(force=True)


def _is_offset_stem(stem: str) -> bool:
    return len(stem) == 20 and stem.isdigit()
