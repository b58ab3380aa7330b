"""A share partition (KIP-932): the records of one topic partition as one share group consumes
them, on the partition's leader. Pure: no IO, the time passed in; the shell
(kbroker/share/manager.py) reads the log, persists the state and answers the requests.

Offsets below the *start offset* are done (acknowledged or archived); from the start offset up
to the *fetch end* (the first offset never handed out) every offset is *in flight*, in one of
the states of Kafka's RecordState:

    AVAILABLE     may be acquired (released, or its acquisition lock expired)
    ACQUIRED      handed to one member, locked until a deadline
    ACKNOWLEDGED  processed (ACCEPT)
    ARCHIVED      never delivered again (REJECT, too many deliveries, a gap, an aborted
                  transaction's record)

In-flight offsets are kept as runs of consecutive offsets sharing a state, a delivery count,
an owner and a lock deadline, split where an acknowledgement covers part of a run. Offsets
without a record (transaction markers, records compacted away) are archived runs, so the runs
always cover the in-flight range without holes, and the start offset moves past every leading
run that is done.

Acquiring hands out AVAILABLE in-flight records first, then new records from the log: whole
batches (batch-optimized mode, which may exceed ``max_records`` to keep batch boundaries) or
exactly ``max_records`` (record-limit mode, KIP-1206); no new batch is started once
``max_in_flight`` offsets are in flight (group.share.partition.max.record.locks), though the
one started may go beyond it. Each acquisition counts a delivery; a record released, or whose
lock expires, after ``max_delivery`` deliveries is archived instead of made available again
(group.share.delivery.count.limit). Only the member that acquired a record may acknowledge
it; RENEW (KIP-1222) extends its lock. Kafka's error codes and messages are kept.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from wire.errors import ErrorCode, KafkaError


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class AcquireMode(enum.IntEnum):
    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive in-flight offsets ``first``..``last`` sharing a state."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member: str | None = None
    deadline_ms: int | None = None


@dataclass(frozen=True, slots=True)
class LogBatch:
    """What acquiring needs of a batch read from the log: its offsets, and whether its
    records are to be skipped (a control batch, or a batch of an aborted transaction under
    read_committed)."""

    base_offset: int
    last_offset: int
    skip: bool = False


@dataclass(frozen=True, slots=True)
class Acquired:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class PersistedState:
    """A share partition's state as written to the share coordinator."""

    start_offset: int
    runs: list[Run]
    delivery_complete_count: int
    # How many done runs below the start offset it carries (for SharePartition.written).
    unwritten_done: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    first_offset: int
    last_offset: int
    # One type for every offset, or one per offset.
    types: tuple[int, ...]


def _invalid_state(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD_STATE, message)


