"""The broker-wide budget for request and response bytes (``queued.max.request.bytes``).

Every connection's frame decoder reserves from one pool before it grows a request buffer,
and the bytes of responses a slow reader leaves in the transport's write buffer are charged
too. When the pool is spent a connection stops reading its socket (back-pressure) and waits
here; each release wakes the waiters in arrival order while memory remains. Kafka's
equivalent is its SimpleMemoryPool, unbounded by default (-1); kbroker bounds it by default.

Who may take how much of it is fair_share.FairShare's rule: a connection refused for being
at its share waits in a queue of its own, woken when a partial large request gives its
share back, so that the many connections of an attack, parked at their shares, are not
retried at every release.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from kbroker.server.fair_share import FairShare

# A waiter is called when what it waits for may have happened; when it still cannot go on
# it waits again (MemoryPool.wait or wait_for_share).
Waiter = Callable[[], None]

# A request announcing at most this is small (fair_share.py): the producers' default
# largest request (max.request.size, message.max.bytes) is 1 MiB.
SMALL_REQUEST_BYTES = 1024 * 1024


class MemoryPool:
    """A byte budget; ``capacity`` None means unbounded."""

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.used = 0
        self.fair_share = FairShare(capacity, SMALL_REQUEST_BYTES)
        self._waiters: collections.deque[Waiter] = collections.deque()
        self._share_waiters: collections.deque[Waiter] = collections.deque()

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
        self._wake(self._waiters)

    def share_released(self) -> None:
        """A partial large request gave back its share (completed or went away)."""
        self._wake(self._share_waiters)

    def _wake(self, waiters: collections.deque[Waiter]) -> None:
        # Each waiter present now is tried once, in order; one that waits again goes to
        # the back, so a large step that does not fit holds up no smaller one.
        for _ in range(len(waiters)):
            if self.exhausted or not waiters:
                return
            waiters.popleft()()

    def wait(self, waiter: Waiter) -> None:
        """Call ``waiter`` once memory is released (in turn with the others waiting)."""
        self._waiters.append(waiter)

    def wait_for_share(self, waiter: Waiter) -> None:
        """Call ``waiter`` once a partial large request gives its share back."""
        self._share_waiters.append(waiter)

    @property
    def waiting(self) -> int:
        return len(self._waiters) + len(self._share_waiters)
