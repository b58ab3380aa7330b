"""read_committed on the client side (KIP-98): which fetched batches a consumer drops.

A Fetch with isolation_level 1 returns data below the last stable offset, where records of
aborted transactions still sit, with the list of those transactions (producer id and first
offset) in the range. A consumer walks the batches in offset order: a producer's
transactional batches are dropped from the first offset of one of its aborted transactions
until that transaction's ABORT marker; control batches are never shown (the consumer logic of
Kafka's clients, "Fetcher" in the Java client).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from wire.records.batch import BatchHeader
from wire.records.control import ABORT, control_type
from wire.records.record import Buffer, decode_batch


class AbortedFilter:
    """Feed it every v2 batch of one partition's fetch, in order; `drop` says which to
    leave out. `aborted`: the response's (producer id, first offset) pairs."""

    __slots__ = ("_pending", "_open")

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        # Aborted transactions not reached yet, by first offset.
        self._pending = [(first, producer) for producer, first in aborted]
        heapq.heapify(self._pending)
        # Producers whose aborted transaction the walk is inside.
        self._open: set[int] = set()

    def drop(self, header: BatchHeader, batch: Buffer) -> bool:
        """Whether the batch is left out; call for each batch, control batches included."""
        if header.producer_id >= 0:
            pending = self._pending
            while pending and pending[0][0] <= header.last_offset:
                self._open.add(heapq.heappop(pending)[1])
        if header.is_control:
            if header.producer_id in self._open:
                _, records = decode_batch(batch)
                if records and control_type(records[0]) == ABORT:
                    self._open.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._open
