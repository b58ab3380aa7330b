"""The sparse time index of one segment: `<20-digit base offset>.timeindex`.

File format (Kafka's): a sequence of 12-byte entries, big-endian,

    timestamp:       int64   (the greatest batch max timestamp seen so far in the segment)
    relative_offset: int32   (last offset of the batch that carried that timestamp, minus the
                              segment base offset)

Timestamps are strictly increasing and offsets non-decreasing: an entry is added, next to an
offset-index entry, only when the segment's max timestamp grew since the last entry; when the
segment stops being active (roll, close) one final entry records its max timestamp, so the last
entry of an inactive segment is the segment's max timestamp. Like the offset index the file is
append-only (not preallocated), mirrored in memory, and bounded by `segment.index.bytes`.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from kbroker.log.fileio import atomic_write, unlink_quietly, write_all

ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex:
    """Timestamp -> offset lookups for one segment."""

    ENTRY_SIZE = ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY_SIZE)
        self._timestamps: array[int] = array("q")
        self._offsets: array[int] = array("q")
        self._fd: int | None = None
        self.problem: str | None = None

    @classmethod
    def create(cls, path: Path, base_offset: int, max_index_bytes: int) -> TimeIndex:
        """A new, empty index file (an existing one is emptied)."""
        index = cls(path, base_offset, max_index_bytes)
        index._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
        return index

    @classmethod
    def open(cls, path: Path, base_offset: int, max_index_bytes: int) -> TimeIndex:
        """Load `path` (created empty if missing; `problem` says what is wrong with it)."""
        index = cls(path, base_offset, max_index_bytes)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            index.problem = "missing"
            data = b""
        if len(data) % cls.ENTRY_SIZE:
            index.problem = f"size {len(data)} is not a multiple of {cls.ENTRY_SIZE}"
        else:
            for ts, rel in ENTRY.iter_unpack(data):
                index._timestamps.append(ts)
                index._offsets.append(base_offset + rel)
            index.problem = index.problem or index._check_order()
        return index

    def _check_order(self) -> str | None:
        ts, offsets = self._timestamps, self._offsets
        if offsets and offsets[0] < self.base_offset:
            return "entry below the base offset"
        for i in range(1, len(ts)):
            if ts[i] <= ts[i - 1] or offsets[i] < offsets[i - 1]:
                return f"entries not increasing at entry {i}"
        return None

    def check_against(self, next_offset: int) -> None:
        """Flag the index when its last entry names an offset the log does not have."""
        if self.problem is None and self._offsets and self._offsets[-1] >= next_offset:
            self.problem = f"last entry offset {self._offsets[-1]} past the log end"

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (NO_TIMESTAMP, base offset)."""
        if not self._offsets:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self._offsets[-1]

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The entry with the greatest timestamp <= `timestamp`, else (NO_TIMESTAMP, base)."""
        i = bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[i], self._offsets[i]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is greater than the last entry's."""
        if self.is_full and not skip_full_check:
            return
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if self._offsets and offset < self._offsets[-1]:
            raise ValueError(f"time index offset {offset} below the last entry")
        write_all(self._file(), ENTRY.pack(timestamp, offset - self.base_offset))
        self._timestamps.append(timestamp)
        self._offsets.append(offset)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for `offset` and above."""
        keep = bisect_left(self._offsets, offset)
        if keep == len(self._offsets):
            return
        del self._timestamps[keep:]
        del self._offsets[keep:]
        os.ftruncate(self._file(), keep * self.ENTRY_SIZE)

    def replace(self, entries: list[tuple[int, int]]) -> None:
        """Rewrite the whole index (after a rebuild) through an atomic rename."""
        self._close_fd()
        atomic_write(self.path, b"".join(ENTRY.pack(t, o - self.base_offset) for t, o in entries))
        self._timestamps = array("q", (t for t, _ in entries))
        self._offsets = array("q", (o for _, o in entries))
        self.problem = None

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self._close_fd()

    def delete(self) -> None:
        self._close_fd()
        unlink_quietly(self.path)
