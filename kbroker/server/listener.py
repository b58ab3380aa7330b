"""The listening sockets and the set of live connections.

A broker listens on every entry of ``listeners``; each ``start`` call binds one. Requests that
arrive through a named listener run with ``LISTENER_NAME`` set to that name, so handlers can
answer with the advertised endpoints of the same listener, as Kafka does (a client that came in
through EXTERNAL is told the brokers' EXTERNAL addresses).

Graceful shutdown follows uvicorn: stop accepting, let each connection finish
the request it is handling (bounded by a grace period), then abort the rest.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable

from kbroker.server.connection import (
    ConnectionLimits,
    KafkaConnection,
    RequestHandler,
    VersionRejector,
)
from wire.messages.request_header import RequestHeader

log = logging.getLogger(__name__)

# The name of the listener the request being handled came through; None outside a request or
# for a server started without a name. Each connection's worker task has its own context.
LISTENER_NAME: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "listener_name", default=None
)


def _through_listener(handle: RequestHandler, name: str) -> RequestHandler:
    """``handle`` with LISTENER_NAME set to ``name``. A plain function, not a coroutine: it is
    called in the connection's worker task, so the variable is set in that task's context
    without an extra coroutine frame per request."""

    def handle_through(header: RequestHeader, request: object) -> Awaitable[object | None]:
        LISTENER_NAME.set(name)
        return handle(header, request)

    return handle_through


class KafkaServer:
    def __init__(
        self, handle: RequestHandler, reject_version: VersionRejector, limits: ConnectionLimits
    ) -> None:
        self._handle = handle
        self._reject_version = reject_version
        self._limits = limits
        self._connections: set[KafkaConnection] = set()
        self._servers: list[asyncio.Server] = []

    def _new_connection(self, handle: RequestHandler) -> KafkaConnection:
        connection = KafkaConnection(
            handle, self._reject_version, self._limits, self._connections.discard
        )
        self._connections.add(connection)
        return connection

    async def start(self, host: str, port: int, listener_name: str | None = None) -> int:
        """Listen on host:port and return the bound port (port 0 picks one). Requests on
        connections accepted there see ``listener_name`` in LISTENER_NAME."""
        handle = (
            self._handle
            if listener_name is None
            else _through_listener(self._handle, listener_name)
        )
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: self._new_connection(handle),
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
