"""The listening sockets and the set of live connections.

A broker listens on every entry of ``listeners``; each ``start`` call binds one, and its
connections carry the listener's name (``connection.LISTENER_NAME`` during their requests).

Graceful shutdown follows uvicorn: stop accepting, let each connection finish
the request it is handling (bounded by a grace period), then abort the rest.
"""

from __future__ import annotations

import asyncio
import logging

from kbroker.server.connection import (
    ConnectionLimits,
    KafkaConnection,
    RequestHandler,
    VersionRejector,
)

log = logging.getLogger(__name__)


class KafkaServer:
    def __init__(
        self, handle: RequestHandler, reject_version: VersionRejector, limits: ConnectionLimits
    ) -> None:
        self._handle = handle
        self._reject_version = reject_version
        self._limits = limits
        self._connections: set[KafkaConnection] = set()
        self._servers: list[asyncio.Server] = []

    def _new_connection(self, listener_name: str | None) -> KafkaConnection:
        connection = KafkaConnection(
            self._handle,
            self._reject_version,
            self._limits,
            self._connections.discard,
            listener_name,
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
        bound = server.sockets[0].getsockname()[1]
        log.info("listening on %s:%d (%s)", host or "*", bound, listener_name or "unnamed")
        return bound

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def close(self, grace_seconds: float = 5.0) -> None:
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
