"""The time a coroutine spends running, not waiting.

Kafka's request quota (KIP-124, ``request_percentage``) charges a client for the time
request threads spend on its requests: the handler's own work, not the time a request
waits in a purgatory (a long-polling fetch, an acks=all produce). One asyncio thread serves
every connection, so neither the wall time of a request nor the thread's CPU time says
that; the time between each resumption of the request's coroutine and its next suspension
does. ``BusyTimer`` drives a coroutine step by step, as a task would, and adds those up.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class BusyTimer(Generic[T]):
    """``await BusyTimer(coro)`` is ``await coro``; afterwards ``seconds`` is the time the
    coroutine ran (its suspensions excluded)."""

    __slots__ = ("_coro", "seconds")

    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self._coro = coro
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, T]:
        coro = self._coro
        to_send: Any = None
        to_throw: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                if to_throw is not None:
                    yielded = coro.throw(to_throw)
                else:
                    yielded = coro.send(to_send)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            finally:
                self.seconds += time.perf_counter() - started
            try:
                to_send, to_throw = (yield yielded), None
            except BaseException as exc:  # cancellation included: handed to the coroutine
                to_send, to_throw = None, exc
