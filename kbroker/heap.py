"""The broker process's garbage collector policy: long-lived objects are frozen.

A broker's heap is mostly objects that live as long as it does: the logs, segments, indexes
and partition state of every partition it hosts (some 50 per partition). CPython's full
collection walks all of them, and with 12,000 partitions (600,000 objects) each one took
250 ms, a pause for every client, set off every few seconds by requests that build many
objects (a fetch of 10,000 partitions).

So the broker process freezes its heap (gc.freeze: the collector ignores those objects from
then on) once it has started, and every SETTLE_SECONDS it unfreezes, collects in full and
freezes again: what died in between (a deleted topic's partitions, whose objects hold
reference cycles) is collected then, so nothing leaks for longer than that, and between
settlings the collector walks only what was made since. Start-up itself runs without the
collector: everything it makes is kept.

Only the `kbroker start` process does this (kbroker.broker.serve), never a test process that
runs brokers beside other work.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

# One full collection of the whole heap every ten minutes.
SETTLE_SECONDS = 600.0


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection inside (start-up: every object made is kept)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def settle() -> float:
    """Collect the whole heap, then freeze what is left; the seconds it took."""
    started = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - started


async def settle_periodically(interval: float = SETTLE_SECONDS) -> None:
    while True:
        await asyncio.sleep(interval)
        took = settle()
        log.debug("heap settled in %.0f ms, %d objects frozen", took * 1000, gc.get_freeze_count())
