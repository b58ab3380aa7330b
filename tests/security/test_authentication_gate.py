"""The SASL gate of a connection, as scenarios: requests in, outcomes out, a fake clock."""

from __future__ import annotations

from kbroker.security.listener_security import SaslSettings
from kbroker.security.plain import PlainExchange
from kbroker.server.authentication import MAX_REQUESTS_BEFORE_AUTHENTICATION, ChannelAuthenticator
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.request_header import RequestHeader
from wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
from wire.messages.sasl_handshake_request import SaslHandshakeRequest

BROKER_LIMIT = 100 * 1024 * 1024


def gate(reauth_ms: int = 0) -> ChannelAuthenticator:
    settings = SaslSettings(
        mechanisms={"PLAIN": lambda: PlainExchange({"alice": "pw", "bob": "pw2"})},
        max_receive_size=524288,
        reauth_ms=reauth_ms,
        failure_delay_ms=100,
    )
    return ChannelAuthenticator(settings, BROKER_LIMIT)


def header(api_key: int, version: int = 1) -> RequestHeader:
    return RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=7)


def handshake(g: ChannelAuthenticator, version: int = 1, mechanism: str = "PLAIN") -> object:
    outcome = g.request(
        header(ApiKey.SASL_HANDSHAKE, version), SaslHandshakeRequest(mechanism=mechanism), 0.0
    )
    assert outcome is not None
    return outcome


def authenticate(g: ChannelAuthenticator, token: bytes, now: float = 0.0) -> object:
    outcome = g.request(
        header(ApiKey.SASL_AUTHENTICATE), SaslAuthenticateRequest(auth_bytes=token), now
    )
    assert outcome is not None
    return outcome


def test_only_api_versions_and_sasl_before_authentication() -> None:
    g = gate()
    assert g.frame_limit == 524288
    assert g.request(header(ApiKey.API_VERSIONS, 3), object(), 0.0) is None
    refused = g.request(header(ApiKey.METADATA), object(), 0.0)
    assert refused is not None and refused.close and refused.response is None
    assert "before authentication" in (refused.reason or "")


def test_plain_success_lifts_the_frame_limit_and_names_the_principal() -> None:
    g = gate()
    answer = handshake(g)
    assert answer.response.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert answer.response.mechanisms == ["PLAIN"]  # type: ignore[attr-defined]
    ok = authenticate(g, b"\0alice\0pw")
    assert not ok.close and ok.response.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert g.principal == "User:alice" and g.frame_limit == BROKER_LIMIT
    assert g.request(header(ApiKey.METADATA), object(), 5.0) is None


def test_wrong_password_is_answered_with_a_message_after_the_delay_then_closed() -> None:
    g = gate()
    handshake(g)
    failed = authenticate(g, b"\0alice\0nope")
    assert failed.close and failed.delay_seconds == 0.1
    assert failed.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
    assert "Invalid username or password" in failed.response.error_message  # type: ignore[attr-defined]
    assert "with SASL mechanism PLAIN" in failed.reason
    assert g.principal is None


def test_unknown_mechanism() -> None:
    answer = handshake(gate(), mechanism="GSSAPI")
    assert answer.close
    assert answer.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM  # type: ignore[attr-defined]


def test_v0_handshake_then_raw_tokens() -> None:
    g = gate()
    handshake(g, version=0)
    assert g.expects_raw_token
    ok = g.raw_token(b"\0alice\0pw", 0.0)
    assert ok.response == b"" and not ok.close and g.principal == "User:alice"
    assert not g.expects_raw_token
    g2 = gate()
    handshake(g2, version=0)
    bad = g2.raw_token(b"\0alice\0nope", 0.0)
    assert bad.close and bad.response is None


def test_session_expiry_and_reauthentication() -> None:
    g = gate(reauth_ms=1000)
    handshake(g)
    ok = authenticate(g, b"\0alice\0pw", now=10.0)
    assert ok.response.session_lifetime_ms == 1000  # type: ignore[attr-defined]
    assert g.request(header(ApiKey.METADATA), object(), 10.9) is None
    # KIP-368: re-authenticating in time starts a new session.
    handshake(g)
    again = authenticate(g, b"\0alice\0pw", now=10.9)
    assert not again.close
    assert g.request(header(ApiKey.METADATA), object(), 11.5) is None
    expired = g.request(header(ApiKey.METADATA), object(), 12.0)
    assert expired is not None and expired.close and "expired" in (expired.reason or "")


def test_reauthentication_must_keep_the_principal() -> None:
    g = gate(reauth_ms=1000)
    handshake(g)
    authenticate(g, b"\0alice\0pw")
    handshake(g)
    changed = authenticate(g, b"\0bob\0pw2")
    assert changed.close
    assert "Cannot change principals" in changed.response.error_message  # type: ignore[attr-defined]


def test_a_client_looping_before_authentication_is_closed() -> None:
    """Issue 29: ApiVersions is allowed before authentication, but not without end."""
    g = gate()
    for _ in range(MAX_REQUESTS_BEFORE_AUTHENTICATION):
        assert g.request(header(ApiKey.API_VERSIONS, 3), object(), 0.0) is None
    refused = g.request(header(ApiKey.API_VERSIONS, 3), object(), 0.0)
    assert refused is not None and refused.close
    assert "requests before authentication" in (refused.reason or "")


def test_requests_after_authentication_are_not_counted() -> None:
    g = gate()
    for _ in range(MAX_REQUESTS_BEFORE_AUTHENTICATION - 2):
        assert g.request(header(ApiKey.API_VERSIONS, 3), object(), 0.0) is None
    handshake(g)
    assert not authenticate(g, b"\0alice\0pw").close
    for _ in range(3 * MAX_REQUESTS_BEFORE_AUTHENTICATION):
        assert g.request(header(ApiKey.METADATA), object(), 1.0) is None
