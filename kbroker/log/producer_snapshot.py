"""Producer state snapshots: `<20-digit offset>.snapshot` in the partition directory.

A snapshot named N holds the producer state after every batch below offset N. It is written
when a segment rolls (N = the new segment's base offset), straight to its name on the event
loop and fsynced in the background after the sealed segment (background_sync.py; Kafka, too,
stopped fsyncing it in the request path: KAFKA-9693, KAFKA-15046), and at clean shutdown
(N = the log end offset) through a temporary file, fsync and an atomic rename. A crash may
leave the newest one torn or empty: its CRC fails and it is deleted. On open the log loads the
newest readable snapshot at or below its end offset and replays the batch headers after it.

File format (kbroker's own; big-endian):

    magic           4 bytes  b"KBPS"
    version         int16    2 (1: without the two transaction fields, still read)
    crc             uint32   CRC-32C (Castagnoli) of every byte after this field
    producer_count  int32
    producer_count times:
        producer_id                int64
        epoch                      int16
        last_timestamp             int64
        coordinator_epoch          int32    (v2) of the last transaction marker, -1 if none
        current_txn_first_offset   int64    (v2) first offset of the open transaction, -1
        batch_count                int8     0..5, oldest first
        batch_count times:
            first_seq     int32
            last_seq      int32
            first_offset  int64
            last_offset   int64
            timestamp     int64

The fields are those of Kafka's producer snapshot entries (producer id, epoch, sequences,
offsets, timestamp, coordinator epoch, current transaction first offset), but unlike Kafka's
snapshots (last batch only) all cached batches are kept, so duplicate detection of the last
five batches survives a restart. Transactions closed by a marker the high watermark has not
passed are not kept (nor are they in Kafka's).
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import crc32c

from kbroker.log.fileio import atomic_write, unlink_quietly, write_all
from kbroker.producer_state import NUM_BATCHES_TO_RETAIN, BatchMetadata, ProducerEntry

log = logging.getLogger(__name__)

SUFFIX = ".snapshot"
MAGIC = b"KBPS"
VERSION = 2
_HEAD = struct.Struct(">4shI")
_COUNT = struct.Struct(">i")
_PRODUCER = {1: struct.Struct(">qhqb"), 2: struct.Struct(">qhqiqb")}
_BATCH = struct.Struct(">iiqqq")


class SnapshotError(ValueError):
    """A snapshot file that cannot be trusted."""


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SUFFIX}"


def encode(entries: dict[int, ProducerEntry]) -> bytes:
    body = bytearray(_COUNT.pack(len(entries)))
    for pid, entry in sorted(entries.items()):
        body += _PRODUCER[VERSION].pack(
            pid,
            entry.epoch,
            entry.last_timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
            len(entry.batches),
        )
        for b in entry.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
    return _HEAD.pack(MAGIC, VERSION, crc32c.crc32c(body)) + bytes(body)


def decode(data: bytes) -> dict[int, ProducerEntry]:
    """Parse a snapshot; raises SnapshotError when it is torn or corrupt."""
    try:
        magic, version, crc = _HEAD.unpack_from(data, 0)
        if magic != MAGIC or version not in _PRODUCER:
            raise SnapshotError("unknown snapshot magic or version")
        producer = _PRODUCER[version]
        body = memoryview(data)[_HEAD.size :]
        if crc32c.crc32c(body) != crc:
            raise SnapshotError("snapshot CRC mismatch")
        (count,) = _COUNT.unpack_from(body, 0)
        pos = _COUNT.size
        entries: dict[int, ProducerEntry] = {}
        for _ in range(count):
            fields = producer.unpack_from(body, pos)
            pos += producer.size
            pid, epoch, last_ts, nbatches = fields[0], fields[1], fields[2], fields[-1]
            if not 0 <= nbatches <= NUM_BATCHES_TO_RETAIN:
                raise SnapshotError("bad batch count in snapshot")
            entry = ProducerEntry(epoch=epoch, last_timestamp=last_ts)
            if version >= 2:
                entry.coordinator_epoch, entry.current_txn_first_offset = fields[3], fields[4]
            for _ in range(nbatches):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries[pid] = entry
    except struct.error as exc:
        raise SnapshotError(f"truncated snapshot: {exc}") from exc
    if pos != len(body):
        raise SnapshotError("trailing bytes in snapshot")
    return entries


def write(directory: Path, offset: int, entries: dict[int, ProducerEntry]) -> None:
    atomic_write(snapshot_path(directory, offset), encode(entries))


def write_unsynced(directory: Path, offset: int, entries: dict[int, ProducerEntry]) -> int:
    """Write the snapshot straight to its name, without an fsync; returns its descriptor, for
    the caller to fsync and close."""
    fd = os.open(snapshot_path(directory, offset), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, encode(entries))
    except BaseException:
        os.close(fd)
        raise
    return fd


def offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files present, ascending."""
    found = []
    for name in os.listdir(directory):
        stem = name[: -len(SUFFIX)]
        if name.endswith(SUFFIX) and len(stem) == 20 and stem.isdigit():
            found.append(int(stem))
    return sorted(found)


def load_latest(
    directory: Path, upto: int, present: list[int] | None = None
) -> tuple[int, dict[int, ProducerEntry]] | None:
    """The newest valid snapshot with offset <= `upto` (corrupt ones are deleted)."""
    for offset in reversed(offsets(directory) if present is None else present):
        if offset > upto:
            continue
        path = snapshot_path(directory, offset)
        try:
            return offset, decode(path.read_bytes())
        except (SnapshotError, OSError) as exc:
            log.warning("deleting unreadable producer snapshot %s: %s", path, exc)
            unlink_quietly(path)
    return None


def delete_outside(directory: Path, low: int, high: int) -> list[int]:
    """Delete snapshots below `low` or above `high`."""
    kept = []
    for offset in offsets(directory):
        if offset < low or offset > high:
            unlink_quietly(snapshot_path(directory, offset))
        else:
            kept.append(offset)
    return kept
