"""One client connection: frames in, responses out, in order.

The protocol guide requires responses on a connection in the order of its
requests, and Kafka processes one request per connection at a time (the channel
is muted until the response is sent). kbroker does the same: frames are decoded
as they arrive and queued, one worker task handles them in turn, and reading
pauses when the queue holds too many frames or bytes (DESIGN.md rule 5). It is a
BufferedProtocol: the socket is read straight into the frame decoder's buffers, so a
large request (a produce batch) lands in its own buffer without further copies.

Responses are written as the parts wire.frame.encode_response returns: bytes
chunks, and file regions that are sent with os.sendfile when they are large
enough for it to pay off (the 2011 Kafka paper's zero-copy transfer). Over TLS
the file data is read and written through the TLS layer in pieces (Kafka loses
zero-copy there too).

A listener's security (kbroker.security.listener_security) decides who the client
is: ``User:ANONYMOUS`` on PLAINTEXT, the certificate's mapped DN on SSL, the SASL
user on SASL_* listeners once the gate (authentication.py) lets requests through.
Handlers see it in PRINCIPAL.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import itertools
import logging
import os
import select
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kbroker.log.file_region import FileRegion
from kbroker.security.listener_security import ANONYMOUS, PLAINTEXT_LISTENER, ListenerSecurity
from kbroker.server.authentication import ChannelAuthenticator, Outcome
from kbroker.server.fair_share import Verdict
from kbroker.server.memory_pool import MemoryPool
from kbroker.server.request_progress import ProgressMeter
from kbroker.server.turns import StartGate
from wire.errors import DecodeError
from wire.frame import (
    FrameDecoder,
    UnknownApiKeyError,
    UnsupportedRequestVersion,
    decode_request,
    encode_response,
)
from wire.messages.request_header import RequestHeader

log = logging.getLogger(__name__)

# A handler returns the response body, or None when no response is sent
# (Produce with acks=0).
RequestHandler = Callable[[RequestHeader, object], Awaitable[object | None]]
# Answers a request whose version is unknown, or returns None to close the
# connection (KIP-511: only ApiVersions is answered).
VersionRejector = Callable[[RequestHeader], object | None]

# Below this size a region is read with pread and written with the response
# header in one go: a sendfile round trip costs more than the copy.
SENDFILE_MIN_BYTES = 64 * 1024
# Over TLS file data must pass through the TLS layer: larger regions are read and written
# in pieces of this size, each waiting for the transport to drain, so a large fetch response
# holds at most about one piece in memory. (asyncio's own sendfile fallback stalled TLS
# connections for good.)
TLS_PIECE_BYTES = 256 * 1024


# The address of the client whose request is being handled, as Kafka shows it
# ("/127.0.0.1"): group members report it (DescribeGroups client_host). Each
# connection's worker task runs in its own context, so handlers see their own.
CLIENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="/")
# The name of the listener the connection came through (None for a server started without
# one), so handlers answer with that listener's advertised endpoints, as Kafka does: a client
# that came in through EXTERNAL is told the brokers' EXTERNAL addresses.
LISTENER_NAME: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "listener_name", default=None
)


# The client's port, and its software name and version once its ApiVersions request (v3+,
# KIP-511) gave them: what client telemetry subscriptions match on (KIP-714). The
# ClientSoftware object is the connection's own, filled in by the ApiVersions handler.
CLIENT_PORT: contextvars.ContextVar[int] = contextvars.ContextVar("client_port", default=0)


@dataclass(slots=True)
class ClientSoftware:
    name: str | None = None
    version: str | None = None


CLIENT_SOFTWARE: contextvars.ContextVar[ClientSoftware | None] = contextvars.ContextVar(
    "client_software", default=None
)


# Who the client is (Kafka's KafkaPrincipal as ``<type>:<name>``), for authorization and
# user quotas.
PRINCIPAL: contextvars.ContextVar[str] = contextvars.ContextVar("principal", default=ANONYMOUS)


# The connection the request came on, by a number unique in this process: what a share
# session is bound to (KIP-932: a share session lives on the connection that opened it, and
# its member's acquired records are released when that connection closes).
CONNECTION_ID: contextvars.ContextVar[int] = contextvars.ContextVar("connection_id", default=0)
_CONNECTION_IDS = itertools.count(1)


# Set by a handler whose client is over a quota: after the response is written, the
# connection stops reading for that many milliseconds (KIP-219: the broker answers at once,
# with throttle_time_ms, and mutes the channel; the client holds back too).
THROTTLE_MS: contextvars.ContextVar[int] = contextvars.ContextVar("throttle_ms", default=0)


def _log_refusal(key: str, message: str) -> None:
    log.info(message)


@dataclass(frozen=True, slots=True)
class Expiry:
    """Why the sweep closes a connection: a short name (a metric label) and the log text."""

    kind: str
    reason: str


class CloseConnection(Exception):
    """Raised by a handler when the protocol says to drop the connection."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Per-connection bounds (DESIGN.md rule 5). ``idle_seconds`` is connections.max.idle.ms:
    a connection with no request in progress and no bytes read or written for that long is
    closed. ``request_read_seconds`` (request.read.timeout.ms) bounds how long a request may
    take to arrive once its first byte did, so a client trickling a frame cannot hold its
    buffer for ever; ``min_read_bytes_per_second`` (request.read.min.bytes.per.second) drops
    it sooner when it arrives slower than that over ``read_rate_window_seconds``
    (request.read.min.rate.window.ms) of reading (request_progress.py)."""

    max_frame_bytes: int
    max_queued_frames: int = 64
    max_queued_bytes: int = 100 * 1024 * 1024
    idle_seconds: float | None = 600.0
    request_read_seconds: float | None = 30.0
    min_read_bytes_per_second: float | None = None
    read_rate_window_seconds: float = 10.0


class _RequestBudget:
    """One connection's frame decoder's MemoryBudget: the shared pool, where a growth step
    of a partial request must also pass the fair-share rule (fair_share.py)."""

    __slots__ = ("pool", "owner", "address", "decoder", "verdict", "trusted")

    def __init__(self, pool: MemoryPool, owner: object) -> None:
        self.pool = pool
        self.owner = owner
        self.address = "?"
        self.decoder: FrameDecoder | None = None
        self.verdict = Verdict.GRANTED
        # False while a SASL listener's client has not authenticated.
        self.trusted = True

    def try_reserve(self, nbytes: int) -> bool:
        assert self.decoder is not None
        pool = self.pool
        self.verdict = pool.fair_share.decide(
            self.owner, self.address, self.decoder.partial_size, nbytes, pool.used, self.trusted
        )
        if self.verdict is not Verdict.GRANTED:
            return False
        pool.force_reserve(nbytes)
        return True

    def force_reserve(self, nbytes: int) -> None:
        self.pool.force_reserve(nbytes)

    def release(self, nbytes: int) -> None:
        self.pool.release(nbytes)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        handle: RequestHandler,
        reject_version: VersionRejector,
        limits: ConnectionLimits,
        on_close: Callable[[KafkaConnection], None],
        listener_name: str | None = None,
        pool: MemoryPool | None = None,
        *,
        shared_staging: bytearray | None = None,
        security: ListenerSecurity = PLAINTEXT_LISTENER,
        report: Callable[[str, str], None] | None = None,
        authenticated: Callable[[], None] | None = None,
        gate: StartGate | None = None,
    ) -> None:
        self._handle = handle
        # Requests of one address take turns with other addresses' (turns.py).
        self._gate = gate
        # Called once the SASL client has authenticated (it leaves the listener's count of
        # connections in authentication).
        self._authenticated = authenticated
        self._security = security
        # Logs a refused client once per burst (listener.BurstLog): key, message.
        self._report = report if report is not None else _log_refusal
        self._authenticator: ChannelAuthenticator | None = None
        self._principal = ANONYMOUS
        self._listener_name = listener_name
        self._reject_version = reject_version
        self._limits = limits
        self._on_close = on_close
        self.connection_id = next(_CONNECTION_IDS)
        self._pool = pool if pool is not None else MemoryPool(None)
        self._budget = _RequestBudget(self._pool, self)
        self._decoder = FrameDecoder(limits.max_frame_bytes, self._budget, shared_staging)
        self._budget.decoder = self._decoder
        # The bytes of a partial large request this connection holds by the fair-share rule.
        self._share_held = 0
        self._frames: collections.deque[memoryview] = collections.deque()
        self._queued_bytes = 0
        # Reading stops while the queue is full or the memory pool is spent; it resumes when
        # neither holds. _reading_paused is what the transport was last told.
        self._queue_full = False
        self._waiting_for_memory = False
        self._muted = False
        self._reading_paused = False
        # Bytes of the request being handled, and of responses sitting in the transport's
        # write buffer past its high-water mark: both are charged to the pool.
        self._handling_bytes = 0
        self._write_charge = 0
        # For the idle and request-read timeouts (time.monotonic()).
        self.last_activity = self._accepted_at = time.monotonic()
        self._partial_since: float | None = None
        self._progress = (
            ProgressMeter(limits.min_read_bytes_per_second, limits.read_rate_window_seconds)
            if limits.min_read_bytes_per_second is not None
            else None
        )
        self._frame_arrived = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._transport: asyncio.Transport | None = None
        # The plaintext socket's descriptor, for sendfile without asyncio (-1: none).
        self._socket_fd = -1
        # The socket's descriptor whatever the security, to see a client hang up while its
        # socket is not read (-1: none).
        self._poll_fd = -1
        self._worker: asyncio.Task[None] | None = None
        self._started = False
        self._lost = False
        self._closing = False
        self.peer = "?"
        self._client_host = "/"
        self._client_port = 0

    @property
    def started(self) -> bool:
        """Whether the transport connected this protocol (a TLS handshake may fail first)."""
        return self._started

    # asyncio.Protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._started = True
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._client_host = f"/{peer[0]}" if peer else "/"
        self._client_port = int(peer[1]) if peer else 0
        self._budget.address = str(peer[0]) if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._poll_fd = sock.fileno()
        security = self._security
        if sock is not None and security.tls is None:
            self._socket_fd = sock.fileno()
        if security.tls is not None:
            ssl_object = transport.get_extra_info("ssl_object")
            try:
                self._principal = security.tls_principal(
                    ssl_object.getpeercert() if ssl_object is not None else None
                )
            except ValueError as exc:
                self._refuse(f"{exc}")
                transport.abort()
                return
        if security.sasl is not None:
            self._authenticator = ChannelAuthenticator(security.sasl, self._limits.max_frame_bytes)
            self._decoder.max_frame_size = self._authenticator.frame_limit
            self._budget.trusted = False
        self._worker = asyncio.get_running_loop().create_task(self._serve())
        self._worker.add_done_callback(self._worker_done)

    def _refuse(self, reason: str) -> None:
        host = self._client_host.lstrip("/")
        self._report(
            f"auth:{host}:{reason}", f"Failed authentication with {self._client_host} ({reason})"
        )

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        decoder = self._decoder
        now = self.last_activity = time.monotonic()
        try:
            frames = decoder.buffer_updated(nbytes)
        except DecodeError as exc:
            log.warning("closing connection from %s: bad frame: %s", self.peer, exc)
            self.abort()
            return
        if decoder.buffered():
            if self._partial_since is None or frames:
                self._partial_since = now
        else:
            self._partial_since = None
        if frames:
            if self._progress is not None:
                self._progress.restart()
            for frame in frames:
                self._frames.append(frame)
                self._queued_bytes += len(frame)
            self._frame_arrived.set()
            if (
                len(self._frames) >= self._limits.max_queued_frames
                or self._queued_bytes >= self._limits.max_queued_bytes
            ):
                self._queue_full = True
        self._account_share()
        # Back-pressure: a request buffer the pool (or the fair-share rule) would not grow,
        # or complete requests that took the pool past its capacity, stop this socket until
        # memory is released.
        if (decoder.starved or (frames and self._pool.exhausted)) and not self._waiting_for_memory:
            self._waiting_for_memory = True
            self._wait_for_memory()
        self._update_reading()

    def _account_share(self) -> None:
        """Tell the fair-share rule what this connection's partial large request holds now."""
        decoder = self._decoder
        pool = self._pool
        held = 0
        if decoder.partial_size and pool.fair_share.is_large(
            decoder.partial_size, self._budget.trusted
        ):
            held = decoder.partial_reserved
        if held == self._share_held:
            return
        gave_back = held < self._share_held
        self._share_held = held
        pool.fair_share.hold(self, self._budget.address, held)
        if gave_back:
            pool.share_released()

    def _wait_for_memory(self) -> None:
        if self._decoder.starved and self._budget.verdict is Verdict.OVER_SHARE:
            self._pool.wait_for_share(self._memory_released)
        else:
            self._pool.wait(self._memory_released)

    def _memory_released(self) -> None:
        """Pool waiter: resume reading once the decoder has the memory it waits for."""
        if self._closing:
            self._waiting_for_memory = False
            return
        if not self._decoder.retry_grow():
            self._wait_for_memory()
            return
        self._account_share()
        self._waiting_for_memory = False
        self._update_reading()

    def _update_reading(self) -> None:
        pause = self._queue_full or self._waiting_for_memory or self._muted
        if pause == self._reading_paused or self._transport is None:
            return
        self._reading_paused = pause
        if pause:
            self._transport.pause_reading()
        elif not self._transport.is_closing():
            self._transport.resume_reading()
            if self._partial_since is not None:
                # The request stalled because we stopped reading: its time starts again.
                self._partial_since = time.monotonic()

    def eof_received(self) -> bool:
        # Let queued requests finish; the worker closes when the queue is empty. (TLS has no
        # half-closed state: there the transport closes.)
        self._closing = True
        self._frame_arrived.set()
        return self._security.tls is None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        # The descriptor is closed now and may be reused by another connection's socket.
        self._socket_fd = -1
        self._poll_fd = -1
        self._writable.set()
        self._frame_arrived.set()
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        self._release_queued()
        self._decoder.close()
        self._account_share()
        self._pool.release(self._write_charge)
        self._write_charge = 0
        self._lost = True
        self._on_close(self)
        if self._worker is None or self._worker.done():
            self._let_go()

    def _worker_done(self, task: asyncio.Task[None]) -> None:
        if self._lost:
            self._let_go()

    def _let_go(self) -> None:
        """Drop the references that make a closed connection a reference cycle (through
        asyncio's TLS protocol, which keeps our get_buffer, through the worker's exception
        and the memory budget), so it is freed at once with its buffers rather than by the
        cyclic garbage collector: 300 connections a second closing under a flood left the
        collector pauses of 130-180 ms, and their 256 KiB TLS buffers, hundreds of MB."""
        self._transport = None
        self._worker = None
        self._budget.decoder = None
        self._budget.owner = None

    def pause_writing(self) -> None:
        # Responses the client does not read pile up past the high-water mark: charge them.
        self._writable.clear()
        if self._transport is not None:
            size = self._transport.get_write_buffer_size()
            self._pool.force_reserve(size - self._write_charge)
            self._write_charge = size

    def resume_writing(self) -> None:
        self._writable.set()
        self.last_activity = time.monotonic()
        charge, self._write_charge = self._write_charge, 0
        self._pool.release(charge)

    # Lifecycle

    def close(self) -> None:
        """Stop after the request in progress (graceful shutdown)."""
        self._closing = True
        self._release_queued()
        self._frame_arrived.set()

    def _release_queued(self) -> None:
        self._pool.release(self._queued_bytes + self._handling_bytes)
        self._frames.clear()
        self._queued_bytes = 0
        self._handling_bytes = 0

    def expired(self, now: float) -> Expiry | None:
        """Why the connection should be closed by the timeouts, or None."""
        limits = self._limits
        if self._reading_paused and self._hung_up():
            return Expiry("hung_up", "closed by the client while not read")
        sasl = self._security.sasl
        if (
            sasl is not None
            and not self._budget.trusted
            and now - self._accepted_at > sasl.authentication_timeout_ms / 1000
        ):
            return Expiry(
                "authentication_timeout",
                f"not authenticated after {sasl.authentication_timeout_ms / 1000:g} s "
                f"(sasl.server.authentication.timeout.ms)",
            )
        progress = self._progress
        if progress is not None and progress.too_slow(
            now, self._decoder.buffered(), not self._reading_paused
        ):
            return Expiry(
                "slow_request",
                f"request arriving at less than {limits.min_read_bytes_per_second:g} bytes/s "
                f"(request.read.min.bytes.per.second)",
            )
        since = self._partial_since
        if (
            since is not None
            and limits.request_read_seconds is not None
            and not self._reading_paused
        ):
            if now - since > limits.request_read_seconds:
                return Expiry(
                    "read_timeout", f"request incomplete after {limits.request_read_seconds:g} s"
                )
        # Idle: nothing read or written for that long and no request being handled; a
        # partial request counts as idle too (Kafka's rule), unless we stopped reading it.
        if (
            limits.idle_seconds is not None
            and now - self.last_activity > limits.idle_seconds
            and not self._frames
            and not self._handling_bytes
            and not self._reading_paused
        ):
            return Expiry("idle", f"idle for more than {limits.idle_seconds:g} s")
        return None

    def _hung_up(self) -> bool:
        """Whether the client reset or closed its end while a request of its can no longer
        complete: a socket we stopped reading shows no end of stream until the bytes before
        it are read, and a client that announced a large request, sent part of it and left
        would keep its memory for ever. Linux's POLLRDHUP tells without reading. A client
        that only shut down its sending side after whole requests still gets its answers."""
        if self._poll_fd < 0:
            return False
        poller = select.poll()
        poller.register(self._poll_fd, select.POLLRDHUP)
        events = poller.poll(0)
        if not events:
            return False
        if events[0][1] & (select.POLLHUP | select.POLLERR):
            return True
        return self._decoder.buffered() > 0

    def abort(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    async def wait_closed(self) -> None:
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)

    # The worker

    async def _next_frame(self) -> memoryview | None:
        while not self._frames:
            if self._closing:
                return None
            self._frame_arrived.clear()
            await self._frame_arrived.wait()
        frame = self._frames.popleft()
        self._queued_bytes -= len(frame)
        self._handling_bytes = len(frame)
        if self._queue_full and (
            len(self._frames) < self._limits.max_queued_frames // 2
            and self._queued_bytes < self._limits.max_queued_bytes // 2
        ):
            self._queue_full = False
            self._update_reading()
        return frame

    def _done_handling(self) -> None:
        charge, self._handling_bytes = self._handling_bytes, 0
        self.last_activity = time.monotonic()
        self._pool.release(charge)

    async def _serve(self) -> None:
        assert self._transport is not None
        CLIENT_HOST.set(self._client_host)
        CLIENT_PORT.set(self._client_port)
        CONNECTION_ID.set(self.connection_id)
        CLIENT_SOFTWARE.set(ClientSoftware())
        LISTENER_NAME.set(self._listener_name)
        PRINCIPAL.set(self._principal)
        try:
            while (frame := await self._next_frame()) is not None:
                keep = await self._serve_one(frame)
                self._done_handling()
                if not keep:
                    self.abort()
                    return
            self._transport.close()
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError) as exc:
            log.debug("connection from %s lost while writing: %s", self.peer, exc)
            self.abort()
        except Exception:
            log.exception("closing connection from %s: internal error", self.peer)
            self.abort()

    async def _serve_one(self, frame: memoryview) -> bool:
        """Handle one request; False means the connection must be closed."""
        if self._gate is not None:
            await self._gate.enter(self._budget.address)
        gate = self._authenticator
        if gate is not None and gate.expects_raw_token:
            return await self._gated(gate.raw_token(bytes(frame), time.monotonic()), None)
        try:
            header, request = decode_request(frame)
        except UnknownApiKeyError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            return False
        except UnsupportedRequestVersion as exc:
            answer = self._reject_version(exc.header)
            if answer is None:
                log.warning("closing connection from %s: %s", self.peer, exc)
                return False
            await self._write(
                encode_response(exc.header.correlation_id, exc.header.request_api_key, 0, answer)
            )
            return True
        except DecodeError as exc:
            log.warning("closing connection from %s: malformed request: %s", self.peer, exc)
            return False
        if gate is not None:
            outcome = gate.request(header, request, time.monotonic())
            if outcome is not None:
                return await self._gated(outcome, header)
        try:
            response = await self._handle(header, request)
        except CloseConnection as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
            return False
        except Exception:
            log.exception(
                "closing connection from %s: handler of api %d v%d failed",
                self.peer,
                header.request_api_key,
                header.request_api_version,
            )
            return False
        if response is not None:
            parts = encode_response(
                header.correlation_id, header.request_api_key, header.request_api_version, response
            )
            await self._write(parts)
        throttle_ms = THROTTLE_MS.get()
        if throttle_ms > 0:
            THROTTLE_MS.set(0)
            await self._mute(throttle_ms / 1000)
        return True

    async def _gated(self, outcome: Outcome, header: RequestHeader | None) -> bool:
        """Carry out the SASL gate's answer; False closes the connection."""
        gate = self._authenticator
        assert gate is not None
        if outcome.reason is not None:
            self._refuse(outcome.reason)
        if outcome.delay_seconds > 0:
            await asyncio.sleep(outcome.delay_seconds)
        if outcome.response is not None:
            if header is None:
                token = outcome.response
                assert isinstance(token, bytes)
                await self._write([struct.pack(">i", len(token)), token])
            else:
                await self._write(
                    encode_response(
                        header.correlation_id,
                        header.request_api_key,
                        header.request_api_version,
                        outcome.response,
                    )
                )
        if outcome.close:
            return False
        if gate.principal is not None and gate.principal != self._principal:
            self._principal = gate.principal
            PRINCIPAL.set(gate.principal)
        if gate.principal is not None and not self._budget.trusted:
            self._budget.trusted = True
            if self._authenticated is not None:
                self._authenticated()
        self._decoder.max_frame_size = gate.frame_limit
        return True

    async def _mute(self, seconds: float) -> None:
        self._muted = True
        self._update_reading()
        try:
            await asyncio.sleep(seconds)
        finally:
            self._muted = False
            self._update_reading()

    def _sendfile_now(self, region: FileRegion) -> int:
        """Send as much of `region` as the socket takes now, straight from the file; the
        caller checked that the transport holds nothing to send first. Most regions go
        whole, without the set-up of asyncio's sendfile (a future, a writer callback, a
        loop turn), which was a tenth of the broker's time in a 1,000-partition fetch; the
        rest, when the socket is full, goes through asyncio's sendfile."""
        sent = 0
        if self._socket_fd < 0:
            return sent
        in_fd = region.file.fileno()
        while sent < region.nbytes:
            try:
                n = os.sendfile(
                    self._socket_fd, in_fd, region.position + sent, region.nbytes - sent
                )
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:
                break
            sent += n
        return sent

    async def _write(self, parts: list[bytes | object]) -> None:
        transport = self._transport
        assert transport is not None
        if transport.is_closing():
            raise ConnectionResetError("transport closing")
        pending: list[bytes] = []
        for part in parts:
            if isinstance(part, bytes | bytearray | memoryview):
                pending.append(bytes(part) if not isinstance(part, bytes) else part)
                continue
            assert isinstance(part, FileRegion)
            if part.nbytes < SENDFILE_MIN_BYTES:
                pending.append(part.read())
                continue
            if pending:
                transport.writelines(pending)
                pending = []
            if self._security.tls is not None:
                for piece in part.split(TLS_PIECE_BYTES):
                    transport.write(piece.read())
                    if not self._writable.is_set():
                        await self._writable.wait()
                    if transport.is_closing():
                        raise ConnectionResetError("transport closing")
                continue
            # Direct only while the transport is open (asyncio closes the socket after it
            # starts closing) and has nothing queued that the file data would overtake.
            direct = not transport.is_closing() and transport.get_write_buffer_size() == 0
            sent = self._sendfile_now(part) if direct else 0
            if sent < part.nbytes:
                await asyncio.get_running_loop().sendfile(
                    transport, part.file, part.position + sent, part.nbytes - sent
                )
        if pending:
            transport.writelines(pending)
        if not self._writable.is_set():
            await self._writable.wait()
