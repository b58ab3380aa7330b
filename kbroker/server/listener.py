"""The listening socket and the set of live connections.

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
        self._server: asyncio.Server | None = None

    def _new_connection(self) -> KafkaConnection:
        connection = KafkaConnection(
            self._handle, self._reject_version, self._limits, self._connections.discard
        )
        self._connections.add(connection)
        return connection

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port and return the bound port (port 0 picks one)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_connection, host or None, port, reuse_address=True, backlog=1024
        )
        bound = self._server.sockets[0].getsockname()[1]
        log.info("listening on %s:%d", host or "*", bound)
        return bound

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def close(self, grace_seconds: float = 5.0) -> None:
        if self._server is not None:
            self._server.close()
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
        if self._server is not None:
            await self._server.wait_closed()
