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
- control batches (transaction markers) are kept whole: this broker has no aborted
  transaction index to prove a marker is no longer needed;
- a batch left with no record is dropped, unless it is the last batch of its producer id
  (idempotence needs its sequence and epoch): it stays as an empty batch (the cleaner also
  keeps the last batch of each group of segments it rewrites, see swap.py);
- a rewritten batch keeps its base offset, last offset delta, producer id, epoch, base
  sequence, partition leader epoch, codec, timestamp type and transactional flag, so offsets
  never change and producer state replays identically.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

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
from wire.records.record import Record, decode_batch, encode_records

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1


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
    producer_last_offsets: Mapping[int, int],
    now_ms: int,
    delete_retention_ms: int,
    max_message_bytes: int,
) -> FilterResult:
    """Apply the module's rules to one batch (`data` is its bytes). A batch that would
    decompress past its cap is kept unchanged (and an error logged): never expanded."""
    if header.is_control:
        return FilterResult(data, 0, None)
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
        if header.has_producer_id and producer_last_offsets.get(header.producer_id) == (
            header.last_offset
        ):
            return FilterResult(encode_batch(header, [], delete_horizon_ms=None), removed, None)
        return FilterResult(None, removed, None)
    if not removed and not stamp:
        return FilterResult(data, 0, horizon)
    return FilterResult(encode_batch(header, kept, delete_horizon_ms=horizon), removed, horizon)
