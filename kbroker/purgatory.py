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
        self._watchers: dict[Hashable, set[asyncio.Future[bool]]] = {}

    def __len__(self) -> int:
        return len({id(f) for watchers in self._watchers.values() for f in watchers})

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until one of `keys` is notified or `timeout` seconds pass.

        Returns True when woken by a notification, False on timeout.
        """
        if timeout <= 0:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        # A timer handle instead of asyncio.wait_for, which costs a task wrapper per wait
        # on the Fetch hot path.
        timer = loop.call_later(timeout, _resolve, future, False)
        watched = list(dict.fromkeys(keys))
        for key in watched:
            self._watchers.setdefault(key, set()).add(future)
        try:
            return await future
        finally:
            timer.cancel()
            for key in watched:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(future)
                    if not watchers:
                        del self._watchers[key]

    def notify(self, key: Hashable) -> None:
        for future in self._watchers.get(key, ()):
            _resolve(future, True)


def _resolve(future: asyncio.Future[bool], woken: bool) -> None:
    if not future.done():
        future.set_result(woken)
