"""The sparse offset index of one segment: `<20-digit base offset>.index`.

File format (Kafka's): a sequence of 8-byte entries, big-endian,

    relative_offset: int32   (offset - segment base offset)
    position:        int32   (byte position of a batch in the segment's .log file)

with strictly increasing offsets and positions. An entry maps the LAST offset of a batch to
the position where that batch starts, as Kafka does; one entry is added after at least
`index.interval.bytes` bytes were appended since the previous one.

Unlike Kafka, the file is NOT preallocated to `segment.index.bytes` and memory-mapped: it is
append-only (each entry is one write) and mirrored in memory for binary search, so a torn
write can only leave a short tail, never a zero-filled region. `segment.index.bytes` still
bounds its size: when `max_entries` are present the index is full and the segment rolls.
Rebuilding replaces the file through a temporary name and an atomic rename.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from kbroker.log.fileio import atomic_write, unlink_quietly, write_all

ENTRY = struct.Struct(">ii")


class OffsetIndex:
    """Offset -> file position lookups for one segment."""

    ENTRY_SIZE = ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY_SIZE)
        self._offsets: array[int] = array("q")
        self._positions: array[int] = array("q")
        self._fd: int | None = None
        # Why the file cannot be trusted (None when it was loaded cleanly).
        self.problem: str | None = None

    @classmethod
    def create(cls, path: Path, base_offset: int, max_index_bytes: int) -> OffsetIndex:
        """A new, empty index file (an existing one is emptied)."""
        index = cls(path, base_offset, max_index_bytes)
        index._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
        return index

    @classmethod
    def open(cls, path: Path, base_offset: int, max_index_bytes: int) -> OffsetIndex:
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
            for rel, pos in ENTRY.iter_unpack(data):
                index._offsets.append(base_offset + rel)
                index._positions.append(pos)
            index.problem = index.problem or index._check_order()
        return index

    def _check_order(self) -> str | None:
        offsets, positions = self._offsets, self._positions
        if offsets and offsets[0] < self.base_offset:
            return "entry below the base offset"
        for i in range(1, len(offsets)):
            if offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1]:
                return f"entries not increasing at entry {i}"
        return None

    def check_against(self, log_size: int) -> None:
        """Flag the index when its last entry points past the end of the log file."""
        if self.problem is None and self._positions and self._positions[-1] >= log_size:
            self.problem = f"last entry position {self._positions[-1]} past the log end"

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_position(self) -> int:
        """Position of the last indexed batch (0 when empty)."""
        return self._positions[-1] if self._positions else 0

    def lookup(self, offset: int) -> tuple[int, int]:
        """The greatest entry with offset <= `offset`, else (base offset, 0)."""
        i = bisect_right(self._offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self._offsets[i], self._positions[i]

    def fits(self, offset: int) -> bool:
        """Whether `offset` is representable as a relative int32 offset."""
        return 0 <= offset - self.base_offset <= 0x7FFFFFFF

    def append(self, offset: int, position: int) -> None:
        if self.is_full:
            return
        if self._offsets and (offset <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(f"index entry ({offset}, {position}) is not increasing")
        write_all(self._file(), ENTRY.pack(offset - self.base_offset, position))
        self._offsets.append(offset)
        self._positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for `offset` and above."""
        keep = bisect_left(self._offsets, offset)
        if keep == len(self._offsets):
            return
        del self._offsets[keep:]
        del self._positions[keep:]
        os.ftruncate(self._file(), keep * self.ENTRY_SIZE)

    def replace(self, entries: list[tuple[int, int]]) -> None:
        """Rewrite the whole index (after a rebuild) through an atomic rename."""
        self._close_fd()
        atomic_write(self.path, b"".join(ENTRY.pack(o - self.base_offset, p) for o, p in entries))
        self._offsets = array("q", (o for o, _ in entries))
        self._positions = array("q", (p for _, p in entries))
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
