"""The sparse time index of one segment: `<20-digit base offset>.timeindex`.

File format (Kafka's): a sequence of 12-byte entries, big-endian,

    timestamp:       int64   (the greatest batch max timestamp seen so far in the segment)
    relative_offset: int32   (last offset of the batch that carried that timestamp, minus the
                              segment base offset)

Timestamps are strictly increasing and offsets non-decreasing: an entry is added, next to an
offset-index entry, only when the segment's max timestamp grew since the last entry; when the
segment stops being active (roll, close) one final entry records its max timestamp, so the last
entry of an inactive segment is the segment's max timestamp. Like the offset index the file is
append-only (not preallocated), mirrored in memory, and bounded by `segment.index.bytes`
(kbroker/log/entry_index.py).
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from pathlib import Path

from kbroker.log.entry_index import EntryIndex

ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(EntryIndex):
    """Timestamp -> offset lookups for one segment."""

    ENTRY = ENTRY
    ENTRY_SIZE = ENTRY.size
    OFFSET_COLUMN = 1

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._timestamps, self._offsets = self._columns

    def _pack(self, first: int, second: int) -> bytes:
        return ENTRY.pack(first, second - self.base_offset)

    def _unpack(self, fields: tuple[int, ...]) -> tuple[int, int]:
        ts, rel = fields
        return ts, self.base_offset + rel

    def _follows(self, i: int) -> bool:
        ts, offsets = self._timestamps, self._offsets
        return ts[i] > ts[i - 1] and offsets[i] >= offsets[i - 1]

    def check_against(self, next_offset: int) -> None:
        """Flag the index when its last entry names an offset the log does not have."""
        if self.problem is None and self._offsets and self._offsets[-1] >= next_offset:
            self.problem = f"last entry offset {self._offsets[-1]} past the log end"

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
        self._append_entry(timestamp, offset)
