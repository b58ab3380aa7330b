"""The pure part of log compaction: which records of a batch survive, and the batch bytes
that carry them (no file IO, no clock; the cleaner passes `now_ms`).

Rules (Kafka's log cleaner, with KIP-534 delete horizons):
- a record survives when it has a key and no later offset holds that key (`latest[key]`,
  built over the dirty head, is not greater than its offset); keyless records are dropped;
- a tombstone (null value) survives until its batch's delete horizon has passed. The first
  time the cleaner retains a tombstone in a batch without a horizon, it stamps the batch with
  horizon = now + delete.retention.ms: the batch gets the delete-horizon attribute bit (0x40)
  and its baseTimestamp field holds the horizon (record timestamps stay exact: they are
  deltas from baseTimestamp);
- transactions (Kafka's CleanedTransactionMetadata), followed in offset order over the
  batches of one cleaned group with the aborted transactions overlapping it
  (`CleanedTransactions`): every record of an aborted transaction is removed (and kept out
  of the key map, so it cannot shadow a committed value); a transaction marker stays while
  any batch of its transaction is seen in the pass (an abort marker then also keeps its
  entry in the cleaned segment's aborted-transaction index). A marker whose transaction has
  no batch left is stamped with a delete horizon (now + delete.retention.ms, as tombstones
  are) and removed once it has passed, so consumers that read the data keep seeing the
  marker for that long;
- a batch left with no record is dropped, unless it is the last batch of its producer id
  (idempotence needs its sequence and epoch; for a marker, when the producer has no data
  batch left and the marker carries its current epoch, which fencing needs): it stays as an
  empty batch (the cleaner also keeps the last batch of each group of segments it rewrites,
  see swap.py);
- a rewritten batch keeps its base offset, last offset delta, producer id, epoch, base
  sequence, partition leader epoch, codec, timestamp type and transactional flag, so offsets
  never change and producer state replays identically.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kbroker.producer_state import AbortedTxn
from wire.records.batch import (
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    DELETE_HORIZON_BIT,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    BatchHeader,
    compute_crc,
)
from wire.records.compression import DecompressionLimitError, compress
from wire.records.control import read_end_txn_marker
from wire.records.record import Record, decode_batch, encode_records

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1


@dataclass(frozen=True)
class ActiveProducer:
    """What the cleaner needs of a producer the partition still tracks: its epoch and the
    last offset of its last data batch (None when it has none in that epoch)."""

    epoch: int
    last_data_offset: int | None


@dataclass
class _AbortedInProgress:
    txn: AbortedTxn
    batch_seen: bool = False


@dataclass
class CleanedTransactions:
    """The transaction state of one pass over batches in offset order (Kafka's
    CleanedTransactionMetadata); `cleaned_index` collects the aborted-transaction index
    entries of the output."""

    aborted: deque[AbortedTxn]
    _ongoing_aborted: dict[int, _AbortedInProgress] = field(default_factory=dict)
    _ongoing_committed: set[int] = field(default_factory=set)
    cleaned_index: list[AbortedTxn] = field(default_factory=list)

    @classmethod
    def of(cls, aborted: Iterable[AbortedTxn]) -> CleanedTransactions:
        unique = {(t.producer_id, t.first_offset): t for t in aborted}
        return cls(deque(sorted(unique.values(), key=lambda t: t.first_offset)))

    def _start_aborted_up_to(self, offset: int) -> None:
        while self.aborted and self.aborted[0].first_offset <= offset:
            txn = self.aborted.popleft()
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedInProgress(txn))

    def on_data_batch(self, header: BatchHeader) -> bool:
        """Whether the batch belongs to an aborted transaction (its records go)."""
        self._start_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted.batch_seen = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, data: bytes | memoryview) -> bool:
        """Whether the marker may be removed (once its delete horizon has passed)."""
        self._start_aborted_up_to(header.last_offset)
        marker = read_end_txn_marker(data)
        if marker is None:  # already emptied by an earlier clean, or not a marker
            return True
        if marker.commit:
            seen = header.producer_id in self._ongoing_committed
            self._ongoing_committed.discard(header.producer_id)
            return not seen
        aborted = self._ongoing_aborted.pop(header.producer_id, None)
        if aborted is not None and aborted.batch_seen:
            self.cleaned_index.append(aborted.txn)
            return False
        return True


def _last_of_producer(header: BatchHeader, producers: Mapping[int, ActiveProducer]) -> bool:
    """Whether the batch holds what the producer state needs of a still-tracked producer."""
    producer = producers.get(header.producer_id)
    if producer is None or not header.has_producer_id:
        return False
    if producer.last_data_offset is not None:
        return header.last_offset == producer.last_data_offset
    return header.is_control and header.producer_epoch == producer.epoch


@dataclass(frozen=True)
class FilterResult:
    """What became of one batch: `data` is None when the batch is dropped."""

    data: bytes | memoryview | None
    records_removed: int
    delete_horizon_ms: int | None


def encode_batch(
    header: BatchHeader, records: list[Record], *, delete_horizon_ms: int | None
) -> bytes:
    """A v2 batch with `header`'s batch-level fields and `records` (absolute offsets,
    exact timestamps), compressed with the header's codec."""
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
        base_timestamp = delete_horizon_ms
    elif records:
        base_timestamp = records[0].timestamp
    else:
        base_timestamp = header.max_timestamp
    if header.timestamp_type == 1 or not records:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(r.timestamp for r in records)
    body = encode_records(records, header.base_offset, base_timestamp)
    if header.compression:
        body = compress(header.compression, body)
    out = bytearray(BATCH_HEADER_SIZE + len(body))
    HEADER_STRUCT.pack_into(
        out,
        0,
        header.base_offset,
        len(out) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        2,
        0,
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(records),
    )
    out[BATCH_HEADER_SIZE:] = body
    out[CRC_OFFSET : CRC_OFFSET + 4] = compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return bytes(out)


