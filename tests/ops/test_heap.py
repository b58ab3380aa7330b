"""The broker process's collector policy (kbroker/heap.py): start-up without collections,
then the heap frozen, collected in full at each settling."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from kbroker import heap


class Node:
    def __init__(self) -> None:
        self.peer: Node | None = None


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()


def _cycle() -> weakref.ref[Node]:
    """A reference cycle no one else holds: only the collector frees it."""
    a, b = Node(), Node()
    a.peer, b.peer = b, a
    return weakref.ref(a)


def test_start_up_runs_without_the_collector() -> None:
    assert gc.isenabled()
    with heap.collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), heap.collector_paused():
        raise RuntimeError("start failed")
    assert gc.isenabled()


def test_settling_collects_what_died_and_freezes_the_rest() -> None:
    dead = _cycle()
    heap.settle()
    assert dead() is None
    assert gc.get_freeze_count() > 0
    kept = Node()  # made after the settling: the collector walks it
    assert any(o is kept for o in gc.get_objects())
    heap.settle()
    assert not any(o is kept for o in gc.get_objects())


def test_a_frozen_cycle_that_dies_is_collected_at_the_next_settling() -> None:
    a, b = Node(), Node()
    a.peer, b.peer = b, a
    ref = weakref.ref(a)
    heap.settle()  # frozen while alive
    del a, b
    gc.collect()
    assert ref() is not None  # the collector skips frozen objects
    heap.settle()
    assert ref() is None


async def test_settling_repeats() -> None:
    task = asyncio.create_task(heap.settle_periodically(0.01))
    await asyncio.sleep(0.05)
    task.cancel()
    assert gc.get_freeze_count() > 0
