"""Addresses take turns at the event loop (issue 29, item 2).

Every connection's worker handles its requests one at a time, and all workers share one
event loop: when 500 connections flood the broker with cheap requests (Metadata, ApiVersions,
empty fetches), each turn of the loop handles one request of every one of them before it
comes back to anyone else's, and a producer's request waits a second behind them. So at
most ``per_turn`` requests of one client address start being handled in one turn of the
loop; the others wait for the next turns, in arrival order, while other addresses' requests
go on. One address alone still has the whole broker: its turns are just short.

Kafka has the same problem and no default answer (its request queue is first come, first
served; its request_percentage quotas apply to users and client ids once configured).

``TurnTaking`` is the bookkeeping; ``StartGate`` runs it on an asyncio loop.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Generic, TypeVar

Waiter = TypeVar("Waiter")


class TurnTaking(Generic[Waiter]):
    """Counts the requests each address started this turn and queues the rest."""

    def __init__(self, per_turn: int) -> None:
        self.per_turn = per_turn
        self._started: collections.Counter[str] = collections.Counter()
        self._waiting: dict[str, collections.deque[Waiter]] = {}

    def may_start(self, address: str) -> bool:
        """Whether a request of ``address`` may start now (counted if so)."""
        if self._started[address] >= self.per_turn or address in self._waiting:
            return False
        self._started[address] += 1
        return True

    def wait(self, address: str, waiter: Waiter) -> None:
        self._waiting.setdefault(address, collections.deque()).append(waiter)

    def next_turn(self) -> list[Waiter]:
        """A new turn: the waiters that start in it (at most ``per_turn`` an address)."""
        self._started.clear()
        starting: list[Waiter] = []
        for address in list(self._waiting):
            queue = self._waiting[address]
            count = min(self.per_turn, len(queue))
            starting += (queue.popleft() for _ in range(count))
            self._started[address] = count
            if not queue:
                del self._waiting[address]
        return starting

    @property
    def busy(self) -> bool:
        """Whether a turn has started requests or waiters (another turn must come)."""
        return bool(self._started or self._waiting)

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())


class StartGate:
    """``await gate.enter(address)`` before handling a request. A turn ends when the event
    loop gets round to the callback scheduled at its first start."""

    def __init__(self, per_turn: int) -> None:
        self.turns: TurnTaking[asyncio.Future[None]] = TurnTaking(per_turn)
        self._turn_scheduled = False

    async def enter(self, address: str) -> None:
        turns = self.turns
        if turns.may_start(address):
            self._schedule_turn()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        turns.wait(address, waiter)
        self._schedule_turn()
        await waiter

    def _schedule_turn(self) -> None:
        if not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._turn_scheduled = False
        for waiter in self.turns.next_turn():
            if not waiter.done():
                waiter.set_result(None)
        if self.turns.busy:
            self._schedule_turn()
