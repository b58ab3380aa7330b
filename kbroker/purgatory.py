"""Where requests that cannot be answered yet wait for their partitions to move.

A long-polling Fetch (min_bytes not reached, max_wait_ms not over) and, once
replication exists, an acks=all Produce wait here. Waiters register on
partition keys and are woken by `notify` when those partitions change (an
append, a high-watermark move); every wait has a deadline, so nothing waits
forever. The number of waiters is bounded by the number of connections, as each
connection has at most one request in progress.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future[None]]] = {}

    def __len__(self) -> int:
        return len({id(f) for watchers in self._watchers.values() for f in watchers})

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until one of `keys` is notified or `timeout` seconds pass.

        Returns True when woken by a notification, False on timeout.
        """
        if timeout <= 0:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        watched = list(dict.fromkeys(keys))
        for key in watched:
            self._watchers.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for key in watched:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(future)
                    if not watchers:
                        del self._watchers[key]

    def notify(self, key: Hashable) -> None:
        for future in self._watchers.get(key, ()):
            if not future.done():
                future.set_result(None)
