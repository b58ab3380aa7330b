"""Counting one partition's committed records per window of record timestamps.

The counter reads the partition's log in offset order, below the high watermark, a batch at
a time. A batch whose first (base) and max timestamps fall in one window is counted from its
header alone (records count); only a batch spanning windows is decoded for its records'
timestamps. A LogAppendTime batch (attributes bit 3) gives every record the max timestamp.

Transactions (KIP-98): a transactional batch is held per producer id until its control
batch; a COMMIT marker adds the held counts, an ABORT marker drops them. So the counts are
those of committed data only, and a transaction still open is not counted yet.

The counts describe the log as it is: the shell starts the counter over from the log start
offset when that moved (DeleteRecords, retention) or the log was truncated below what was
counted, and windows no longer present then disappear.
"""

from __future__ import annotations

from dataclasses import dataclass

from wire.records.batch import BatchHeader, Buffer, iter_batches
from wire.records.control import read_end_txn_marker
from wire.records.record import decode_batch

DEFAULT_WINDOW_MS = 600_000


@dataclass(frozen=True, slots=True)
class WindowCount:
    """The records of one window: how many, and the lowest and highest offset among them."""

    count: int
    first_offset: int
    last_offset: int

    def plus(self, other: WindowCount) -> WindowCount:
        return WindowCount(
            self.count + other.count,
            min(self.first_offset, other.first_offset),
            max(self.last_offset, other.last_offset),
        )


def window_start(timestamp_ms: int, window_ms: int) -> int:
    return timestamp_ms - timestamp_ms % window_ms


def batch_windows(
    buf: Buffer, pos: int, header: BatchHeader, window_ms: int, from_offset: int
) -> dict[int, WindowCount]:
    """The counts of one data batch per window, of its records at ``from_offset`` and above
    (a log start offset inside the batch, after DeleteRecords, hides the records below)."""
    if header.records_count == 0:
        return {}
    last_ts = header.max_timestamp
    first_ts = last_ts if header.timestamp_type else header.base_timestamp
    first_window = window_start(first_ts, window_ms)
    if header.base_offset >= from_offset and first_window == window_start(last_ts, window_ms):
        return {
            first_window: WindowCount(header.records_count, header.base_offset, header.last_offset)
        }
    counts: dict[int, WindowCount] = {}
    for record in decode_batch(buf, pos)[1]:
        if record.offset < from_offset:
            continue
        one = WindowCount(1, record.offset, record.offset)
        window = window_start(record.timestamp, window_ms)
        known = counts.get(window)
        counts[window] = one if known is None else known.plus(one)
    return counts


def _merge(into: dict[int, WindowCount], counts: dict[int, WindowCount]) -> None:
    for window, count in counts.items():
        known = into.get(window)
        into[window] = count if known is None else known.plus(count)


class PartitionCounter:
    """The committed records of one partition's log from ``start_offset`` on, per window."""

    def __init__(self, window_ms: int, start_offset: int) -> None:
        self.window_ms = window_ms
        self.start_offset = start_offset
        # The offset the next batch read must start at: everything below was counted.
        self.next_offset = start_offset
        self.windows: dict[int, WindowCount] = {}
        # Windows changed since the last ``take_changed``.
        self._changed: set[int] = set()
        # Open transactions' counts, by producer id, until their marker.
        self._open: dict[int, dict[int, WindowCount]] = {}

    def add(self, batches: Buffer) -> None:
        """Count whole batches read from the log at ``next_offset``."""
        for pos, header in iter_batches(batches):
            if header.next_offset <= self.next_offset:
                continue
            from_offset = self.next_offset
            self.next_offset = header.next_offset
            if header.is_control:
                self._end_transaction(batches, pos, header)
                continue
            counts = batch_windows(batches, pos, header, self.window_ms, from_offset)
            if header.is_transactional:
                _merge(self._open.setdefault(header.producer_id, {}), counts)
            else:
                self._count(counts)

    def _end_transaction(self, batches: Buffer, pos: int, header: BatchHeader) -> None:
        if not header.is_transactional:
            return
        marker = read_end_txn_marker(memoryview(batches)[pos : pos + header.size])
        held = self._open.pop(header.producer_id, {})
        if marker is not None and marker.commit:
            self._count(held)

    def _count(self, counts: dict[int, WindowCount]) -> None:
        _merge(self.windows, counts)
        self._changed.update(counts)

    def take_changed(self) -> dict[int, WindowCount]:
        """The windows whose counts changed since the last call, with their counts."""
        changed = {w: self.windows[w] for w in sorted(self._changed)}
        self._changed.clear()
        return changed
