"""The five attacks of issue 29, for bench/hostile_clients.py --fairness.

Each runs in its own process (``run_attack``) until a deadline, against a plaintext port
or a TLS one (then the attacker does the TLS handshake and never authenticates), and
returns what it saw: connections opened, closed by the broker, responses read.

- ``partial``: 300 connections each announce a 100 MB request and send 1 MB of it (as fast
  as the broker reads), then hold on.
- ``churn``: connections opened and closed, 2,000 a second (the rate reached is reported).
- ``metadata``: 500 connections each sending Metadata for all topics and reading the
  answer, in a loop (unauthenticated, on a SASL listener: ApiVersions, the only request
  allowed before authentication besides the SASL ones).
- ``slow``: 200 connections each sending a request one byte a second.
- ``pipeline``: 40 connections each writing Fetch requests (max_wait_ms 0, 1 MB of a topic
  with data) as fast as the socket takes them, never reading an answer.

A connection the broker closes is opened again after half a second. The attackers connect
from their own address (``Target.source``, 127.0.0.2 by default: all of 127/8 is loopback),
as attackers on another host would; the well-behaved clients come from 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from wire.api_keys import ApiKey
from wire.frame import encode_request
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.metadata_request import MetadataRequest
from wire.messages.request_header import RequestHeader

ANNOUNCED = 100 * 1024 * 1024
PIECE = 64 * 1024


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    tls: bool
    # A topic with data, for the pipelined fetches.
    topic: str
    # The address the attackers connect from.
    source: str = "127.0.0.2"


Stats = collections.Counter[str]


def _request(api_key: int, version: int, body: object, correlation_id: int = 1) -> bytes:
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="attacker",
    )
    return encode_request(header, body, version)  # type: ignore[arg-type]


def _tls_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def _connect(
    target: Target, tls: ssl.SSLContext | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(
        asyncio.open_connection(target.host, target.port, ssl=tls, local_addr=(target.source, 0)),
        timeout=10,
    )


def _reset(writer: asyncio.StreamWriter) -> None:
    """Leave at once, with a reset: a plain close would queue the FIN behind unsent bytes."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


async def _until(deadline: float, awaitable: Awaitable[object]) -> object:
    return await asyncio.wait_for(awaitable, max(0.01, deadline - time.monotonic()))


Session = Callable[[asyncio.StreamReader, asyncio.StreamWriter, float, Stats], Awaitable[None]]


async def _reconnecting(
    target: Target, tls: ssl.SSLContext | None, deadline: float, stats: Stats, session: Session
) -> None:
    """Run ``session`` on a connection until the deadline, connecting again when closed."""
    while time.monotonic() < deadline:
        try:
            reader, writer = await _connect(target, tls)
        except (OSError, TimeoutError, ssl.SSLError):
            stats["connect failed"] += 1
            await asyncio.sleep(0.5)
            continue
        stats["connections"] += 1
        try:
            await session(reader, writer, deadline, stats)
        except TimeoutError:
            pass
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            stats["closed by broker"] += 1
            await asyncio.sleep(0.5)
        finally:
            _reset(writer)


async def _partial(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, deadline: float, stats: Stats
) -> None:
    writer.write(struct.pack(">i", ANNOUNCED) + b"\x00\x12\x00\x00")
    for _ in range(1024 * 1024 // PIECE):
        writer.write(bytes(PIECE))
        await _until(deadline, writer.drain())
    stats["sent 1 MB"] += 1
    if not await _until(deadline, reader.read(1)):
        raise ConnectionResetError("closed")


async def _metadata(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    deadline: float,
    stats: Stats,
    request: bytes,
) -> None:
    while time.monotonic() < deadline:
        writer.write(request)
        size = struct.unpack(">i", await _until(deadline, reader.readexactly(4)))[0]  # type: ignore[arg-type]
        await _until(deadline, reader.readexactly(size))
        stats["responses"] += 1


async def _slow(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, deadline: float, stats: Stats
) -> None:
    request = struct.pack(">i", 1_000_000) + b"\x00\x00\x00\x09" + bytes(100)
    for byte in request:
        if time.monotonic() >= deadline:
            return
        if reader.at_eof():
            raise ConnectionResetError("closed")
        writer.write(bytes([byte]))
        await _until(deadline, writer.drain())
        stats["bytes"] += 1
        await asyncio.sleep(1.0)


async def _pipeline(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    deadline: float,
    stats: Stats,
    request: bytes,
) -> None:
    while time.monotonic() < deadline:
        writer.write(request)
        await _until(deadline, writer.drain())
        stats["fetches written"] += 1
        if reader.at_eof():
            raise ConnectionResetError("closed")


async def _churn(target: Target, tls: ssl.SSLContext | None, deadline: float, rate: int) -> Stats:
    stats: Stats = collections.Counter()
    workers = 50
    interval = workers / rate

    async def one() -> None:
        next_at = time.monotonic()
        while time.monotonic() < deadline:
            try:
                _, writer = await _connect(target, tls)
                stats["connections"] += 1
                _reset(writer)
            except (OSError, TimeoutError, ssl.SSLError):
                stats["connect failed"] += 1
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    started = time.monotonic()
    await asyncio.gather(*(one() for _ in range(workers)))
    stats["per second"] = int(stats["connections"] / (time.monotonic() - started))
    return stats


async def _attack(name: str, target: Target, seconds: float) -> Stats:
    deadline = time.monotonic() + seconds
    tls = _tls_context() if target.tls else None
    stats: Stats = collections.Counter()
    if name == "churn":
        return await _churn(target, tls, deadline, rate=2000)
    sessions: list[Session]
    if name == "partial":
        sessions = [_partial] * 300
    elif name == "metadata":
        # Unauthenticated, only ApiVersions is answered; Metadata would close the connection.
        request = (
            _request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
            if target.tls
            else _request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        )
        sessions = [lambda r, w, d, s: _metadata(r, w, d, s, request)] * 500
    elif name == "slow":
        sessions = [_slow] * 200
    elif name == "pipeline":
        fetch = FetchRequest(
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1024 * 1024,
            topics=[
                FetchTopic(
                    topic=target.topic,
                    partitions=[FetchPartition(partition=0, partition_max_bytes=1024 * 1024)],
                )
            ],
        )
        request = _request(ApiKey.FETCH, 12, fetch)
        sessions = [lambda r, w, d, s: _pipeline(r, w, d, s, request)] * 40
    else:
        raise ValueError(f"unknown attack {name}")
    await asyncio.gather(*(_reconnecting(target, tls, deadline, stats, s) for s in sessions))
    return stats


ATTACKS = ("partial", "churn", "metadata", "slow", "pipeline")


def run_attack(name: str, target: Target, seconds: float, out: object) -> None:
    """Process entry point: run the attack; put its stats on the ``out`` queue."""
    stats = asyncio.run(_attack(name, target, seconds))
    out.put(dict(stats))  # type: ignore[attr-defined]
