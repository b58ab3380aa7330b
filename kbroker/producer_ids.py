"""Producer id allocation: ids from blocks the metadata backend gives out once in the cluster.

The backend's blocks (controller/producer_id_blocks.py) are unique cluster-wide and across
restarts, so an idempotent producer served by one broker never gets an id a transaction
coordinator on another broker gave out. Handing out one id is synchronous (the transaction
coordinator's pure core asks for one in the middle of a decision): ``ensure_available`` is
awaited first, which takes a block from the backend when none is left. As Kafka's
RPCProducerIdManager does, the next block is fetched ahead once 90% of the current one is used,
so a busy broker rarely waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from controller.producer_id_blocks import ProducerIdBlock
from wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

# Fetch the next block once this share of the current one is handed out.
PREFETCH_AT = 0.9


class ProducerIdAllocator:
    def __init__(self, allocate_block: Callable[[], Awaitable[ProducerIdBlock]]) -> None:
        self._allocate_block = allocate_block
        self._block: ProducerIdBlock | None = None
        self._next = 0
        self._prefetched: ProducerIdBlock | None = None
        self._fetch: asyncio.Task[ProducerIdBlock] | None = None

    def _available(self) -> bool:
        return self._block is not None and self._next <= self._block.last

    async def ensure_available(self) -> None:
        """Return once ``next_id`` has an id to give; KafkaError(COORDINATOR_LOAD_IN_PROGRESS),
        which clients retry, when the backend cannot give a block now."""
        if self._available() or self._prefetched is not None:
            return
        task = self._start_fetch()
        try:
            await asyncio.shield(task)
        except Exception as exc:
            raise KafkaError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"no producer id block yet: {exc!r}"
            ) from exc

    def _start_fetch(self) -> asyncio.Task[ProducerIdBlock]:
        if self._fetch is None:
            self._fetch = asyncio.get_running_loop().create_task(self._fetch_block())
        return self._fetch

    async def _fetch_block(self) -> ProducerIdBlock:
        try:
            block = await self._allocate_block()
        except Exception:
            log.warning("could not take a producer id block", exc_info=True)
            raise
        finally:
            self._fetch = None
        self._prefetched = block
        return block

    def next_id(self) -> int:
        """An id never handed out before in the cluster; after ``ensure_available``."""
        if not self._available():
            if self._prefetched is None:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "no producer id block yet")
            self._block, self._prefetched = self._prefetched, None
            self._next = self._block.first
        assert self._block is not None
        producer_id = self._next
        self._next += 1
        used = self._next - self._block.first
        fetching = self._fetch is not None or self._prefetched is not None
        if used >= PREFETCH_AT * self._block.size and not fetching:
            self._start_fetch().add_done_callback(_retrieve_exception)
        return producer_id


def _retrieve_exception(task: asyncio.Task[ProducerIdBlock]) -> None:
    """A failed prefetch was logged; the next ``ensure_available`` tries again."""
    if not task.cancelled():
        task.exception()
