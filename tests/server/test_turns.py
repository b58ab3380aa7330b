"""Addresses taking turns at the event loop (issue 29, item 2)."""

from __future__ import annotations

import asyncio

from kbroker.server.turns import StartGate, TurnTaking


def test_an_address_starts_at_most_its_share_of_a_turn_and_the_rest_wait_in_order() -> None:
    turns: TurnTaking[str] = TurnTaking(per_turn=2)
    assert turns.may_start("flood") and turns.may_start("flood")
    assert not turns.may_start("flood")
    for n in range(5):
        turns.wait("flood", f"f{n}")
    # Another address is not held up by the flood.
    assert turns.may_start("client")
    assert turns.next_turn() == ["f0", "f1"]
    # Newcomers of the flooding address queue behind its waiters, even in a new turn.
    assert not turns.may_start("flood")
    turns.wait("flood", "f5")
    assert turns.may_start("client")
    assert turns.next_turn() == ["f2", "f3"]
    assert turns.next_turn() == ["f4", "f5"]
    assert turns.waiting == 0 and turns.busy
    assert turns.next_turn() == []
    assert not turns.busy


def test_waiters_of_several_addresses_start_in_the_same_turn() -> None:
    turns: TurnTaking[str] = TurnTaking(per_turn=1)
    for address in ("a", "b"):
        assert turns.may_start(address)
        turns.wait(address, f"{address}1")
        turns.wait(address, f"{address}2")
    assert turns.next_turn() == ["a1", "b1"]
    assert not turns.may_start("a")
    assert turns.next_turn() == ["a2", "b2"]


async def test_a_flooding_address_does_not_delay_another_by_more_than_a_few_turns() -> None:
    gate = StartGate(per_turn=4)
    order: list[str] = []

    async def request(address: str, name: str) -> None:
        await gate.enter(address)
        order.append(name)

    flood = [asyncio.create_task(request("flood", f"f{n}")) for n in range(100)]
    await asyncio.sleep(0)
    client = asyncio.create_task(request("client", "client"))
    await asyncio.gather(client, *flood)
    # 4 flood requests in the first turn, then the client's, long before the flood's last.
    assert len(order) == 101 and order.index("client") <= 8
