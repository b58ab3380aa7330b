"""What the segment index files have in common: a file of fixed-size entries of two integers.

File format: the entries back to back, no header, each packed with the subclass's big-endian
``ENTRY`` struct (the offset index's ``.index``, the time index's ``.timeindex``; each module
documents its own layout). One of the two fields is an offset stored relative to the segment's
base offset. The file is append-only (one write per entry, never preallocated or
memory-mapped), so a torn write can only leave a short tail; its entries are mirrored in memory
as two columns of absolute values for binary search. ``segment.index.bytes`` bounds it to
``max_entries``. A rebuild replaces the whole file through a temporary name and an atomic rename.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Self

from kbroker.log.fileio import atomic_write, fsync, unlink_quietly, write_all
from kbroker.log.open_indexes import OPEN_INDEXES


class EntryIndex:
    """The file and the in-memory columns; subclasses say what the two fields mean."""

    ENTRY: ClassVar[struct.Struct]
    # The column holding offsets: truncation cuts there, and none may be below the base offset.
    OFFSET_COLUMN: ClassVar[int]

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY.size)
        # Always the same two arrays (replace() refills them), so subclasses may name them.
        self._columns: tuple[array[int], array[int]] = (array("q"), array("q"))
        self._fd: int | None = None
        # Written since the last fsync (an evicted descriptor is fsynced before it closes).
        self._unsynced = False
        # Why the file cannot be trusted (None when it was loaded cleanly or created).
        self.problem: str | None = "not read"

    # --- what subclasses define ------------------------------------------------------------

    def _pack(self, first: int, second: int) -> bytes:
        """One entry of the file from its absolute values."""
        raise NotImplementedError

    def _unpack(self, fields: tuple[int, ...]) -> tuple[int, int]:
        """The absolute values of one entry read from the file."""
        raise NotImplementedError

    def _follows(self, i: int) -> bool:
        """Whether entry ``i`` may come after entry ``i - 1``."""
        raise NotImplementedError

    # --- shared ----------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, base_offset: int, max_index_bytes: int) -> Self:
        """A new, empty index file (an existing one is emptied)."""
        index = cls(path, base_offset, max_index_bytes)
        index._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
        index.problem = None
        OPEN_INDEXES.used(index)
        return index

    @classmethod
    def open(cls, path: Path, base_offset: int, max_index_bytes: int) -> Self:
        """Load `path` (created empty if missing; `problem` says what is wrong with it)."""
        index = cls(path, base_offset, max_index_bytes)
        index.problem = None
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            index.problem = "missing"
            data = b""
        size = cls.ENTRY.size
        if len(data) % size:
            index.problem = f"size {len(data)} is not a multiple of {size}"
        else:
            first, second = index._columns
            for fields in cls.ENTRY.iter_unpack(data):
                a, b = index._unpack(fields)
                first.append(a)
                second.append(b)
            index.problem = index.problem or index._check_order()
        return index

    def _check_order(self) -> str | None:
        offsets = self._columns[self.OFFSET_COLUMN]
        if offsets and offsets[0] < self.base_offset:
            return "entry below the base offset"
        for i in range(1, len(offsets)):
            if not self._follows(i):
                return f"entries not increasing at entry {i}"
        return None

    def __len__(self) -> int:
        return len(self._columns[0])

    @property
    def is_full(self) -> bool:
        return len(self._columns[0]) >= self.max_entries

    def _append_entry(self, first: int, second: int) -> None:
        write_all(self._file(), self._pack(first, second))
        self._unsynced = True
        self._columns[0].append(first)
        self._columns[1].append(second)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for `offset` and above."""
        keep = bisect_left(self._columns[self.OFFSET_COLUMN], offset)
        if keep == len(self):
            return
        for column in self._columns:
            del column[keep:]
        os.ftruncate(self._file(), keep * self.ENTRY.size)
        self._unsynced = True

    def replace(self, entries: Sequence[tuple[int, int]]) -> None:
        """Rewrite the whole index (after a rebuild) through an atomic rename; nothing is
        written when the file already holds exactly these entries (recovery after a crash
        usually rebuilds the index that is there)."""
        rebuilt_first = array("q", (a for a, _ in entries))
        rebuilt_second = array("q", (b for _, b in entries))
        first, second = self._columns
        if self.problem is None and first == rebuilt_first and second == rebuilt_second:
            return
        self._close_fd()
        atomic_write(self.path, b"".join(self._pack(a, b) for a, b in entries))
        first[:] = rebuilt_first
        second[:] = rebuilt_second
        self.problem = None

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        OPEN_INDEXES.used(self)
        return self._fd

    def flush(self) -> None:
        if self._fd is not None and self._unsynced:
            fsync(self._fd)
            self._unsynced = False

    def take_unsynced(self) -> int | None:
        """A duplicate of the descriptor when written since the last fsync, for a background
        fsync (background_sync.py); the index counts as synced from then on."""
        if self._fd is None or not self._unsynced:
            return None
        self._unsynced = False
        return os.dup(self._fd)

    def release_fd(self) -> None:
        """Close the descriptor to stay within the open-index bound (open_indexes.py)."""
        if self._fd is not None:
            if self._unsynced:
                fsync(self._fd)
                self._unsynced = False
            os.close(self._fd)
            self._fd = None

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            OPEN_INDEXES.closed(self)

    def close(self) -> None:
        self._close_fd()

    def delete(self) -> None:
        self._close_fd()
        unlink_quietly(self.path)
