from kbroker.security.plain import PlainError, PlainExchange
from kbroker.security.sasl_session import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SaslSession,
)
from kbroker.security.scram import ScramError, ScramServer, make_credential
from wire.errors import ErrorCode

METADATA = 3


def _session() -> SaslSession:
    cred = make_credential("SCRAM-SHA-256", "pencil")
    return SaslSession(
        {
            "PLAIN": lambda: PlainExchange({"alice": "secret"}),
            "SCRAM-SHA-256": lambda: ScramServer("SCRAM-SHA-256", {"user": cred}.get),
        },
        (PlainError, ScramError),
    )


def test_only_api_versions_and_sasl_before_authentication() -> None:
    session = _session()
    assert session.allowed(API_VERSIONS) and session.allowed(SASL_HANDSHAKE)
    assert not session.allowed(METADATA) and not session.allowed(SASL_AUTHENTICATE)
    assert session.frame_limit(100 << 20) == 512 * 1024
    assert session.handshake("PLAIN", 1) == (ErrorCode.NONE, ["PLAIN", "SCRAM-SHA-256"])
    assert session.allowed(SASL_AUTHENTICATE) and not session.allowed(METADATA)
    result = session.authenticate(b"\x00alice\x00secret")
    assert result.error is ErrorCode.NONE
    assert session.authenticated and session.principal == "User:alice"
    assert session.allowed(METADATA)
    assert session.frame_limit(100 << 20) == 100 << 20


def test_wrong_password_fails_with_a_message() -> None:
    session = _session()
    session.handshake("PLAIN", 1)
    result = session.authenticate(b"\x00alice\x00nope")
    assert result.error is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert result.message and "Invalid username or password" in result.message
    assert session.failed and not session.allowed(API_VERSIONS)


def test_unknown_mechanism_and_repeated_handshake() -> None:
    session = _session()
    assert session.handshake("GSSAPI", 1)[0] is ErrorCode.UNSUPPORTED_SASL_MECHANISM
    session = _session()
    session.handshake("PLAIN", 1)
    assert session.handshake("PLAIN", 1)[0] is ErrorCode.ILLEGAL_SASL_STATE


def test_v0_handshake_takes_raw_tokens() -> None:
    session = _session()
    session.handshake("SCRAM-SHA-256", 0)
    assert session.raw_tokens and not session.allowed(SASL_AUTHENTICATE)
    reply = session.authenticate(b"n,,n=user,r=abc")
    assert reply.error is ErrorCode.NONE and reply.reply.startswith(b"r=abc")
    assert not session.authenticated


def test_authenticate_before_handshake() -> None:
    session = _session()
    assert session.authenticate(b"x").error is ErrorCode.ILLEGAL_SASL_STATE
