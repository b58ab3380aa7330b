"""One client connection to a Kafka broker as a state machine: bytes in, events and bytes out.

The caller owns the socket. It hands received bytes to ``receive_data`` (or reads straight
into ``get_buffer()`` and calls ``buffer_updated``), gets back events, and writes whatever
``data_to_send()`` returns. Nothing here touches a socket, an event loop or a clock, so the
asyncio shell (kbroker.client), the blocking shell (kbroker.data_client) and the tests drive
the same code.

What a connection does on its own, before the caller may send anything:

1. ApiVersions (KIP-35) at the newest version we know. A broker that does not know that
   version answers in version 0 with UNSUPPORTED_VERSION and its own range for ApiVersions
   (KIP-511); we ask again at the newest version both know.
2. With a SASL mechanism: SaslHandshake (v1 when the broker has it, else v0), then the
   mechanism's tokens, inside SaslAuthenticate requests after a v1 handshake, or as raw
   size-prefixed frames after a v0 one (KIP-152).

Then ``Ready`` is emitted and ``send`` picks for each request the newest version both sides
and the caller's caps allow. Responses come back in request order (Kafka answers a
connection's requests in order); each carries the correlation id ``send`` returned.
``reauthenticate()`` runs the SASL exchange again on a live connection when the broker's
session lifetime runs out (KIP-368); requests sent meanwhile wait until it is over.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kbroker.client_core.sasl import SaslMechanism
from wire.api_keys import REQUEST_CLASSES, ApiKey
from wire.codegen.runtime import Message
from wire.errors import ErrorCode, KafkaError
from wire.frame import FrameDecoder, decode_response, encode_request
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.api_versions_response import ApiVersionsResponse
from wire.messages.produce_request import ProduceRequest
from wire.messages.request_header import RequestHeader
from wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
from wire.messages.sasl_authenticate_response import SaslAuthenticateResponse
from wire.messages.sasl_handshake_request import SaslHandshakeRequest
from wire.messages.sasl_handshake_response import SaslHandshakeResponse

# A response may be as large as the broker makes it (a Fetch up to its max_bytes and more);
# the frame decoder grows its buffer with the bytes that arrive, not with this bound.
MAX_FRAME_BYTES = 0x7FFFFFFF
# KIP-511: the software name and version sent with ApiVersions v3+.
SOFTWARE_NAME = "kbroker"
SOFTWARE_VERSION = "0.1.0"
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")

Versions = Mapping[int, tuple[int, int]]


class ProtocolError(ConnectionError):
    """The broker broke the protocol (a response nobody asked for); the connection is dead."""


class State(enum.Enum):
    NEGOTIATING = "negotiating"  # ApiVersions sent, no answer yet
    AUTHENTICATING = "authenticating"  # the first SASL exchange
    SASL_RAW = "sasl-raw"  # after a v0 SaslHandshake: tokens are raw frames
    READY = "ready"
    REAUTHENTICATING = "reauthenticating"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Ready:
    """Negotiation (and authentication) is over: requests may be sent."""

    versions: Versions
    # KIP-368: when the broker ends the session unless re-authenticated, in ms (0: never).
    session_lifetime_ms: int


@dataclass(frozen=True, slots=True)
class Reauthenticated:
    session_lifetime_ms: int


@dataclass(frozen=True, slots=True)
class Response:
    correlation_id: int
    api_key: int
    version: int
    body: Any


Event = Ready | Reauthenticated | Response


@dataclass(frozen=True, slots=True)
class Sent:
    """What ``send`` queued: the id its response will carry, and the version chosen."""

    correlation_id: int
    version: int
    # Produce with acks=0 is never answered.
    expects_response: bool


@dataclass(slots=True)
class _Pending:
    correlation_id: int
    api_key: int
    version: int
    internal: bool


# The newest version of each request the project's client code builds and reads, where the
# specs (Kafka 4.3) have newer ones whose meaning differs (topic ids in place of names, the
# second part of KIP-890, ...): a broker that speaks them is still asked in these.
WRITTEN_FOR: Versions = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.FETCH: (0, 17),
    ApiKey.LIST_OFFSETS: (0, 10),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.END_TXN: (0, 4),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
}


def choose_version(
    api_key: int, theirs: Versions, caps: Versions, highest: int | None = None
) -> int:
    """The newest version of ``api_key`` that we (``WRITTEN_FOR``), the broker (``theirs``),
    the caller's ``caps`` (lowest, highest) and ``highest`` all allow."""
    cls = REQUEST_CLASSES[api_key]
    low, high = caps.get(api_key, WRITTEN_FOR.get(api_key, (cls.MIN_VERSION, cls.MAX_VERSION)))
    high = min(high, WRITTEN_FOR.get(api_key, (0, high))[1])
    broker = theirs.get(api_key)
    if broker is None:
        name = ApiKey(api_key).name
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"the broker does not support {name}")
    top = min(cls.MAX_VERSION, high, broker[1], cls.MAX_VERSION if highest is None else highest)
    if top < max(cls.MIN_VERSION, low, broker[0]):
        name = ApiKey(api_key).name
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"no common version of {name}")
    return top


