"""Leader epoch -> start offset history of one partition: `leader-epoch-checkpoint`.

File format (Kafka's, text, one item per line, "\\n" line ends):

    0                        the format version
    <count>                  the number of entries
    <epoch> <start offset>   count lines, epochs and start offsets strictly increasing

The start offset of an epoch is the first offset written by a leader in that epoch. The file
is rewritten whenever the history changes, through a temporary file, fsync and an atomic
rename, by the log's syncer (background_sync.py: off the event loop, before any later
recovery-point checkpoint, so the recovery point never passes an epoch start the file lacks).
The history answers OffsetForLeaderEpoch (KIP-101, KIP-279): the end offset of an epoch is the
start offset of the next greater epoch, or the log end offset for the latest.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kbroker.log.background_sync import INLINE, Syncer
from kbroker.log.fileio import atomic_write_in, open_dir

log = logging.getLogger(__name__)

FILE_NAME = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def parse_checkpoint(text: str) -> list[tuple[int, int]]:
    """Entries of a checkpoint file; raises ValueError when it is malformed."""
    lines = text.splitlines()
    if len(lines) < 2 or int(lines[0]) != VERSION:
        raise ValueError("bad leader epoch checkpoint header")
    count = int(lines[1])
    if count < 0 or len(lines) - 2 < count:
        raise ValueError("leader epoch checkpoint shorter than its count")
    entries = []
    for line in lines[2 : 2 + count]:
        epoch, offset = line.split()
        entries.append((int(epoch), int(offset)))
    return entries


def format_checkpoint(entries: list[tuple[int, int]]) -> str:
    body = "".join(f"{epoch} {offset}\n" for epoch, offset in entries)
    return f"{VERSION}\n{len(entries)}\n{body}"


class LeaderEpochCache:
    """The epoch history, persisted to `<partition dir>/leader-epoch-checkpoint`."""

    def __init__(self, directory: Path, syncer: Syncer = INLINE) -> None:
        self.path = directory / FILE_NAME
        self._syncer = syncer
        self._epochs: list[int] = []
        self._starts: list[int] = []
        # The history the file holds (None: unknown, write it at the next change), and
        # whether writes wait for the end of a batch of changes (see `batched`).
        self._on_disk: list[tuple[int, int]] | None = None
        self._batching = False
        try:
            entries = parse_checkpoint(self.path.read_text())
        except FileNotFoundError:
            entries = []
        except ValueError as exc:
            # A bad checkpoint loses only the history; recovery of the log re-assigns epochs
            # for the batches it scans.
            log.warning("ignoring %s: %s", self.path, exc)
            entries = []
        for epoch, start in entries:
            self._put(epoch, start)
        if self.entries() == entries:
            self._on_disk = entries

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def _put(self, epoch: int, start_offset: int) -> None:
        # Entries are kept monotonic: a new entry removes every entry with a greater or equal
        # epoch or start offset, as Kafka's cache does.
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (no-op when already known)."""
        if epoch < 0 or start_offset < 0:
            return
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return
        self._put(epoch, start_offset)
        self._persist()

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after `end_offset` (the log was truncated there)."""
        keep = bisect_left(self._starts, end_offset)
        if keep < len(self._starts):
            del self._epochs[keep:]
            del self._starts[keep:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly before the new log start; the epoch spanning it starts there."""
        i = bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = start_offset
        self._persist()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) per KIP-101/279: the greatest known epoch <= `epoch` and the
        start offset of the first epoch after it (the log end offset for the latest epoch);
        (-1, -1) when unknown."""
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than anything we know: the requested epoch ends where our history begins.
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self._persist()

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Changes made inside are written once, at the end, and only when the history then
        differs from the file's: recovery after a crash forgets the tail's epochs and
        re-derives them from its batches, usually the history it started with, and writing
        each step cost four fsyncs a partition at start-up."""
        self._batching = True
        try:
            yield
        finally:
            self._batching = False
        self._persist()

    def _persist(self) -> None:
        entries = self.entries()
        if self._batching or entries == self._on_disk:
            return
        data = format_checkpoint(entries).encode()
        directory = self.path.parent
        dir_fd = open_dir(directory)
        self._syncer.submit(directory.parent, lambda: atomic_write_in(dir_fd, FILE_NAME, data))
        self._on_disk = entries
