"""Request memory, back-pressure and connection timeouts, over raw sockets against an
in-process broker (issue 13, item 1)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.config import ConfigError
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_connection import assert_serving
from wire.api_keys import ApiKey
from wire.frame import encode_request
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.request_header import RequestHeader

StartBroker = Callable[..., Awaitable[Broker]]


@pytest.fixture
async def start_broker(tmp_path: Path) -> AsyncIterator[StartBroker]:
    started: list[Broker] = []

    async def start(**overrides: str) -> Broker:
        instance = Broker(broker_config(tmp_path / f"data{len(started)}", free_port(), **overrides))
        await instance.start()
        started.append(instance)
        return instance

    try:
        yield start
    finally:
        for instance in started:
            await instance.stop()


def padded_api_versions(correlation_id: int, padding: int) -> bytes:
    """An ApiVersions v0 request padded with trailing bytes (ignored, as Kafka does) to make
    a frame of any size."""
    header = RequestHeader(
        request_api_key=ApiKey.API_VERSIONS, request_api_version=0, correlation_id=correlation_id
    )
    frame = encode_request(header, ApiVersionsRequest(), 0)
    return struct.pack(">i", len(frame) - 4 + padding) + frame[4:] + b"\0" * padding


async def wait_until(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_announced_frames_cost_what_arrived_not_what_they_announce(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker()
    pool = broker.server.pool
    clients = [await RawClient.connect(broker.port) for _ in range(40)]
    for c in clients:
        c.writer.write(struct.pack(">i", 100 * 1024 * 1024 - 1) + b"\x00\x12\x00\x00" * 5000)
        await c.writer.drain()
    await wait_until(lambda: pool.used >= 40 * 20_000)
    # 40 x 100 MB announced; each holds what arrived plus at most one growth step.
    assert pool.used <= 40 * 2 * 64 * 1024
    await assert_serving(broker)
    for c in clients:
        await c.close()
    await wait_until(lambda: pool.used == 0)


async def test_spent_pool_pauses_reading_until_memory_is_released(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker(
        socket_request_max_bytes="1000000", queued_max_request_bytes="1000000"
    )
    pool = broker.server.pool
    hog = await RawClient.connect(broker.port)
    hog_frame = padded_api_versions(1, 900_000)
    hog.writer.write(hog_frame[:-100])
    await hog.writer.drain()
    await wait_until(lambda: pool.used >= 850_000)
    second = await RawClient.connect(broker.port)
    second.writer.write(padded_api_versions(2, 500_000))
    await second.writer.drain()
    await wait_until(lambda: pool.waiting == 1)
    assert pool.used <= 1_000_000
    # The second request cannot complete while the hog holds the pool.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(second.reader.readexactly(4), 0.5)
    await hog.close()
    size = struct.unpack(">i", await asyncio.wait_for(second.reader.readexactly(4), 10))[0]
    assert struct.unpack(">i", (await second.reader.readexactly(size))[:4])[0] == 2
    await second.close()
    await wait_until(lambda: pool.used == 0)


async def test_stalled_partial_request_is_closed_after_the_read_timeout(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker(request_read_timeout_ms="300")
    stalled = await RawClient.connect(broker.port)
    stalled.writer.write(padded_api_versions(1, 50_000)[:1000])
    busy = await RawClient.connect(broker.port)
    started = time.monotonic()
    assert await stalled.closed_by_peer(timeout=5)
    assert time.monotonic() - started < 4
    # A connection with no partial request is left alone (idle timeout is 10 minutes).
    await assert_serving(broker)
    assert not await busy.closed_by_peer(timeout=0.3)
    await busy.close()
    await stalled.close()


async def test_idle_connection_is_closed_after_connections_max_idle_ms(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker(connections_max_idle_ms="400")
    idle = await RawClient.connect(broker.port)
    await idle.call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
    assert await idle.closed_by_peer(timeout=5)
    await idle.close()
    await assert_serving(broker)


async def test_unread_responses_are_charged_to_the_pool(start_broker: StartBroker) -> None:
    broker = await start_broker()
    pool = broker.server.pool
    sock = socket.socket()
    # A small receive window, so the responses back up into the broker quickly.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", broker.port))
    sock.setblocking(False)
    reader = RawClient(*await asyncio.open_connection(sock=sock, limit=4096))
    requests = b"".join(padded_api_versions(i, 0) for i in range(20_000))
    reader.writer.write(requests)
    # The client reads nothing: responses fill the socket buffers, then the transport's.
    await wait_until(lambda: pool.used > 64 * 1024)
    received = 0
    while received < 20_000:
        size = struct.unpack(">i", await asyncio.wait_for(reader.reader.readexactly(4), 10))[0]
        await reader.reader.readexactly(size)
        received += 1
    await wait_until(lambda: pool.used == 0)
    await reader.close()


def test_budget_smaller_than_the_largest_request_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="queued.max.request.bytes"):
        broker_config(tmp_path, 0, queued_max_request_bytes="1000")


async def test_a_request_we_stopped_reading_is_not_timed_out(start_broker: StartBroker) -> None:
    broker = await start_broker(
        socket_request_max_bytes="1000000",
        queued_max_request_bytes="1000000",
        request_read_timeout_ms="1000",
    )
    pool = broker.server.pool
    hog = await RawClient.connect(broker.port)
    hog.writer.write(padded_api_versions(1, 900_000)[:-100])
    await wait_until(lambda: pool.used >= 850_000)
    waiting = await RawClient.connect(broker.port)
    waiting.writer.write(padded_api_versions(2, 500_000))
    await wait_until(lambda: pool.waiting == 1)
    # The stalled hog is closed by the read timeout; the request the broker held back
    # (not read for want of memory) is not, and is answered once memory is free.
    assert await hog.closed_by_peer(timeout=5)
    size = struct.unpack(">i", await asyncio.wait_for(waiting.reader.readexactly(4), 10))[0]
    assert struct.unpack(">i", (await waiting.reader.readexactly(size))[:4])[0] == 2
    for client in (hog, waiting):
        await client.close()


async def test_partial_request_is_closed_as_idle_without_a_read_timeout(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker(request_read_timeout_ms="-1", connections_max_idle_ms="400")
    stalled = await RawClient.connect(broker.port)
    stalled.writer.write(padded_api_versions(1, 50_000)[:1000])
    assert await stalled.closed_by_peer(timeout=5)
    await stalled.close()


async def test_well_behaved_client_is_served_while_partial_large_requests_hold_their_shares(
    start_broker: StartBroker,
) -> None:
    """Issue 29: connections that announce large requests and send part of them can take
    only their shares of the pool outside the reserve; a client's ordinary requests still
    arrive and are answered."""
    mb = 1024 * 1024
    broker = await start_broker(
        socket_request_max_bytes=str(20 * mb), queued_max_request_bytes=str(20 * mb)
    )
    pool = broker.server.pool
    hogs = [await RawClient.connect(broker.port) for _ in range(12)]
    for hog in hogs:
        # 12 x 2 MB sent of 20 MB announced: more than the whole pool.
        hog.writer.write(padded_api_versions(1, 20 * mb - 100)[: 2 * mb])
    await wait_until(lambda: pool.waiting >= len(hogs) - 2, timeout=30)
    assert pool.fair_share.large_held <= 15 * mb
    client = await RawClient.connect(broker.port)
    for correlation_id in (7, 8):
        client.writer.write(padded_api_versions(correlation_id, 900_000))
        size = struct.unpack(">i", await asyncio.wait_for(client.reader.readexactly(4), 10))[0]
        answer = await client.reader.readexactly(size)
        assert struct.unpack(">i", answer[:4])[0] == correlation_id
    await assert_serving(broker)
    await client.close()
    # The hogs reset their connections with most of their bytes unsent (a plain close
    # would queue the FIN behind them): their memory comes back although the broker is
    # not reading their sockets.
    for hog in hogs:
        sock = hog.writer.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        hog.writer.transport.abort()
    await wait_until(lambda: pool.fair_share.holders == 0)
    await wait_until(lambda: pool.used == 0)


async def test_a_request_trickling_below_the_minimum_rate_is_dropped(
    start_broker: StartBroker,
) -> None:
    from kbroker.metrics import BrokerMetrics

    broker = await start_broker(
        request_read_min_bytes_per_second="1000", request_read_min_rate_window_ms="1500"
    )
    trickler = await RawClient.connect(broker.port)
    steady = await RawClient.connect(broker.port)
    frame = padded_api_versions(1, 20_000)
    started = time.monotonic()
    sent = 0
    # A byte every 50 ms (20 bytes/s) for the trickler; 2,000 bytes/s for the steady one,
    # whose request must survive although it takes longer than the window.
    while not trickler.reader.at_eof() and time.monotonic() - started < 10:
        trickler.writer.write(frame[sent : sent + 1])
        steady.writer.write(frame[sent * 100 : (sent + 1) * 100])
        sent += 1
        await asyncio.sleep(0.05)
    assert await trickler.closed_by_peer(timeout=1)
    assert time.monotonic() - started < 8
    steady.writer.write(frame[sent * 100 :])
    size = struct.unpack(">i", await asyncio.wait_for(steady.reader.readexactly(4), 10))[0]
    assert struct.unpack(">i", (await steady.reader.readexactly(size))[:4])[0] == 1
    text = BrokerMetrics(broker).render()
    assert 'kbroker_connections_expired_total{reason="slow_request"} 1' in text
    for client in (trickler, steady):
        await client.close()


async def test_a_flooding_address_does_not_hold_up_another_addresses_request(
    start_broker: StartBroker,
) -> None:
    """Issue 29, item 2: 50 connections from 127.0.0.2 pipelining ApiVersions; a request
    from 127.0.0.1 waits for a few turns of theirs, not for every queued request."""
    from kbroker.server.connection import CLIENT_HOST

    broker = await start_broker()
    handled = {"/127.0.0.2": 0}
    waited: list[int] = []
    handle = broker.server._handle

    async def counting(header: RequestHeader, body: object) -> object | None:
        host = CLIENT_HOST.get()
        if host == "/127.0.0.2":
            handled[host] += 1
        elif header.correlation_id == 99:
            waited.append(handled["/127.0.0.2"] - sent_at[0])
        return await handle(header, body)

    broker.server._handle = counting
    flood = b"".join(padded_api_versions(i, 0) for i in range(1000))
    flooders = []
    for _ in range(50):
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", broker.port, local_addr=("127.0.0.2", 0)
        )
        flooders.append(RawClient(reader, writer))

    async def drain(client: RawClient) -> None:
        while await client.reader.read(65536):
            pass

    readers = [asyncio.create_task(drain(f)) for f in flooders]
    client = await RawClient.connect(broker.port)
    for flooder in flooders:
        flooder.writer.write(flood)
    await wait_until(lambda: handled["/127.0.0.2"] > 2000)
    sent_at = [handled["/127.0.0.2"]]
    client.writer.write(padded_api_versions(99, 0))
    size = struct.unpack(">i", await asyncio.wait_for(client.reader.readexactly(4), 30))[0]
    await client.reader.readexactly(size)
    assert handled["/127.0.0.2"] < 50 * 1000, "the flood was over before the client's turn"
    assert waited and waited[0] < 500
    for c in [client, *flooders]:
        await c.close()
    for task in readers:
        task.cancel()


async def test_a_client_that_shut_down_its_sending_side_still_gets_its_answers(
    start_broker: StartBroker,
) -> None:
    """A client may send its requests, shut down writing and read the answers: the check
    for clients gone while not read (POLLRDHUP) leaves it alone."""
    broker = await start_broker()
    sock = socket.create_connection(("127.0.0.1", broker.port))
    sock.sendall(b"".join(padded_api_versions(i, 0) for i in range(1000)))
    sock.shutdown(socket.SHUT_WR)
    connections = broker.server._connections
    await wait_until(lambda: any(c._reading_paused for c in connections))
    assert broker.server.close_expired(time.monotonic()) == 0
    sock.setblocking(False)
    reader = RawClient(*await asyncio.open_connection(sock=sock))
    for i in range(1000):
        size = struct.unpack(">i", await asyncio.wait_for(reader.reader.readexactly(4), 10))[0]
        assert struct.unpack(">i", (await reader.reader.readexactly(size))[:4])[0] == i
    await reader.close()
