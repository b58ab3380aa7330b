"""Start-up recovery of a partition's segments (DESIGN.md rule 6).

Which segments are scanned:
- after an unclean shutdown (no `.kafka_cleanshutdown` marker), the segments from
  `validate_from` on: the one holding the recovery point (everything below it was fsynced)
  and those after it; without a recovery point, the active (last) segment: every older
  segment was fsynced when it rolled, so only the active one can hold a torn write;
- always, any segment whose offset or time index is missing or fails the sanity checks
  (size not a multiple of the entry size, entries not increasing, last entry past the end of
  the log), or whose file does not end with a whole batch (found while locating its end).
A scanned segment is validated batch by batch (header sanity, increasing offsets within the
segment's int32 range, CRC-32C), truncated at the first invalid batch with a warning, and gets
both indexes rebuilt. When an older segment had to be truncated, the segments after it are
deleted: the log cannot continue past a hole.

Leader epochs: before the tail segment is scanned, epochs starting in it are forgotten; each
scanned batch then records its epoch when it is greater than the latest known one (as Kafka's
recovery does), so the history of the scanned range is re-derived from the batches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kbroker.log.leader_epochs import LeaderEpochCache
from kbroker.log.segment import LogSegment
from wire.records.batch import BatchHeader

log = logging.getLogger(__name__)


def _epoch_assigner(epochs: LeaderEpochCache) -> Callable[[BatchHeader], None]:
    def on_batch(header: BatchHeader) -> None:
        if header.partition_leader_epoch > epochs.latest_epoch():
            epochs.assign(header.partition_leader_epoch, header.base_offset)

    return on_batch


def recover_segments(
    segments: list[LogSegment],
    *,
    unclean: bool,
    epochs: LeaderEpochCache,
    validate_from: int | None = None,
) -> list[int]:
    """Recover what needs it, in place, updating the leader epoch history from the scanned
    batches. Returns the base offsets of the segments scanned."""
    on_batch = _epoch_assigner(epochs)
    if validate_from is None:
        validate_from = segments[-1].base_offset
    scanned: list[int] = []
    tail_scanned = False
    i = 0
    while i < len(segments):
        segment = segments[i]
        is_last = i == len(segments) - 1
        if not segment.loaded:
            i += 1
            continue
        validate = unclean and segment.base_offset >= validate_from
        if not (segment.needs_rebuild or validate):
            i += 1
            continue
        if segment.needs_rebuild:
            log.warning(
                "%s: recovering (offset index: %s, time index: %s, log: %s)",
                segment.log_path,
                segment.index.problem or "ok",
                segment.time_index.problem or "ok",
                segment.tail_problem or "ok",
            )
        scanned.append(segment.base_offset)
        if (validate or is_last) and not tail_scanned and segment.size:
            # The epochs of the scanned tail are re-derived from its batches (an empty
            # segment re-derives nothing: an epoch starting at its base stays).
            epochs.truncate_from_end(segment.base_offset)
            tail_scanned = True
        truncated = segment.recover(on_batch)
        if truncated and not is_last:
            for later in segments[i + 1 :]:
                log.warning("%s: deleted, it follows a truncated segment", later.log_path)
                later.delete_files()
                later.close()
            del segments[i + 1 :]
        i += 1
    return scanned
