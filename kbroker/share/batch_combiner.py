"""How the share coordinator combines a write's state batches with the stored ones (KIP-932).

Each offset ends up in the state Kafka's ``PersisterStateBatchCombiner`` gives it (checked
against that class on random cases, tests/share/test_batch_combiner.py):

- batches ending before the share partition's start offset are dropped and a batch straddling
  it keeps only its part from the start offset on (no pruning when the start offset is -1);
- where batches overlap, each offset takes the state of the batch with the highest
  (delivery count, delivery state): a later delivery wins, and for one delivery the state
  that is further along (available 0 < acknowledged 2 < archived 4);
- the result is sorted, without overlaps, and adjacent batches with the same delivery count
  and state are merged; offsets no batch covers stay uncovered.

Kafka's combiner sometimes leaves two neighbours in the same state apart; this one always
merges them. A batch whose first offset is past its last covers nothing and is dropped.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from kbroker.share.persister_api import StateBatch

NO_START_OFFSET = -1


def _pruned(batches: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    kept = []
    for batch in batches:
        if batch.first_offset > batch.last_offset:
            continue
        if start_offset != NO_START_OFFSET:
            if batch.last_offset < start_offset:
                continue
            if batch.first_offset < start_offset:
                batch = StateBatch(
                    start_offset, batch.last_offset, batch.delivery_state, batch.delivery_count
                )
        kept.append(batch)
    return kept


def combine_batches(
    stored: Iterable[StateBatch], written: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    """The stored batches with the written ones laid over them, from ``start_offset`` on."""
    batches = _pruned([*stored, *written], start_offset)
    if len(batches) < 2:
        return tuple(batches)
    batches.sort(key=lambda b: b.first_offset)
    bounds = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    # The batches covering the current segment, best first: (-count, -state, last offset).
    active: list[tuple[int, int, int]] = []
    out: list[StateBatch] = []
    following = 0
    for low, high in zip(bounds, bounds[1:], strict=False):
        while following < len(batches) and batches[following].first_offset <= low:
            b = batches[following]
            heapq.heappush(active, (-b.delivery_count, -b.delivery_state, b.last_offset))
            following += 1
        while active and active[0][2] < low:
            heapq.heappop(active)
        if not active:
            continue
        count, state = -active[0][0], -active[0][1]
        last = out[-1] if out else None
        if (
            last is not None
            and last.last_offset + 1 == low
            and (last.delivery_count, last.delivery_state) == (count, state)
        ):
            out[-1] = StateBatch(last.first_offset, high - 1, state, count)
        else:
            out.append(StateBatch(low, high - 1, state, count))
    return tuple(out)
