"""Control records: the content of control batches (attribute bit 5), KIP-98.

A control record's key is version int16 (0) and type int16 (0 ABORT, 1 COMMIT; other types
exist in newer Kafka and are skipped by consumers). A transaction marker's value (Kafka's
EndTransactionMarker) is version int16 (0) and coordinatorEpoch int32. The batch carrying a
marker is transactional, has the producer's id and epoch, no sequence (-1), and holds exactly
one record.
"""

import struct
from typing import NamedTuple

from wire.errors import ErrorCode, KafkaError
from wire.records.record import Buffer, Record, build_batch, decode_batch

ABORT = 0
COMMIT = 1

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class EndTxnMarker(NamedTuple):
    """What a transaction marker says: how the transaction ended, and by which coordinator
    epoch."""

    commit: bool
    coordinator_epoch: int


def end_txn_marker(commit: bool, coordinator_epoch: int, *, offset: int, timestamp: int) -> Record:
    """The control record ending a transaction, to be wrapped by build_batch(...,
    control=True, transactional=True, producer_id=..., producer_epoch=...)."""
    return Record(
        offset,
        timestamp,
        _KEY.pack(0, COMMIT if commit else ABORT),
        _MARKER_VALUE.pack(0, coordinator_epoch),
        [],
    )


def end_txn_marker_batch(
    marker: EndTxnMarker, *, producer_id: int, producer_epoch: int, timestamp: int
) -> bytes:
    """A whole control batch carrying `marker` (base offset 0, assigned at append)."""
    record = end_txn_marker(marker.commit, marker.coordinator_epoch, offset=0, timestamp=timestamp)
    return build_batch(
        [record],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def control_type(record: Record) -> int:
    """The type of a control record (ABORT, COMMIT, ...)."""
    if record.key is None or len(record.key) < _KEY.size:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "control record key too short")
    return _KEY.unpack_from(record.key)[1]


def marker_coordinator_epoch(record: Record) -> int:
    """The coordinator epoch of a transaction marker record."""
    if record.value is None or len(record.value) < _MARKER_VALUE.size:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "transaction marker value too short")
    return _MARKER_VALUE.unpack_from(record.value)[1]


def read_end_txn_marker(batch: Buffer) -> EndTxnMarker | None:
    """The marker of the control batch `batch`; None when it holds none (a control batch the
    cleaner emptied, or a control type other than ABORT/COMMIT)."""
    _, records = decode_batch(batch)
    if not records:
        return None
    kind = control_type(records[0])
    if kind not in (ABORT, COMMIT):
        return None
    return EndTxnMarker(kind == COMMIT, marker_coordinator_epoch(records[0]))