class SharePartition:
    """The in-flight records of one share partition."""

    def __init__(
        self,
        start_offset: int,
        runs: Iterable[Run] = (),
        *,
        max_delivery: int,
        max_in_flight: int,
    ) -> None:
        self.start_offset = start_offset
        self.max_delivery = max_delivery
        self.max_in_flight = max_in_flight
        self._runs: list[Run] = [r for r in runs if r.last >= start_offset]
        if self._runs and self._runs[0].first < start_offset:
            self._runs[0] = replace(self._runs[0], first=start_offset)
        self._firsts = [r.first for r in self._runs]
        # The done runs the start offset moved past since the state was last written: a
        # write still carries them, from the start offset as it was, as Kafka 4.3 writes
        # (see state_to_write). Those of the state loaded were written already.
        self._unwritten_done: list[Run] = []
        self._advance()
        self._unwritten_done.clear()
        # Counted for the metrics: records handed out (each delivery), of them deliveries
        # after the first, and records whose acquisition lock expired.
        self.delivered = 0
        self.redelivered = 0
        self.lock_expired = 0

    # --- reading ----------------------------------------------------------------------------

    @property
    def runs(self) -> tuple[Run, ...]:
        return tuple(self._runs)

    @property
    def fetch_end(self) -> int:
        """The first offset never handed out."""
        return self._runs[-1].last + 1 if self._runs else self.start_offset

    def next_fetch_offset(self) -> int:
        """Where the next read of the log should start: the first available in-flight
        offset, else the fetch end."""
        for run in self._runs:
            if run.state is RecordState.AVAILABLE:
                return run.first
        return self.fetch_end

    def in_flight(self) -> int:
        return self.fetch_end - self.start_offset

    def has_available(self) -> bool:
        return any(r.state is RecordState.AVAILABLE for r in self._runs)

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline_ms for r in self._runs if r.deadline_ms is not None]
        return min(deadlines, default=None)

    def acquired_by(self, member: str) -> list[tuple[int, int]]:
        return [(r.first, r.last) for r in self._runs if r.member == member]

    def counts(self) -> dict[RecordState, int]:
        """Offsets in flight by state."""
        out = dict.fromkeys(RecordState, 0)
        for r in self._runs:
            out[r.state] += r.last - r.first + 1
        return out

    def persisted_runs(self) -> list[Run]:
        """The runs as the share coordinator keeps them: an acquired record is stored as
        available with its delivery count (a new leader hands it out again); adjacent runs
        that store the same are merged."""
        out: list[Run] = []
        for r in self._runs:
            state = RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state
            stored = Run(r.first, r.last, state, r.delivery_count)
            if (
                out
                and out[-1].last + 1 == r.first
                and (out[-1].state, out[-1].delivery_count) == (state, r.delivery_count)
            ):
                out[-1] = replace(out[-1], last=r.last)
            else:
                out.append(stored)
        return out

    def state_to_write(self) -> PersistedState:
        """The state to write to the share coordinator, as Kafka 4.3 writes it: from the start
        offset as it was before the changes not written yet moved it, with the records done
        since then still in it (Kafka moves its start offset only once the write is done: after
        all ten records of a partition were accepted, its share state reads start offset 0 and
        a batch 0-9 acknowledged, delivery complete count 10, and kafka-share-groups.sh shows
        START-OFFSET 0)."""
        done = list(self._unwritten_done)
        start = done[0].first if done else self.start_offset
        merged: list[Run] = []
        for r in [*done, *self.persisted_runs()]:
            if (
                merged
                and merged[-1].last + 1 == r.first
                and (merged[-1].state, merged[-1].delivery_count) == (r.state, r.delivery_count)
            ):
                merged[-1] = replace(merged[-1], last=r.last)
            else:
                merged.append(r)
        complete = sum(r.last - r.first + 1 for r in merged if r.state in DONE)
        return PersistedState(start, merged, complete, len(done))

    def written(self, state: PersistedState) -> None:
        """``state`` (from state_to_write) is stored: its done runs need not be written again."""
        del self._unwritten_done[: state.unwritten_done]

    # --- acquiring --------------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        batches: Sequence[LogBatch],
        max_records: int,
        mode: AcquireMode,
        now_ms: int,
        lock_ms: int,
    ) -> list[Acquired]:
        """Acquire for ``member`` what ``batches`` (read from the log at
        ``next_fetch_offset()``, in order) hold that may be handed out."""
        limit = max(max_records, 1)
        deadline = now_ms + lock_ms
        acquired: list[Acquired] = []
        taken = 0
        covered_to = batches[-1].last_offset if batches else -1
        # Records handed out before and available again, within what was read.
        for index, run in enumerate(list(self._runs)):
            if taken >= limit:
                return acquired
            if run.first > covered_to:
                break
            if run.state is not RecordState.AVAILABLE:
                continue
            last = min(run.last, covered_to)
            if mode is AcquireMode.RECORD_LIMIT:
                last = min(last, run.first + (limit - taken) - 1)
            count = run.delivery_count + 1
            self._put(
                Run(run.first, last, RecordState.ACQUIRED, count, member, deadline),
                index_hint=index,
            )
            acquired.append(Acquired(run.first, last, count))
            taken += last - run.first + 1
            self.redelivered += last - run.first + 1
        # New records.
        for batch in batches:
            if taken >= limit or self.in_flight() >= self.max_in_flight:
                break
            end = self.fetch_end
            if batch.last_offset < end:
                continue
            if batch.base_offset > end:
                # Offsets without a record (compacted away, or outside any batch).
                self._append(Run(end, batch.base_offset - 1, RecordState.ARCHIVED))
            first = max(batch.base_offset, end)
            if batch.skip:
                self._append(Run(first, batch.last_offset, RecordState.ARCHIVED))
                continue
            last = batch.last_offset
            if mode is AcquireMode.RECORD_LIMIT:
                last = min(last, first + (limit - taken) - 1)
            self._append(Run(first, last, RecordState.ACQUIRED, 1, member, deadline))
            acquired.append(Acquired(first, last, 1))
            taken += last - first + 1
        self._advance()
        self.delivered += taken
        return _merged(acquired)

    # --- acknowledging ----------------------------------------------------------------------

    def acknowledge(
        self, member: str, batches: Sequence[AckBatch], now_ms: int, lock_ms: int, renew: bool
    ) -> None:
        """Apply a member's acknowledgements, all or none: KafkaError when one cannot be."""
        changes: list[tuple[int, int, AckType]] = []
        for batch in batches:
            self._check_batch(member, batch, renew)
            if len(batch.types) == 1:
                changes.append((batch.first_offset, batch.last_offset, AckType(batch.types[0])))
            else:
                for i, t in enumerate(batch.types):
                    offset = batch.first_offset + i
                    if changes and changes[-1][1] == offset - 1 and changes[-1][2] == t:
                        changes[-1] = (changes[-1][0], offset, AckType(t))
                    else:
                        changes.append((offset, offset, AckType(t)))
        for first, last, ack in changes:
            self._apply(first, last, ack, now_ms, lock_ms)
        self._advance()

    def _check_batch(self, member: str, batch: AckBatch, renew: bool) -> None:
        first, last = batch.first_offset, batch.last_offset
        if last < first or first < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid acknowledgement batch offsets.")
        size = last - first + 1
        if len(batch.types) not in (1, size):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "The acknowledge types do not match the offsets of the batch.",
            )
        for t in batch.types:
            if t not in AckType.__members__.values():
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge type {t}.")
            if t == AckType.RENEW and not renew:
                raise KafkaError(ErrorCode.INVALID_REQUEST, None)
        if not self._runs:
            raise _invalid_state(
                "Batch record not found. The request batch offsets are not found in the cache."
            )
        if first > self._runs[-1].last:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Batch record not found. The first offset in request is past acquired records.",
            )
        if first < self.start_offset:
            raise _invalid_state("The offset cannot be acknowledged. The offset is not acquired.")
        for run in self._overlapping(first, last):
            if run.state is not RecordState.ACQUIRED:
                raise _invalid_state(
                    "The offset cannot be acknowledged. The offset is not acquired."
                )
            if run.member != member:
                whole = run.first >= first and run.last <= last
                what = "batch record" if whole else "offset"
                raise _invalid_state(f"Member is not the owner of {what}")
        if last > self._runs[-1].last:
            raise _invalid_state("The offset cannot be acknowledged. The offset is not acquired.")

    def _apply(self, first: int, last: int, ack: AckType, now_ms: int, lock_ms: int) -> None:
        for run in list(self._overlapping(first, last)):
            lo, hi = max(run.first, first), min(run.last, last)
            if ack is AckType.RENEW:
                new = replace(run, first=lo, last=hi, deadline_ms=now_ms + lock_ms)
            elif ack is AckType.ACCEPT:
                new = Run(lo, hi, RecordState.ACKNOWLEDGED, run.delivery_count)
            elif ack is AckType.RELEASE:
                new = self._released(replace(run, first=lo, last=hi))
            else:
                new = Run(lo, hi, RecordState.ARCHIVED, run.delivery_count)
            self._put(new)

    def _released(self, run: Run) -> Run:
        """An acquired run given back: available again, unless delivered too often."""
        state = (
            RecordState.ARCHIVED
            if run.delivery_count >= self.max_delivery
            else RecordState.AVAILABLE
        )
        return Run(run.first, run.last, state, run.delivery_count)

    # --- time and members -------------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> bool:
        """Release the records whose acquisition lock ended; True if any was."""
        expired = [r for r in self._runs if r.deadline_ms is not None and r.deadline_ms <= now_ms]
        for run in expired:
            self._put(self._released(run))
            self.lock_expired += run.last - run.first + 1
        self._advance()
        return bool(expired)

    def release_member(self, member: str) -> bool:
        """Release what a member holds (its share session closed); True if it held any."""
        held = [r for r in self._runs if r.member == member]
        for run in held:
            self._put(self._released(run))
        self._advance()
        return bool(held)

    def move_start(self, offset: int) -> None:
        """Records below ``offset`` are gone from the log (retention, DeleteRecords) or were
        reset away: nothing below it is in flight any more."""
        if offset <= self.start_offset:
            return
        self._runs = [r for r in self._runs if r.last >= offset]
        if self._runs and self._runs[0].first < offset:
            self._runs[0] = replace(self._runs[0], first=offset)
        self._firsts = [r.first for r in self._runs]
        self._unwritten_done.clear()
        self.start_offset = offset
        self._advance()

    # --- the runs ---------------------------------------------------------------------------

    def _overlapping(self, first: int, last: int) -> list[Run]:
        index = max(bisect.bisect_right(self._firsts, first) - 1, 0)
        out = []
        for run in self._runs[index:]:
            if run.first > last:
                break
            if run.last >= first:
                out.append(run)
        return out

    def _append(self, run: Run) -> None:
        self._runs.append(run)
        self._firsts.append(run.first)

    def _put(self, new: Run, index_hint: int | None = None) -> None:
        """Replace offsets ``new.first``..``new.last`` (inside one run) with ``new``."""
        index = bisect.bisect_right(self._firsts, new.first) - 1
        old = self._runs[index]
        assert old.first <= new.first and new.last <= old.last, (old, new)
        pieces = []
        if old.first < new.first:
            pieces.append(replace(old, last=new.first - 1))
        pieces.append(new)
        if new.last < old.last:
            pieces.append(replace(old, first=new.last + 1))
        self._runs[index : index + 1] = pieces
        self._firsts[index : index + 1] = [p.first for p in pieces]

    def _advance(self) -> None:
        """Move the start offset past the leading runs that are done."""
        done = 0
        for run in self._runs:
            if run.state not in DONE:
                break
            done += 1
        if done:
            self.start_offset = self._runs[done - 1].last + 1
            self._unwritten_done.extend(self._runs[:done])
            del self._runs[:done]
            del self._firsts[:done]


def _merged(acquired: list[Acquired]) -> list[Acquired]:
    """Adjacent acquisitions with the same delivery count, as one range."""
    out: list[Acquired] = []
    for a in acquired:
        if (
            out
            and out[-1].last_offset + 1 == a.first_offset
            and (out[-1].delivery_count == a.delivery_count)
        ):
            out[-1] = Acquired(out[-1].first_offset, a.last_offset, a.delivery_count)
        else:
            out.append(a)
    return out
