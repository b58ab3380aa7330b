"""TLS handshakes take turns by client address (issue 29).

A server's TLS handshake costs about 0.4 ms of CPU (the key exchange and the signature of
a P-256 certificate, measured on this project's 2-core machine), on the one event loop
every connection shares, and asyncio runs the handshakes of all the connections whose data
has arrived before it comes back to anyone else. 300 connections of one address arriving
together (an unauthenticated client reconnecting a pool in a loop) made the loop run 300
handshakes back to back, and every established client's requests waited about 200 ms each
time. So at most a few handshakes of one address are under way at once
(``ssl.max.handshakes.per.ip``); that address's other accepted connections wait their turn
in arrival order, and other addresses' handshakes go on. One address alone still gets
handshakes as fast as the loop does them, a few at a time, with other work between them.

Kafka runs handshakes on its network threads, first come first served, with no such
bound. ``HandshakeTurns`` is the bookkeeping, no sockets; listener.py runs it.
"""

from __future__ import annotations

import collections
from typing import Generic, TypeVar

Item = TypeVar("Item")


class HandshakeTurns(Generic[Item]):
    """Handshakes under way by address, and the accepted connections waiting for one."""

    def __init__(self) -> None:
        self._running: collections.Counter[str] = collections.Counter()
        self._waiting: dict[str, collections.deque[Item]] = {}

    def admit(self, address: str, item: Item, limit: int) -> bool:
        """True: ``item``'s handshake starts now (counted until ``finished``); False: it
        waits for one of the address's handshakes to finish."""
        if self._running[address] < limit and address not in self._waiting:
            self._running[address] += 1
            return True
        self._waiting.setdefault(address, collections.deque()).append(item)
        return False

    def finished(self, address: str) -> Item | None:
        """A handshake of ``address`` ended (done, failed or cancelled): the next waiting
        item of that address, whose handshake starts now in its place, if any."""
        queue = self._waiting.get(address)
        if queue:
            item = queue.popleft()
            if not queue:
                del self._waiting[address]
            return item
        self._running[address] -= 1
        if self._running[address] <= 0:
            del self._running[address]
        return None

    def drain(self) -> list[Item]:
        """Every waiting item, taken off (the listener is closing)."""
        items = [item for queue in self._waiting.values() for item in queue]
        self._waiting.clear()
        return items

    @property
    def running(self) -> int:
        return sum(self._running.values())

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())
