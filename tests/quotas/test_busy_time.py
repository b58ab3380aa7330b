"""BusyTimer: the time a coroutine runs, without the time it waits (request_percentage)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kbroker.busy_time import BusyTimer


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _work_and_wait() -> str:
    _spin(0.05)
    await asyncio.sleep(0.3)
    _spin(0.05)
    return "done"


async def test_counts_running_time_not_waiting() -> None:
    timer = BusyTimer(_work_and_wait())
    started = time.perf_counter()
    assert await timer == "done"
    assert time.perf_counter() - started >= 0.4
    assert 0.1 <= timer.seconds < 0.25


async def test_other_tasks_running_meanwhile_are_not_counted() -> None:
    async def others() -> None:
        await asyncio.sleep(0.01)
        _spin(0.2)

    neighbour = asyncio.create_task(others())
    timer = BusyTimer(_work_and_wait())
    await timer
    await neighbour
    assert timer.seconds < 0.2


async def test_exceptions_and_cancellation_reach_the_coroutine() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await BusyTimer(fails())

    cleaned = asyncio.Event()

    async def long() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.set()

    task = asyncio.ensure_future(BusyTimer(long()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned.is_set()
