"""The broker-wide memory pool (queued.max.request.bytes)."""

from __future__ import annotations

from collections.abc import Callable

from kbroker.server.memory_pool import MemoryPool


def test_reserve_within_capacity_and_force_past_it() -> None:
    pool = MemoryPool(100)
    assert pool.try_reserve(60)
    assert not pool.try_reserve(50)
    assert pool.used == 60
    pool.force_reserve(50)
    assert pool.exhausted and pool.used == 110


def test_release_wakes_waiters_in_order_while_memory_remains() -> None:
    pool = MemoryPool(100)
    pool.force_reserve(100)
    calls: list[str] = []

    def waiter(name: str, wants: int) -> Callable[[], None]:
        def call() -> None:
            calls.append(name)
            if not pool.try_reserve(wants):
                pool.wait(call)

        return call

    pool.wait(waiter("a", 30))
    pool.wait(waiter("b", 10))
    pool.wait(waiter("c", 10))
    pool.release(25)
    # a does not fit and waits again, behind the others: b and c, which fit, are not held
    # up by it.
    assert calls == ["a", "b", "c"] and pool.waiting == 1 and pool.used == 95
    pool.release(40)
    assert calls[-1] == "a" and pool.waiting == 0


def test_share_waiters_are_woken_by_a_share_given_back_not_by_releases() -> None:
    pool = MemoryPool(100)
    calls: list[str] = []
    pool.wait_for_share(lambda: calls.append("parked"))
    pool.force_reserve(10)
    pool.release(10)
    assert calls == []
    pool.share_released()
    assert calls == ["parked"] and pool.waiting == 0


def test_unbounded_pool_never_refuses() -> None:
    pool = MemoryPool(None)
    assert pool.try_reserve(1 << 40) and not pool.exhausted