class ClientConnection:
    """The protocol side of one connection (see the module docstring)."""

    def __init__(
        self,
        client_id: str,
        *,
        caps: Versions | None = None,
        sasl: SaslMechanism | None = None,
        max_frame_size: int = MAX_FRAME_BYTES,
    ) -> None:
        self.client_id = client_id
        self.caps: Versions = dict(caps or {})
        self.versions: dict[int, tuple[int, int]] = {}
        self.state = State.NEGOTIATING
        self._sasl = sasl
        self._decoder = FrameDecoder(max_frame_size)
        self._out: list[bytes] = []
        self._pending: deque[_Pending] = deque()
        # Requests sent while re-authenticating, written once the exchange is over (with
        # what to expect back, None for an unanswered Produce).
        self._held: list[tuple[_Pending | None, bytes]] = []
        self._correlation = 0
        self._handshake_version = 0
        self._send_api_versions(ApiVersionsRequest.MAX_VERSION)

    # -- bytes in and out ------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """Bytes the caller must write, in order; empty when there are none."""
        out, self._out = self._out, []
        return b"".join(out)

    def get_buffer(self) -> memoryview:
        """Writable space for the next read (``recv_into``, asyncio.BufferedProtocol)."""
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> list[Event]:
        """``nbytes`` were read into the last ``get_buffer()``; the events they complete."""
        return self._on_frames(self._decoder.buffer_updated(nbytes))

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Bytes received by other means; the events they complete."""
        return self._on_frames(self._decoder.feed(data))

    def _on_frames(self, frames: list[memoryview]) -> list[Event]:
        events: list[Event] = []
        try:
            for frame in frames:
                event = self._on_frame(frame)
                if event is not None:
                    events.append(event)
        except BaseException:
            self.close()
            raise
        return events

    def close(self) -> None:
        """The connection is gone (or broken); nothing more may be sent or received."""
        self.state = State.CLOSED
        self._decoder.close()

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered yet (the connection's own included)."""
        return len(self._pending) + len(self._held)

    # -- requests --------------------------------------------------------------------------

    def version(self, api_key: int, highest: int | None = None) -> int:
        """The version ``send`` would use for ``api_key`` (at most ``highest``)."""
        return choose_version(api_key, self.versions, self.caps, highest)

    def send(
        self, api_key: int, body: Message, version: int | None = None, *, highest: int | None = None
    ) -> Sent:
        """Queue a request at ``version`` (default: the best common one, at most
        ``highest``)."""
        if self.state not in (State.READY, State.REAUTHENTICATING):
            raise RuntimeError(f"cannot send on a connection that is {self.state.value}")
        if version is None:
            version = self.version(api_key, highest)
        expects_response = not (isinstance(body, ProduceRequest) and body.acks == 0)
        pending, frame = self._encode(api_key, body, version, internal=False)
        if self.state is State.REAUTHENTICATING:
            self._held.append((pending if expects_response else None, frame))
        else:
            self._out.append(frame)
            if expects_response:
                self._pending.append(pending)
        return Sent(pending.correlation_id, version, expects_response)

    def _encode(
        self, api_key: int, body: Message, version: int, *, internal: bool
    ) -> tuple[_Pending, bytes]:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self._correlation,
            client_id=self.client_id,
        )
        frame = encode_request(header, body, version)
        return _Pending(self._correlation, api_key, version, internal), frame

    def _send_internal(self, api_key: int, body: Message, version: int) -> None:
        pending, frame = self._encode(api_key, body, version, internal=True)
        self._out.append(frame)
        self._pending.append(pending)

    # -- responses -------------------------------------------------------------------------

    def _on_frame(self, frame: memoryview) -> Event | None:
        if self.state is State.CLOSED:
            raise ProtocolError("data on a closed connection")
        if self.state is State.SASL_RAW:
            return self._on_token(bytes(frame))
        if not self._pending:
            raise ProtocolError("a response to no request")
        if len(frame) < 4:
            raise ProtocolError("a response shorter than its header")
        pending = self._pending.popleft()
        (correlation,) = _CORRELATION.unpack_from(frame, 0)
        if correlation != pending.correlation_id:
            raise ProtocolError(f"response {correlation} to request {pending.correlation_id}")
        if not pending.internal:
            _, body = decode_response(frame, pending.api_key, pending.version)
            return Response(correlation, pending.api_key, pending.version, body)
        if pending.api_key == ApiKey.API_VERSIONS:
            return self._on_api_versions(frame, pending.version)
        _, body = decode_response(frame, pending.api_key, pending.version)
        if isinstance(body, SaslHandshakeResponse):
            return self._on_handshake(body)
        assert isinstance(body, SaslAuthenticateResponse)
        return self._on_authenticate(body)

    def _send_api_versions(self, version: int) -> None:
        request = ApiVersionsRequest()
        if version >= 3:
            request.client_software_name = SOFTWARE_NAME
            request.client_software_version = SOFTWARE_VERSION
        self._send_internal(ApiKey.API_VERSIONS, request, version)

    def _on_api_versions(self, frame: memoryview, version: int) -> Event | None:
        # KIP-511: the refusal of an unknown version is written in version 0, whatever
        # version was asked; the error code comes first in every version's body.
        (error,) = _ERROR_CODE.unpack_from(frame, 4) if len(frame) >= 6 else (None,)
        if error == ErrorCode.UNSUPPORTED_VERSION and version > 0:
            _, body = decode_response(frame, ApiKey.API_VERSIONS, 0)
            assert isinstance(body, ApiVersionsResponse)
            theirs = {k.api_key: k.max_version for k in body.api_keys}
            retry = min(ApiVersionsRequest.MAX_VERSION, theirs.get(ApiKey.API_VERSIONS, 0))
            if retry >= version:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "ApiVersions refused")
            self._send_api_versions(retry)
            return None
        _, body = decode_response(frame, ApiKey.API_VERSIONS, version)
        assert isinstance(body, ApiVersionsResponse)
        if body.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(body.error_code), "ApiVersions failed")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        if self._sasl is None:
            self.state = State.READY
            return Ready(self.versions, 0)
        self.state = State.AUTHENTICATING
        self._handshake_version = choose_version(ApiKey.SASL_HANDSHAKE, self.versions, self.caps)
        self._send_handshake()
        return None

    # -- SASL --------------------------------------------------------------------------------

    def reauthenticate(self) -> None:
        """Start the SASL exchange again (KIP-368), e.g. before the session lifetime the
        broker announced runs out. Requests sent until it is over are held back."""
        if self.state is not State.READY or self._sasl is None:
            raise RuntimeError(f"cannot re-authenticate a connection that is {self.state.value}")
        if self._handshake_version < 1:
            raise RuntimeError("re-authentication needs SaslHandshake v1 (KIP-368)")
        self.state = State.REAUTHENTICATING
        self._send_handshake()

    def _send_handshake(self) -> None:
        assert self._sasl is not None
        request = SaslHandshakeRequest(mechanism=self._sasl.name)
        self._send_internal(ApiKey.SASL_HANDSHAKE, request, self._handshake_version)

    def _on_handshake(self, body: SaslHandshakeResponse) -> Event | None:
        assert self._sasl is not None
        if body.error_code != ErrorCode.NONE:
            enabled = ", ".join(body.mechanisms) or "none"
            raise KafkaError(
                ErrorCode(body.error_code),
                f"{self._sasl.name} refused; the broker offers {enabled}",
            )
        token = self._sasl.start()
        if self._handshake_version == 0:
            # KIP-152: after a v0 handshake the tokens travel as bare size-prefixed frames.
            self.state = State.SASL_RAW
            self._out.append(_SIZE.pack(len(token)) + token)
        else:
            self._send_authenticate(token)
        return None

    def _send_authenticate(self, token: bytes) -> None:
        version = choose_version(ApiKey.SASL_AUTHENTICATE, self.versions, self.caps)
        self._send_internal(
            ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=token), version
        )

    def _on_authenticate(self, body: SaslAuthenticateResponse) -> Event | None:
        if body.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(body.error_code), body.error_message or "SASL failed")
        return self._after_token(bytes(body.auth_bytes), body.session_lifetime_ms)

    def _on_token(self, token: bytes) -> Event | None:
        return self._after_token(token, 0)

    def _after_token(self, challenge: bytes, session_lifetime_ms: int) -> Event | None:
        assert self._sasl is not None
        answer = self._sasl.step(challenge)
        if answer is not None:
            if self.state is State.SASL_RAW:
                self._out.append(_SIZE.pack(len(answer)) + answer)
            else:
                self._send_authenticate(answer)
            return None
        if not self._sasl.done:
            raise KafkaError(ErrorCode.ILLEGAL_SASL_STATE, f"{self._sasl.name} stopped early")
        first = self.state is not State.REAUTHENTICATING
        self.state = State.READY
        if first:
            return Ready(self.versions, session_lifetime_ms)
        held, self._held = self._held, []
        for pending, frame in held:
            self._out.append(frame)
            if pending is not None:
                self._pending.append(pending)
        return Reauthenticated(session_lifetime_ms)
