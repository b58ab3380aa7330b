"""One connection's SASL state before and during authentication, sans-IO.

The shell feeds it SaslHandshake / SaslAuthenticate requests (or, after a v0
handshake, the raw length-prefixed tokens older clients send) and asks whether
any other request may pass yet. KIP-152: a failure answers
SASL_AUTHENTICATION_FAILED with a message and the connection is then closed.
KIP-368: an authenticated client may start over with a v1 handshake to
re-authenticate; it must come back as the same principal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from wire.errors import ErrorCode

# Kafka's sasl.server.max.receive.size default: frames before authentication are small.
DEFAULT_MAX_RECEIVE_SIZE = 524288
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


class Exchange(Protocol):
    username: str | None

    @property
    def complete(self) -> bool: ...

    def step(self, message: bytes) -> bytes: ...


class _State(Enum):
    HANDSHAKE = 1
    AUTHENTICATE = 2
    COMPLETE = 3
    FAILED = 4


@dataclass(frozen=True)
class AuthResult:
    error: ErrorCode
    message: str | None
    reply: bytes


class SaslSession:
    def __init__(
        self,
        mechanisms: dict[str, Callable[[], Exchange]],
        failure_types: tuple[type, ...],
        max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
    ) -> None:
        self._mechanisms = mechanisms
        self._failures = failure_types
        self._max_receive_size = max_receive_size
        self._state = _State.HANDSHAKE
        self._exchange: Exchange | None = None
        self.mechanism: str | None = None
        self.raw_tokens = False
        self.principal: str | None = None
        # During a re-authentication: other requests wait for it (KIP-368).
        self.reauthenticating = False

    @property
    def authenticated(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def credential_lifetime_ms(self) -> int | None:
        """How much longer the credential just presented is valid (an OAUTHBEARER token),
        or None when it does not expire."""
        return getattr(self._exchange, "remaining_ms", None)

    @property
    def failed(self) -> bool:
        return self._state is _State.FAILED

    def frame_limit(self, broker_limit: int) -> int:
        """The largest frame to accept now: small until the client is authenticated."""
        return broker_limit if self.authenticated else min(self._max_receive_size, broker_limit)

    def allowed(self, api_key: int) -> bool:
        """May a request with this API key be handled now? If not, close the connection."""
        if self._state is _State.COMPLETE:
            return True
        if self._state is _State.HANDSHAKE:
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self._state is _State.AUTHENTICATE:
            return api_key == SASL_AUTHENTICATE and not self.raw_tokens
        return False

    def handshake(self, mechanism: str, version: int) -> tuple[ErrorCode, list[str]]:
        enabled = list(self._mechanisms)
        if self._state is _State.COMPLETE and version >= 1:
            self.reauthenticating = True
        elif self._state is not _State.HANDSHAKE:
            self._state = _State.FAILED
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        if mechanism not in self._mechanisms or (
            self.reauthenticating and mechanism != self.mechanism
        ):
            self._state = _State.FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        self.mechanism = mechanism
        self._exchange = self._mechanisms[mechanism]()
        # SaslHandshake v0: the tokens follow as bare length-prefixed frames.
        self.raw_tokens = version == 0
        self._state = _State.AUTHENTICATE
        return ErrorCode.NONE, enabled

    def authenticate(self, token: bytes) -> AuthResult:
        if self._state is not _State.AUTHENTICATE or self._exchange is None:
            self._state = _State.FAILED
            return AuthResult(ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate", b"")
        try:
            reply = self._exchange.step(token)
        except self._failures as exc:
            self._state = _State.FAILED
            return AuthResult(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"")
        if self._exchange.complete:
            principal = f"User:{self._exchange.username}"
            if self.reauthenticating and principal != self.principal:
                self._state = _State.FAILED
                return AuthResult(
                    ErrorCode.SASL_AUTHENTICATION_FAILED,
                    f"Cannot change principals during re-authentication from {self.principal}: "
                    f"{principal}",
                    b"",
                )
            self._state = _State.COMPLETE
            self.reauthenticating = False
            self.principal = principal
        return AuthResult(ErrorCode.NONE, None, reply)
