"""TLS handshakes take turns by client address (issue 29): the bookkeeping, then a real TLS
listener of an in-process broker with clients from two loopback addresses."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.server.handshake_turns import HandshakeTurns
from tests.server.conftest import start_tls_broker
from tests.server.test_request_memory import wait_until

ATTACKER = "127.0.0.2"


def test_an_address_runs_at_most_its_limit_and_the_rest_wait_in_order() -> None:
    turns: HandshakeTurns[str] = HandshakeTurns()
    assert [turns.admit("a", f"a{i}", 2) for i in range(4)] == [True, True, False, False]
    assert turns.admit("b", "b0", 2)
    assert (turns.running, turns.waiting) == (3, 2)
    assert turns.finished("a") == "a2"
    assert turns.finished("a") == "a3"
    # A newcomer of a busy address queues behind the waiting ones even with a slot free.
    assert turns.finished("a") is None
    assert turns.admit("a", "a4", 2)
    assert (turns.running, turns.waiting) == (3, 0)


def test_drain_takes_every_waiting_item() -> None:
    turns: HandshakeTurns[str] = HandshakeTurns()
    for i in range(3):
        turns.admit("a", f"a{i}", 1)
    turns.admit("b", "b0", 1)
    turns.admit("b", "b1", 1)
    assert sorted(turns.drain()) == ["a1", "a2", "b1"]
    assert turns.waiting == 0
    assert turns.finished("a") is None


@pytest.fixture
async def tls_broker(tmp_path: Path) -> AsyncIterator[tuple[Broker, ssl.SSLContext]]:
    broker, client = await start_tls_broker(tmp_path, "SSL", **{"ssl.max.handshakes.per.ip": "2"})
    try:
        yield broker, client
    finally:
        await broker.stop()


def _silent_connections(port: int, count: int) -> list[socket.socket]:
    """Connections from the attacker's address that never send a ClientHello."""
    silent = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind((ATTACKER, 0))
        sock.connect(("127.0.0.1", port))
        silent.append(sock)
    return silent


async def _tls_connect(
    port: int, context: ssl.SSLContext, source: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, local_addr=(source, 0), ssl_handshake_timeout=30
    )


async def test_an_address_holding_its_handshakes_delays_only_its_own_connections(
    tls_broker: tuple[Broker, ssl.SSLContext],
) -> None:
    broker, context = tls_broker
    port = broker.ports["SSL"]
    turns = broker.server.handshake_turns
    # Two connections that never send a ClientHello hold the attacker's two handshakes.
    silent = _silent_connections(port, 2)
    await wait_until(lambda: turns.running == 2, 30)
    waiting = asyncio.create_task(_tls_connect(port, context, ATTACKER))
    await wait_until(lambda: turns.waiting == 1, 30)
    # Another address is not held up: its handshake runs beside the two silent ones.
    _, writer = await asyncio.wait_for(_tls_connect(port, context, "127.0.0.1"), 30)
    writer.close()
    assert not waiting.done() and turns.waiting == 1
    for sock in silent:
        sock.close()
    _, writer = await asyncio.wait_for(waiting, 30)
    writer.close()
    await wait_until(lambda: turns.running == 0, 30)


async def test_waiting_connections_are_closed_when_the_broker_stops(
    tls_broker: tuple[Broker, ssl.SSLContext],
) -> None:
    broker, _ = tls_broker
    port = broker.ports["SSL"]
    turns = broker.server.handshake_turns
    silent = _silent_connections(port, 3)
    await wait_until(lambda: turns.waiting == 1, 30)
    await broker.server.close(grace_seconds=1)
    assert turns.waiting == 0
    silent[2].settimeout(30)
    assert silent[2].recv(1) == b""
    for sock in silent:
        sock.close()
