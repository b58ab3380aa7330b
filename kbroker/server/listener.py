"""The listening sockets and the set of live connections.

A broker listens on every entry of ``listeners``; each ``start`` call binds one, and its
connections carry the listener's name (``connection.LISTENER_NAME`` during their requests).
Each listening socket has its own accept loop, so connection limits can hold accepting back
(connection_quotas.py) instead of accepting and closing.

All connections share one memory pool (``queued.max.request.bytes``, memory_pool.py), and
one sweep a second closes connections past connections.max.idle.ms or stalled mid-request
past request.read.timeout.ms (connection.ConnectionLimits).

A TLS listener's handshake runs in a task of its own (bounded by TLS_HANDSHAKE_SECONDS), so
a client that connects and says nothing, or says something other than TLS, holds up no
one; a failed handshake is logged as Kafka logs it ("Failed authentication with ...").
Handshakes take turns by client address (handshake_turns.py): a few of an address's run at
once, its other accepted connections wait.

Graceful shutdown follows uvicorn: stop accepting, let each connection finish
the request it is handling (bounded by a grace period), then abort the rest.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from kbroker.security.listener_security import PLAINTEXT_LISTENER, ListenerSecurity
from kbroker.server.connection import (
    ConnectionLimits,
    KafkaConnection,
    RequestHandler,
    VersionRejector,
)
from kbroker.server.connection_quotas import ConnectionLimitsConfig, ConnectionQuotas
from kbroker.server.handshake_turns import HandshakeTurns
from kbroker.server.memory_pool import MemoryPool
from kbroker.server.turns import StartGate
from wire.frame import FrameDecoder

log = logging.getLogger(__name__)

# How often connections are checked against the idle and request-read timeouts.
SWEEP_SECONDS = 1.0
BACKLOG = 1024
INT32_MAX = 2**31 - 1
UNLIMITED = ConnectionLimitsConfig(INT32_MAX, INT32_MAX, INT32_MAX)
TLS_HANDSHAKE_SECONDS = 10.0
# At most this many requests of one client address start being handled in one turn of the
# event loop (turns.py): enough for a host's few clients to pipeline, few enough that a
# turn of a flooding address takes milliseconds.
REQUESTS_PER_ADDRESS_PER_TURN = 8


class BurstLog:
    """Logs the first of a run of similar events, then at most one line per interval with
    how many there were since: a flood of refused clients must not flood the log."""

    def __init__(self, interval_seconds: float = 10.0) -> None:
        self._interval = interval_seconds
        self._last: dict[str, float] = {}
        self._suppressed: collections.Counter[str] = collections.Counter()

    def log(self, key: str, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last.get(key, -self._interval) < self._interval:
            self._suppressed[key] += 1
            return
        self._last[key] = now
        more = self._suppressed.pop(key, 0)
        suffix = f" ({more} more since the last report)" if more else ""
        log.info(message + suffix, *args)


def _listening_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for host:port (every interface when host is
    empty), as asyncio's create_server makes them."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


@dataclass(frozen=True, slots=True)
class _AcceptedTls:
    """A connection accepted on a TLS listener, its handshake not started yet."""

    conn: socket.socket
    ip: str
    listener_name: str | None
    security: ListenerSecurity
    ticket: Callable[[], None] | None


class KafkaServer:
    def __init__(
        self,
        handle: RequestHandler,
        reject_version: VersionRejector,
        limits: ConnectionLimits,
        pool: MemoryPool | None = None,
        quotas: ConnectionQuotas | None = None,
    ) -> None:
        self._handle = handle
        self._reject_version = reject_version
        self._limits = limits
        self.pool = pool if pool is not None else MemoryPool(None)
        self.quotas = quotas if quotas is not None else ConnectionQuotas(UNLIMITED)
        self._connections: set[KafkaConnection] = set()
        self._sockets: list[socket.socket] = []
        self._acceptors: list[asyncio.Task[None]] = []
        # TLS handshakes under way (each in its own task), and their turns by address.
        self._handshakes: set[asyncio.Task[None]] = set()
        self.handshake_turns: HandshakeTurns[_AcceptedTls] = HandshakeTurns()
        self._sweeper: asyncio.Task[None] | None = None
        # Set whenever a connection closes: an acceptor waiting for a free slot retries.
        self._slot_freed = asyncio.Event()
        self._burst_log = BurstLog()
        self.gate = StartGate(REQUESTS_PER_ADDRESS_PER_TURN)
        # A SASL listener's connections accepted and not authenticated yet, by listener.
        self.in_authentication: collections.Counter[str] = collections.Counter()
        # Connections the sweep closed, by kind (connection.Expiry), for the metrics.
        self.closed_by_sweep: collections.Counter[str] = collections.Counter()
        # One staging area for every connection's reads (wire.frame.FrameDecoder): all run on
        # this event loop, so an idle connection holds no receive buffer of its own.
        self._staging = FrameDecoder.new_staging()
        # Each listener's security, by name: read at every accept, so set_security (a dynamic
        # config change, KIP-226) applies to the connections accepted after it.
        self._security: dict[str, ListenerSecurity] = {}
        # Called with a connection's CONNECTION_ID once it has closed.
        self._close_listeners: list[Callable[[int], None]] = []

    def add_close_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener`` with each connection's id once the connection has closed."""
        self._close_listeners.append(listener)

    def _authentication_ticket(self, listener: str) -> Callable[[], None]:
        """Count a SASL listener's connection as authenticating; the function returned
        (idempotent) takes it off the count when it authenticates or goes."""
        self.in_authentication[listener] += 1
        counted = True

        def leave() -> None:
            nonlocal counted
            if counted:
                counted = False
                self.in_authentication[listener] -= 1
                self._slot_freed.set()

        return leave

    def _authentication_room(self, listener: str) -> bool:
        sasl = self._security[listener].sasl
        return sasl is None or self.in_authentication[listener] < sasl.max_in_authentication

    def _new_connection(
        self,
        listener_name: str | None,
        ip: str,
        security: ListenerSecurity,
        authenticated: Callable[[], None] | None,
    ) -> KafkaConnection:
        def closed(connection: KafkaConnection) -> None:
            self._connections.discard(connection)
            self.quotas.close(listener_name or "", ip)
            if authenticated is not None:
                authenticated()
            self._slot_freed.set()
            for listener in self._close_listeners:
                listener(connection.connection_id)

        connection = KafkaConnection(
            self._handle,
            self._reject_version,
            self._limits,
            closed,
            listener_name,
            self.pool,
            shared_staging=self._staging,
            security=security,
            report=self._burst_log.log,
            authenticated=authenticated,
            gate=self.gate,
        )
        self._connections.add(connection)
        return connection

    async def start(
        self,
        host: str,
        port: int,
        listener_name: str | None = None,
        security: ListenerSecurity = PLAINTEXT_LISTENER,
    ) -> int:
        """Listen on host:port and return the bound port (port 0 picks one). Requests on
        connections accepted there see ``listener_name`` in LISTENER_NAME; ``security``
        says how its clients connect and authenticate."""
        loop = asyncio.get_running_loop()
        sockets = _listening_sockets(host, port, BACKLOG)
        self._sockets += sockets
        self._security[listener_name or ""] = security
        for sock in sockets:
            self._acceptors.append(loop.create_task(self._accept_loop(sock, listener_name)))
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep())
        bound = sockets[0].getsockname()[1]
        log.info(
            "listening on %s:%d (%s, %s)",
            host or "*",
            bound,
            listener_name or "unnamed",
            security.protocol,
        )
        return int(bound)

    def set_security(self, listener_name: str, security: ListenerSecurity) -> None:
        """New connections on the listener use ``security``; open ones keep theirs. Its
        protocol must stay the same (the listener's socket is not reopened)."""
        self._security[listener_name] = security

    async def _accept_loop(self, sock: socket.socket, listener_name: str | None) -> None:
        loop = asyncio.get_running_loop()
        listener = listener_name or ""
        quotas = self.quotas
        while True:
            if not quotas.slot_available(listener):
                self._burst_log.log(
                    f"slots:{listener}",
                    "listener %s is at its connection limit (%d open): not accepting until "
                    "one closes",
                    listener or "unnamed",
                    quotas.by_listener[listener],
                )
                while not quotas.slot_available(listener):
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
            if not self._authentication_room(listener):
                self._burst_log.log(
                    f"authenticating:{listener}",
                    "listener %s has %d connections authenticating "
                    "(sasl.server.max.connections.in.authentication): not accepting until one "
                    "authenticates or closes",
                    listener or "unnamed",
                    self.in_authentication[listener],
                )
                while not self._authentication_room(listener):
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
                continue
            delay = quotas.creation_delay(listener, time.monotonic())
            if delay > 0:
                self._burst_log.log(
                    f"rate:{listener}",
                    "listener %s is over its connection creation rate: accepting later",
                    listener or "unnamed",
                )
                await asyncio.sleep(delay)
                continue
            try:
                conn, address = await loop.sock_accept(sock)
            except OSError as exc:
                # EMFILE and friends: back off instead of spinning.
                log.warning("accept on listener %s failed: %s", listener or "unnamed", exc)
                await asyncio.sleep(0.1)
                continue
            ip = address[0]
            now = time.monotonic()
            hold = quotas.ip_throttle(ip, now)
            if hold > 0:
                self._burst_log.log(
                    f"ip-rate:{ip}",
                    "Connection from %s over its connection_creation_rate quota: closed after "
                    "%.0f ms",
                    ip,
                    hold * 1000,
                )
                loop.call_later(hold, conn.close)
                continue
            if not quotas.open(listener, ip, now):
                self._burst_log.log(
                    f"ip:{ip}",
                    "Rejected connection from %s, address already has the configured maximum "
                    "of %d connections",
                    ip,
                    quotas.limit_for_ip(ip),
                )
                conn.close()
                continue
            security = self._security[listener]
            ticket = self._authentication_ticket(listener) if security.sasl is not None else None
            if security.tls is None:
                await self._start_connection(conn, ip, listener_name, security, ticket)
                continue
            accepted = _AcceptedTls(conn, ip, listener_name, security, ticket)
            if self.handshake_turns.admit(ip, accepted, security.max_handshakes_per_ip):
                self._start_handshake(accepted)
            else:
                self._burst_log.log(
                    f"handshakes:{ip}",
                    "%s has %d TLS handshakes under way (ssl.max.handshakes.per.ip): its "
                    "next connections wait their turn",
                    ip,
                    security.max_handshakes_per_ip,
                )

    def _start_handshake(self, accepted: _AcceptedTls) -> None:
        task = asyncio.get_running_loop().create_task(
            self._start_connection(
                accepted.conn,
                accepted.ip,
                accepted.listener_name,
                accepted.security,
                accepted.ticket,
            )
        )
        self._handshakes.add(task)

        def finished(task: asyncio.Task[None]) -> None:
            self._handshakes.discard(task)
            following = self.handshake_turns.finished(accepted.ip)
            if following is not None:
                self._start_handshake(following)

        task.add_done_callback(finished)

    async def _start_connection(
        self,
        conn: socket.socket,
        ip: str,
        listener_name: str | None,
        security: ListenerSecurity,
        authentication_ticket: Callable[[], None] | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        made: list[KafkaConnection] = []

        def protocol() -> KafkaConnection:
            made.append(self._new_connection(listener_name, ip, security, authentication_ticket))
            return made[0]

        try:
            if security.tls is None:
                await loop.connect_accepted_socket(protocol, conn)
            else:
                await loop.connect_accepted_socket(
                    protocol,
                    conn,
                    ssl=security.tls,
                    ssl_handshake_timeout=TLS_HANDSHAKE_SECONDS,
                )
        except (OSError, TimeoutError, ConnectionError) as exc:
            if isinstance(exc, ssl.SSLError | TimeoutError):
                self._burst_log.log(
                    f"auth:{ip}:tls:{getattr(exc, 'reason', type(exc).__name__)}",
                    "Failed authentication with /%s (SSL handshake failed: %s)",
                    ip,
                    exc,
                )
            else:
                log.debug("connection from %s lost before it started: %s", ip, exc)
            if made and made[0].started:
                return  # its connection_lost did the accounting
            if made:
                # The TLS layer made the protocol but never connected it.
                self._connections.discard(made[0])
            self.quotas.close(listener_name or "", ip)
            if authentication_ticket is not None:
                authentication_ticket()
            self._slot_freed.set()
            conn.close()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            self.close_expired(time.monotonic())

    def close_expired(self, now: float) -> int:
        """Close the connections the timeouts have expired; returns how many."""
        reasons: dict[str, list[str]] = {}
        for connection in list(self._connections):
            expiry = connection.expired(now)
            if expiry is not None:
                reasons.setdefault(expiry.reason, []).append(connection.peer)
                self.closed_by_sweep[expiry.kind] += 1
                connection.abort()
        # One line per reason and burst, not one per connection or sweep: a flood of stalled
        # clients must not flood the log too.
        for reason, peers in reasons.items():
            self._burst_log.log(
                f"sweep:{reason}",
                "closed %d connection(s) (%s): %s",
                len(peers),
                reason,
                ", ".join(peers[:5]),
            )
        return sum(len(peers) for peers in reasons.values())

    async def close(self, grace_seconds: float = 5.0) -> None:
        for waiting in self.handshake_turns.drain():
            waiting.conn.close()
        tasks = [
            *self._acceptors,
            *self._handshakes,
            *([self._sweeper] if self._sweeper is not None else []),
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sock in self._sockets:
            sock.close()
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
