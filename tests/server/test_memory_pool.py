"""The broker-wide memory pool (queued.max.request.bytes)."""

from __future__ import annotations

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

    def waiter(name: str, wants: int) -> object:
        def call() -> bool:
            calls.append(name)
            return pool.try_reserve(wants)

        return call

    pool.wait(waiter("a", 20))  # type: ignore[arg-type]
    pool.wait(waiter("b", 20))  # type: ignore[arg-type]
    pool.wait(waiter("c", 30))  # type: ignore[arg-type]
    pool.release(50)
    # a and b fit; c is tried, does not fit, and stays first in line.
    assert calls == ["a", "b", "c"] and pool.waiting == 1
    pool.release(30)
    assert calls[-1] == "c" and pool.waiting == 0


def test_unbounded_pool_never_refuses() -> None:
    pool = MemoryPool(None)
    assert pool.try_reserve(1 << 40) and not pool.exhausted
