"""The aborted-transaction index of a segment: `<20-digit base offset>.txnindex` (Kafka's
TransactionIndex, KIP-98).

One entry per aborted transaction whose abort marker lies in the segment, in the order the
markers were appended (so last offsets increase). Entries are 34 bytes, big-endian:

    version             int16   0
    producer_id         int64
    first_offset        int64   the transaction's first offset (may lie in an earlier segment)
    last_offset         int64   the abort marker's offset
    last_stable_offset  int64   the partition's LSO once the marker was written

The file exists only for segments that have entries: it is created by the first `append`
(one write per entry, fsynced with the segment), cut by `truncate_to` with the segment,
renamed with the segment's other files (`.deleted`, `.cleaned`, `.swap`, segment.py), and
replaced whole (`replace`, atomic) when recovery rebuilds it from the batches. A torn tail (a
partial entry, or one of an unknown version) is dropped when the file is read.

Readers (Fetch with read_committed) ask `collect(start, upper)`: the entries of transactions
overlapping [start, upper), and whether the search may stop at this segment (an entry whose
last stable offset is at or past `upper` proves later segments hold nothing overlapping).
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

from kbroker.log.fileio import atomic_write, fsync, unlink_quietly, write_all
from kbroker.producer_state import AbortedTxn

log = logging.getLogger(__name__)

SUFFIX = ".txnindex"
VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size


def encode(entry: AbortedTxn) -> bytes:
    return _ENTRY.pack(
        VERSION, entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset
    )


def decode(data: bytes) -> tuple[list[AbortedTxn], int]:
    """The whole, known entries of `data` and the byte length they cover."""
    entries = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != VERSION:
            return entries, pos
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries, len(entries) * ENTRY_SIZE


class TxnIndex:
    """The index file of one segment; its entries are read once, on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self._dirty = False

    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            self._entries, valid = decode(data)
            if valid != len(data):
                log.warning("%s: dropping %d bytes of torn entries", self.path, len(data) - valid)
                os.truncate(self.path, valid)
        return self._entries

    def append(self, entry: AbortedTxn) -> None:
        entries = self.entries()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            write_all(fd, encode(entry))
        finally:
            os.close(fd)
        entries.append(entry)
        self._dirty = True

    def collect(self, start: int, upper: int) -> tuple[list[AbortedTxn], bool]:
        """Entries whose transaction overlaps [start, upper), and whether the search is
        complete (Kafka's TransactionIndex.collectAbortedTxns)."""
        found = []
        for entry in self.entries():
            if entry.last_offset >= start and entry.first_offset < upper:
                found.append(entry)
            if entry.last_stable_offset >= upper:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset`."""
        entries = self.entries()
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) == len(entries):
            return
        self._entries = kept
        if kept:
            os.truncate(self.path, len(kept) * ENTRY_SIZE)
            self._dirty = True
        else:
            unlink_quietly(self.path)

    def replace(self, entries: list[AbortedTxn]) -> None:
        """Rewrite the whole index (recovery), atomically; no file when `entries` is empty."""
        self._entries = list(entries)
        if entries:
            atomic_write(self.path, b"".join(encode(e) for e in entries))
        else:
            unlink_quietly(self.path)
        self._dirty = False

    def flush(self) -> None:
        if not self._dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._dirty = False
            return
        try:
            fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def take_unsynced(self) -> int | None:
        """A descriptor of the file when written since the last fsync, for a background fsync
        (background_sync.py); the index counts as synced from then on."""
        if not self._dirty:
            return None
        self._dirty = False
        try:
            return os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None

    def delete(self) -> None:
        unlink_quietly(self.path)
        self._entries = []
