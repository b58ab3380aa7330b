"""The listening sockets and the set of live connections.

A broker listens on every entry of ``listeners``; each ``start`` call binds one, and its
connections carry the listener's name (``connection.LISTENER_NAME`` during their requests).

All connections share one memory pool (``queued.max.request.bytes``, memory_pool.py), and
one sweep a second closes connections past connections.max.idle.ms or stalled mid-request
past request.read.timeout.ms (connection.ConnectionLimits).

Graceful shutdown follows uvicorn: stop accepting, let each connection finish
the request it is handling (bounded by a grace period), then abort the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from kbroker.server.connection import (
    ConnectionLimits,
    KafkaConnection,
    RequestHandler,
    VersionRejector,
)
from kbroker.server.memory_pool import MemoryPool

log = logging.getLogger(__name__)

# How often connections are checked against the idle and request-read timeouts.
SWEEP_SECONDS = 1.0


class KafkaServer:
    def __init__(
        self,
        handle: RequestHandler,
        reject_version: VersionRejector,
        limits: ConnectionLimits,
        pool: MemoryPool | None = None,
    ) -> None:
        self._handle = handle
        self._reject_version = reject_version
        self._limits = limits
        self.pool = pool if pool is not None else MemoryPool(None)
        self._connections: set[KafkaConnection] = set()
        self._servers: list[asyncio.Server] = []
        self._sweeper: asyncio.Task[None] | None = None

    def _new_connection(self, listener_name: str | None) -> KafkaConnection:
        connection = KafkaConnection(
            self._handle,
            self._reject_version,
            self._limits,
            self._connections.discard,
            listener_name,
            self.pool,
        )
        self._connections.add(connection)
        return connection

    async def start(self, host: str, port: int, listener_name: str | None = None) -> int:
        """Listen on host:port and return the bound port (port 0 picks one). Requests on
        connections accepted there see ``listener_name`` in LISTENER_NAME."""
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: self._new_connection(listener_name),
            host or None,
            port,
            reuse_address=True,
            backlog=1024,
        )
        self._servers.append(server)
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep())
        bound = server.sockets[0].getsockname()[1]
        log.info("listening on %s:%d (%s)", host or "*", bound, listener_name or "unnamed")
        return bound

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            self.close_expired(time.monotonic())

    def close_expired(self, now: float) -> int:
        """Close the connections the timeouts have expired; returns how many."""
        reasons: dict[str, list[str]] = {}
        for connection in list(self._connections):
            reason = connection.expired(now)
            if reason is not None:
                reasons.setdefault(reason, []).append(connection.peer)
                connection.abort()
        # One line per reason and sweep, not one per connection: a flood of stalled clients
        # must not flood the log too.
        for reason, peers in reasons.items():
            log.info("closed %d connection(s) (%s): %s", len(peers), reason, ", ".join(peers[:5]))
        return sum(len(peers) for peers in reasons.values())

    async def close(self, grace_seconds: float = 5.0) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for server in self._servers:
            server.close()
        connections = list(self._connections)
        for connection in connections:
            connection.close()
        if connections:
            done, pending = await asyncio.wait(
                [asyncio.ensure_future(c.wait_closed()) for c in connections],
                timeout=grace_seconds,
            )
            for task in pending:
                task.cancel()
        for connection in list(self._connections):
            connection.abort()
        for server in self._servers:
            await server.wait_closed()
