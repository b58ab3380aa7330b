"""Waiting in the purgatory: woken by a notification, or released by its deadline, and
nothing left registered afterwards."""

from __future__ import annotations

import asyncio

from kbroker.purgatory import Purgatory


async def test_notify_wakes_a_waiter_on_any_of_its_keys() -> None:
    purgatory = Purgatory()
    waiter = asyncio.create_task(purgatory.wait(["a", "b", "a"], 10))
    await asyncio.sleep(0)
    assert len(purgatory) == 1
    purgatory.notify("b")
    assert await asyncio.wait_for(waiter, 1) is True
    assert len(purgatory) == 0


async def test_deadline_releases_a_waiter() -> None:
    purgatory = Purgatory()
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await purgatory.wait(["a"], 0.05) is False
    assert loop.time() - started >= 0.04
    assert len(purgatory) == 0
    purgatory.notify("a")  # nobody waits any more


async def test_no_wait_without_time_left() -> None:
    assert await Purgatory().wait(["a"], 0) is False


async def test_a_cancelled_waiter_is_unregistered() -> None:
    purgatory = Purgatory()
    waiter = asyncio.create_task(purgatory.wait(["a"], 10))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert len(purgatory) == 0
    purgatory.notify("a")
