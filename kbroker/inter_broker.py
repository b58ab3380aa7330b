"""Connections from this broker to the others, over the inter-broker listener.

The transaction coordinator sends markers to partition leaders (txn/markers.py) and partition
leaders ask transaction coordinators to verify transactions (txn/verification.py); each keeps
one ``BrokerConnections``: at most one connection per broker, opened on first use with the
inter-broker security settings, dropped after a failure so the next request opens it again.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from kbroker.client import BrokerConnection

if TYPE_CHECKING:
    from kbroker.broker import Broker

REQUEST_TIMEOUT_SECONDS = 30.0


class BrokerConnections:
    """One lazily opened connection per broker id."""

    def __init__(self, broker: Broker, client_id: str) -> None:
        self._broker = broker
        self._client_id = client_id
        self._connections: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def get(self, broker_id: int) -> BrokerConnection | None:
        """The connection to ``broker_id``; None when no registered broker has that id."""
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            connection = self._connections.get(broker_id)
            if connection is not None:
                return connection
            for info in self._broker.metadata.brokers():
                if info.broker_id == broker_id:
                    connection = await BrokerConnection.open(
                        (info.host, info.port),
                        self._client_id,
                        REQUEST_TIMEOUT_SECONDS,
                        security=self._broker.inter_broker_security,
                    )
                    self._connections[broker_id] = connection
                    return connection
            return None

    async def drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            with contextlib.suppress(Exception):
                await connection.close()