def filter_batch(
    data: bytes | memoryview,
    header: BatchHeader,
    *,
    latest: Mapping[bytes, int],
    producers: Mapping[int, ActiveProducer],
    transactions: CleanedTransactions,
    now_ms: int,
    delete_retention_ms: int,
    max_message_bytes: int,
) -> FilterResult:
    """Apply the module's rules to one batch (`data` is its bytes); batches must come in
    offset order, as `transactions` follows them. A batch that would decompress past its
    cap is kept unchanged (and an error logged): never expanded."""
    if header.is_control:
        return _filter_marker(data, header, producers, transactions, now_ms, delete_retention_ms)
    if transactions.on_data_batch(header):
        return _drop_all(header, producers)
    try:
        _, records = decode_batch(data, max_message_bytes=max_message_bytes)
    except DecompressionLimitError as exc:
        log.error("log cleaner keeps batch at offset %d unfiltered: %s", header.base_offset, exc)
        return FilterResult(data, 0, None)
    horizon = header.base_timestamp if header.has_delete_horizon else None
    kept = []
    for record in records:
        if record.key is None or latest.get(record.key, record.offset) > record.offset:
            continue
        if record.value is None and horizon is not None and now_ms >= horizon:
            continue
        kept.append(record)
    removed = len(records) - len(kept)
    if horizon is None and any(r.value is None for r in kept):
        horizon = now_ms + delete_retention_ms
        stamp = True
    else:
        stamp = False
    if not kept:
        return _drop_all(header, producers, removed)
    if not removed and not stamp:
        return FilterResult(data, 0, horizon)
    return FilterResult(encode_batch(header, kept, delete_horizon_ms=horizon), removed, horizon)


def _drop_all(
    header: BatchHeader, producers: Mapping[int, ActiveProducer], removed: int | None = None
) -> FilterResult:
    """Every record goes; the batch stays empty when the producer state needs it."""
    removed = header.records_count if removed is None else removed
    if _last_of_producer(header, producers):
        return FilterResult(encode_batch(header, [], delete_horizon_ms=None), removed, None)
    return FilterResult(None, removed, None)


def _filter_marker(
    data: bytes | memoryview,
    header: BatchHeader,
    producers: Mapping[int, ActiveProducer],
    transactions: CleanedTransactions,
    now_ms: int,
    delete_retention_ms: int,
) -> FilterResult:
    horizon = header.base_timestamp if header.has_delete_horizon else None
    if not transactions.on_control_batch(header, data):
        return FilterResult(data, 0, horizon)
    if horizon is None:
        horizon = now_ms + delete_retention_ms
        _, records = decode_batch(data)
        return FilterResult(encode_batch(header, records, delete_horizon_ms=horizon), 0, horizon)
    if now_ms < horizon:
        return FilterResult(data, 0, horizon)
    return _drop_all(header, producers)
