"""The sparse offset index of one segment: `<20-digit base offset>.index`.

File format (Kafka's): a sequence of 8-byte entries, big-endian,

    relative_offset: int32   (offset - segment base offset)
    position:        int32   (byte position of a batch in the segment's .log file)

with strictly increasing offsets and positions. An entry maps the LAST offset of a batch to
the position where that batch starts, as Kafka does; one entry is added after at least
`index.interval.bytes` bytes were appended since the previous one.

Unlike Kafka, the file is NOT preallocated to `segment.index.bytes` and memory-mapped: it is
append-only and mirrored in memory (kbroker/log/entry_index.py), so a torn write can only leave
a short tail, never a zero-filled region. `segment.index.bytes` still bounds its size: when
`max_entries` are present the index is full and the segment rolls.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from pathlib import Path

from kbroker.log.entry_index import EntryIndex

ENTRY = struct.Struct(">ii")


class OffsetIndex(EntryIndex):
    """Offset -> file position lookups for one segment."""

    ENTRY = ENTRY
    ENTRY_SIZE = ENTRY.size
    OFFSET_COLUMN = 0

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._offsets, self._positions = self._columns

    def _pack(self, first: int, second: int) -> bytes:
        return ENTRY.pack(first - self.base_offset, second)

    def _unpack(self, fields: tuple[int, ...]) -> tuple[int, int]:
        rel, pos = fields
        return self.base_offset + rel, pos

    def _follows(self, i: int) -> bool:
        offsets, positions = self._offsets, self._positions
        return offsets[i] > offsets[i - 1] and positions[i] > positions[i - 1]

    def check_against(self, log_size: int) -> None:
        """Flag the index when its last entry points past the end of the log file."""
        if self.problem is None and self._positions and self._positions[-1] >= log_size:
            self.problem = f"last entry position {self._positions[-1]} past the log end"

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
        self._append_entry(offset, position)
