"""Producer state snapshot files."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from kbroker.log import producer_snapshot
from kbroker.producer_state import BatchMetadata, ProducerEntry


def sample() -> dict[int, ProducerEntry]:
    entry = ProducerEntry(epoch=3, last_timestamp=1234)
    for i in range(5):
        entry.batches.append(BatchMetadata(i, i, 10 + i, 10 + i, 1000 + i))
    return {42: entry, 7: ProducerEntry(epoch=0, last_timestamp=5)}


def test_round_trip() -> None:
    decoded = producer_snapshot.decode(producer_snapshot.encode(sample()))
    assert decoded == sample()


@pytest.mark.parametrize("position", [0, 5, 6, 10, 20, 40])
def test_any_flipped_byte_is_detected(position: int) -> None:
    data = bytearray(producer_snapshot.encode(sample()))
    data[position] ^= 0x40
    with pytest.raises(producer_snapshot.SnapshotError):
        producer_snapshot.decode(bytes(data))


def test_truncated_snapshot_is_detected() -> None:
    data = producer_snapshot.encode(sample())
    with pytest.raises(producer_snapshot.SnapshotError):
        producer_snapshot.decode(data[:-3])


def test_load_latest_skips_and_deletes_corrupt_ones(tmp_path: Path) -> None:
    producer_snapshot.write(tmp_path, 10, sample())
    producer_snapshot.write(tmp_path, 20, {})
    producer_snapshot.write(tmp_path, 30, {})
    assert (tmp_path / "00000000000000000010.snapshot").exists()
    producer_snapshot.snapshot_path(tmp_path, 20).write_bytes(b"KBPS torn")
    loaded = producer_snapshot.load_latest(tmp_path, 25)
    assert loaded is not None and loaded[0] == 10 and loaded[1] == sample()
    assert producer_snapshot.offsets(tmp_path) == [10, 30]
    producer_snapshot.delete_outside(tmp_path, 11, 40)
    assert producer_snapshot.offsets(tmp_path) == [30]


def test_transaction_fields_round_trip() -> None:
    entries = {
        5: ProducerEntry(
            epoch=1, last_timestamp=9, coordinator_epoch=3, current_txn_first_offset=77
        )
    }
    assert producer_snapshot.decode(producer_snapshot.encode(entries)) == entries


def test_version_1_snapshots_are_still_read() -> None:
    body = struct.pack(">i", 1) + struct.pack(">qhqb", 42, 3, 1234, 1)
    body += struct.pack(">iiqqq", 0, 4, 10, 14, 1000)
    data = struct.pack(">4shI", b"KBPS", 1, crc32c.crc32c(body)) + body
    entry = producer_snapshot.decode(data)[42]
    assert (entry.epoch, entry.coordinator_epoch, entry.current_txn_first_offset) == (3, -1, -1)
    assert entry.batches[0] == BatchMetadata(0, 4, 10, 14, 1000)
