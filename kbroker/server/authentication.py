"""A SASL listener's gate in front of the request handlers, sans-IO.

The connection passes every request through ``request()`` (and, after a v0 handshake,
the raw tokens through ``raw_token()``); the answer says what to write, whether to close
the connection afterwards and how long to wait first. The SASL exchange itself is
kbroker.security.sasl_session's; this adds what the connection needs around it:

- the frame limit: ``sasl.server.max.receive.size`` until the client is authenticated;
- KIP-152: a failed exchange is answered with SASL_AUTHENTICATION_FAILED and its message
  after ``connection.failed.authentication.delay.ms``, then the connection is closed;
  a request other than ApiVersions, SaslHandshake and SaslAuthenticate before
  authentication closes it at once, as Kafka does;
- ours (issue 29): at most MAX_REQUESTS_BEFORE_AUTHENTICATION requests (ApiVersions and
  the SASL ones) before the client has authenticated, then the connection is closed: a
  client needs a handful (ApiVersions, SaslHandshake, one to three SaslAuthenticate), and
  an unauthenticated connection looping on ApiVersions would otherwise cost the broker a
  request a turn until the authentication timeout;
- KIP-368: the session's lifetime (``connections.max.reauth.ms``) is told to the client in
  SaslAuthenticate v1+; a request arriving after it expired, without a re-authentication,
  closes the connection.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.security.listener_security import SaslSettings
from kbroker.security.sasl_session import SASL_AUTHENTICATE, SASL_HANDSHAKE
from wire.errors import ErrorCode
from wire.messages.request_header import RequestHeader
from wire.messages.sasl_authenticate_response import SaslAuthenticateResponse
from wire.messages.sasl_handshake_response import SaslHandshakeResponse

MAX_REQUESTS_BEFORE_AUTHENTICATION = 16


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the connection does with one request (or raw token) the gate took."""

    # The response body, or for a raw token the token to send back (length-prefixed);
    # None: nothing is written.
    response: object | None
    close: bool = False
    delay_seconds: float = 0.0
    # Why the connection is closed or the client refused, for the broker's log.
    reason: str | None = None


class ChannelAuthenticator:
    """One connection's SASL gate."""

    def __init__(self, settings: SaslSettings, frame_limit: int) -> None:
        self._settings = settings
        self._session = settings.new_session()
        self._broker_frame_limit = frame_limit
        self._expires_at: float | None = None
        self._requests_before_authentication = 0

    @property
    def principal(self) -> str | None:
        """``User:<name>`` once authenticated."""
        return self._session.principal

    @property
    def frame_limit(self) -> int:
        """The largest request frame to accept now."""
        return self._session.frame_limit(self._broker_frame_limit)

    @property
    def expects_raw_token(self) -> bool:
        """After a v0 handshake the next frame is a bare SASL token, not a request."""
        session = self._session
        return session.raw_tokens and not session.authenticated and not session.failed

    def _over_budget(self) -> Outcome | None:
        """Count a request of a client not authenticated yet; the closing outcome once it
        has sent more than it could need."""
        if self._session.principal is not None:
            return None
        self._requests_before_authentication += 1
        if self._requests_before_authentication <= MAX_REQUESTS_BEFORE_AUTHENTICATION:
            return None
        return Outcome(
            None,
            close=True,
            reason=f"more than {MAX_REQUESTS_BEFORE_AUTHENTICATION} requests before authentication",
        )

    def raw_token(self, token: bytes, now: float) -> Outcome:
        refused = self._over_budget()
        if refused is not None:
            return refused
        result = self._session.authenticate(token)
        if result.error != ErrorCode.NONE:
            # A v0 client has no way to read an error: the connection just closes.
            return Outcome(
                None,
                close=True,
                delay_seconds=self._settings.failure_delay_ms / 1000,
                reason=self._failure(result.message or result.error.name),
            )
        self._authenticated(now)
        return Outcome(result.reply)

    def request(self, header: RequestHeader, body: object, now: float) -> Outcome | None:
        """The gate's answer to a request, or None when it goes on to its handler."""
        refused = self._over_budget()
        if refused is not None:
            return refused
        api_key = header.request_api_key
        session = self._session
        if api_key == SASL_HANDSHAKE:
            mechanism = getattr(body, "mechanism", "")
            error, enabled = session.handshake(mechanism, header.request_api_version)
            response = SaslHandshakeResponse(error_code=error, mechanisms=enabled)
            if error != ErrorCode.NONE:
                reason = f"{error.name} for mechanism {mechanism!r}"
                return Outcome(response, close=True, reason=reason)
            return Outcome(response)
        if api_key == SASL_AUTHENTICATE:
            result = session.authenticate(getattr(body, "auth_bytes", b""))
            if result.error != ErrorCode.NONE:
                message = result.message or result.error.name
                return Outcome(
                    SaslAuthenticateResponse(error_code=result.error, error_message=message),
                    close=True,
                    delay_seconds=self._settings.failure_delay_ms / 1000
                    if result.error == ErrorCode.SASL_AUTHENTICATION_FAILED
                    else 0.0,
                    reason=self._failure(message),
                )
            lifetime_ms = 0
            if session.authenticated:
                lifetime_ms = self._authenticated(now)
            return Outcome(
                SaslAuthenticateResponse(
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    auth_bytes=result.reply,
                    session_lifetime_ms=lifetime_ms,
                )
            )
        if not session.allowed(api_key):
            return Outcome(
                None, close=True, reason=f"request (api key {api_key}) before authentication"
            )
        if self._expires_at is not None and now >= self._expires_at:
            return Outcome(
                None,
                close=True,
                reason="SASL session expired (connections.max.reauth.ms) without re-authentication",
            )
        return None

    def _failure(self, message: str) -> str:
        return f"{message} with SASL mechanism {self._session.mechanism}"

    def _authenticated(self, now: float) -> int:
        """The session starts (again); returns its lifetime in ms (0: no expiry). With
        connections.max.reauth.ms set, a token's expiry shortens it (KIP-368)."""
        lifetime_ms = self._settings.reauth_ms
        credential_ms = self._session.credential_lifetime_ms
        if lifetime_ms > 0 and credential_ms is not None:
            lifetime_ms = max(1, min(lifetime_ms, credential_ms))
        self._expires_at = now + lifetime_ms / 1000 if lifetime_ms > 0 else None
        return lifetime_ms
