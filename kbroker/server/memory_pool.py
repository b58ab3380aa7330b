"""The broker-wide budget for request and response bytes (``queued.max.request.bytes``).

Every connection's frame decoder reserves from one pool before it grows a request buffer,
and the bytes of responses a slow reader leaves in the transport's write buffer are charged
too. When the pool is spent a connection stops reading its socket (back-pressure) and waits
here; each release wakes the waiters in arrival order while memory remains. Kafka's
equivalent is its SimpleMemoryPool, unbounded by default (-1); kbroker bounds it by default.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

# A waiter is called when memory was released; it returns False when it still could not get
# what it needs (it stays first in line), True when it is done waiting.
Waiter = Callable[[], bool]


class MemoryPool:
    """A byte budget; ``capacity`` None means unbounded."""

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiters: collections.deque[Waiter] = collections.deque()

    @property
    def exhausted(self) -> bool:
        return self.capacity is not None and self.used >= self.capacity

    def try_reserve(self, nbytes: int) -> bool:
        if self.capacity is not None and self.used + nbytes > self.capacity:
            return False
        self.used += nbytes
        return True

    def force_reserve(self, nbytes: int) -> None:
        self.used += nbytes

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        waiters = self._waiters
        while waiters and not self.exhausted:
            waiter = waiters.popleft()
            if not waiter():
                waiters.appendleft(waiter)
                return

    def wait(self, waiter: Waiter) -> None:
        """Call ``waiter`` once memory is released (in turn with the others waiting)."""
        self._waiters.append(waiter)

    @property
    def waiting(self) -> int:
        return len(self._waiters)
