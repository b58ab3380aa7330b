"""SASL in the client core: the mechanisms alone (RFC 7677's SCRAM-SHA-256 example), and the
exchange over a connection, byte level (SaslHandshake v1 + SaslAuthenticate, v0 + raw
tokens, failures, KIP-368 re-authentication)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from kbroker.client_core.connection import ClientConnection, Ready, Reauthenticated, Response, State
from kbroker.client_core.sasl import Plain, SaslError, Scram, mechanism_for
from tests.client_core.fake_broker import FakeBroker
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.metadata_request import MetadataRequest
from wire.messages.metadata_response import MetadataResponse
from wire.messages.sasl_authenticate_response import SaslAuthenticateResponse
from wire.messages.sasl_handshake_response import SaslHandshakeResponse

# RFC 7677 section 3: user "user", password "pencil".
RFC7677_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677() -> Scram:
    return Scram("SCRAM-SHA-256", "user", "pencil", nonce=lambda: RFC7677_NONCE)


def test_scram_sha256_rfc7677_vector() -> None:
    scram = rfc7677()
    assert scram.start() == RFC7677_CLIENT_FIRST
    assert scram.step(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert not scram.done
    assert scram.step(RFC7677_SERVER_FINAL) is None
    assert scram.done


def test_scram_refuses_a_wrong_server_signature() -> None:
    scram = rfc7677()
    scram.start()
    scram.step(RFC7677_SERVER_FIRST)
    with pytest.raises(SaslError, match="signature"):
        scram.step(b"v=" + base64.b64encode(b"\0" * 32))


@pytest.mark.parametrize(
    ("server_first", "match"),
    [
        (b"r=someone-else,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        (RFC7677_SERVER_FIRST.replace(b"i=4096", b"i=1"), "iterations"),
        (b"garbage", "malformed"),
        (b"m=ext," + RFC7677_SERVER_FIRST, "extension"),
    ],
)
def test_scram_refuses_bad_server_first(server_first: bytes, match: str) -> None:
    scram = rfc7677()
    scram.start()
    with pytest.raises(SaslError, match=match):
        scram.step(server_first)


def test_scram_server_error_is_reported() -> None:
    scram = rfc7677()
    scram.start()
    scram.step(RFC7677_SERVER_FIRST)
    with pytest.raises(SaslError, match="invalid-proof"):
        scram.step(b"e=invalid-proof")


def test_scram_escapes_the_user_name() -> None:
    scram = Scram("SCRAM-SHA-512", "a=b,c", "pw", nonce=lambda: "n")
    assert scram.start() == b"n,,n=a=3Db=2Cc,r=n"


def test_scram_sha512_proof_checks_out() -> None:
    """A server side written from RFC 5802's formulas accepts SCRAM-SHA-512's proof."""
    scram = Scram("SCRAM-SHA-512", "alice", "secret", nonce=lambda: "cnonce")
    client_first_bare = scram.start()[3:]
    salt, iterations = b"salty", 4096
    server_first = b"r=cnonce-server,s=" + base64.b64encode(salt) + b",i=4096"
    client_final = scram.step(server_first)
    assert client_final is not None
    without_proof, _, proof = client_final.rpartition(b",p=")
    salted = hashlib.pbkdf2_hmac("sha512", b"secret", salt, iterations)
    auth = b",".join([client_first_bare, server_first, without_proof])
    stored_key = hashlib.sha512(hmac.digest(salted, b"Client Key", "sha512")).digest()
    signature = hmac.digest(stored_key, auth, "sha512")
    client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=True))
    assert hashlib.sha512(client_key).digest() == stored_key
    server_signature = hmac.digest(hmac.digest(salted, b"Server Key", "sha512"), auth, "sha512")
    assert scram.step(b"v=" + base64.b64encode(server_signature)) is None


def test_mechanism_names() -> None:
    assert isinstance(mechanism_for("PLAIN", "u", "p"), Plain)
    assert mechanism_for("SCRAM-SHA-512", "u", "p").name == "SCRAM-SHA-512"
    with pytest.raises(ValueError, match="GSSAPI"):
        mechanism_for("GSSAPI", "u", "p")


def negotiated(broker: FakeBroker, client: ClientConnection) -> list[object]:
    [(header, _)] = broker.receive(client.data_to_send())
    return client.receive_data(broker.answer(header, broker.api_versions()))


def test_plain_over_handshake_v1() -> None:
    broker = FakeBroker()
    client = ClientConnection("test", sasl=Plain("alice", "secret"))
    assert negotiated(broker, client) == []
    assert client.state is State.AUTHENTICATING
    [(header, handshake)] = broker.receive(client.data_to_send())
    assert (header.request_api_key, header.request_api_version) == (ApiKey.SASL_HANDSHAKE, 1)
    assert handshake.mechanism == "PLAIN"
    with pytest.raises(RuntimeError):
        client.send(ApiKey.METADATA, MetadataRequest())
    answer = SaslHandshakeResponse(mechanisms=["PLAIN", "SCRAM-SHA-256"])
    assert client.receive_data(broker.answer(header, answer)) == []
    [(header, auth)] = broker.receive(client.data_to_send())
    assert (header.request_api_key, header.request_api_version) == (ApiKey.SASL_AUTHENTICATE, 2)
    assert auth.auth_bytes == b"\0alice\0secret"
    done = broker.answer(header, SaslAuthenticateResponse(session_lifetime_ms=60_000))
    assert client.receive_data(done) == [Ready(client.versions, 60_000)]
    assert client.state is State.READY


def test_plain_over_handshake_v0_uses_raw_tokens() -> None:
    broker = FakeBroker({ApiKey.API_VERSIONS: (0, 3), ApiKey.SASL_HANDSHAKE: (0, 0)})
    client = ClientConnection("test", sasl=Plain("alice", "secret"))
    negotiated(broker, client)
    [(header, _)] = broker.receive(client.data_to_send())
    assert header.request_api_version == 0
    client.receive_data(broker.answer(header, SaslHandshakeResponse(mechanisms=["PLAIN"])))
    broker.sasl_raw = True
    assert broker.receive(client.data_to_send()) == []
    assert broker.raw_frames == [b"\0alice\0secret"]
    # The broker's answer to PLAIN: an empty token, a bare size prefix.
    assert client.receive_data(b"\0\0\0\0") == [Ready(client.versions, 0)]


def test_scram_over_a_connection_with_the_rfc_vector() -> None:
    broker = FakeBroker()
    client = ClientConnection("test", sasl=rfc7677())
    negotiated(broker, client)
    [(header, handshake)] = broker.receive(client.data_to_send())
    assert handshake.mechanism == "SCRAM-SHA-256"
    client.receive_data(broker.answer(header, SaslHandshakeResponse(mechanisms=["SCRAM-SHA-256"])))
    [(header, first)] = broker.receive(client.data_to_send())
    assert first.auth_bytes == RFC7677_CLIENT_FIRST
    challenge = SaslAuthenticateResponse(auth_bytes=RFC7677_SERVER_FIRST)
    assert client.receive_data(broker.answer(header, challenge)) == []
    [(header, final)] = broker.receive(client.data_to_send())
    assert final.auth_bytes == RFC7677_CLIENT_FINAL
    done = SaslAuthenticateResponse(auth_bytes=RFC7677_SERVER_FINAL)
    assert client.receive_data(broker.answer(header, done)) == [Ready(client.versions, 0)]


def test_unsupported_mechanism_names_what_the_broker_offers() -> None:
    broker = FakeBroker()
    client = ClientConnection("test", sasl=Plain("alice", "secret"))
    negotiated(broker, client)
    [(header, _)] = broker.receive(client.data_to_send())
    refusal = SaslHandshakeResponse(
        error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=["SCRAM-SHA-512"]
    )
    with pytest.raises(KafkaError, match="offers SCRAM-SHA-512") as exc:
        client.receive_data(broker.answer(header, refusal))
    assert exc.value.code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert client.state is State.CLOSED


def test_wrong_password_fails_with_the_brokers_message() -> None:
    broker = FakeBroker()
    client = ClientConnection("test", sasl=Plain("alice", "wrong"))
    negotiated(broker, client)
    [(header, _)] = broker.receive(client.data_to_send())
    client.receive_data(broker.answer(header, SaslHandshakeResponse(mechanisms=["PLAIN"])))
    [(header, _)] = broker.receive(client.data_to_send())
    refusal = SaslAuthenticateResponse(
        error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message="bad credentials"
    )
    with pytest.raises(KafkaError, match="bad credentials") as exc:
        client.receive_data(broker.answer(header, refusal))
    assert exc.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def authenticate_plain(broker: FakeBroker, client: ClientConnection, lifetime: int) -> list[object]:
    [(header, _)] = broker.receive(client.data_to_send())
    client.receive_data(broker.answer(header, SaslHandshakeResponse(mechanisms=["PLAIN"])))
    [(header, _)] = broker.receive(client.data_to_send())
    return client.receive_data(
        broker.answer(header, SaslAuthenticateResponse(session_lifetime_ms=lifetime))
    )


def test_reauthentication_holds_requests_until_done() -> None:
    broker = FakeBroker()
    client = ClientConnection("test", sasl=Plain("alice", "secret"))
    negotiated(broker, client)
    assert authenticate_plain(broker, client, 1000) == [Ready(client.versions, 1000)]
    before = client.send(ApiKey.METADATA, MetadataRequest(topics=[]))
    [(before_header, _)] = broker.receive(client.data_to_send())
    client.reauthenticate()
    held = client.send(ApiKey.METADATA, MetadataRequest(topics=[]))
    # The answer to the request sent before re-authentication still arrives first.
    [(header, handshake)] = broker.receive(client.data_to_send())
    assert header.request_api_key == ApiKey.SASL_HANDSHAKE
    [event] = client.receive_data(broker.answer(before_header, MetadataResponse()))
    assert isinstance(event, Response) and event.correlation_id == before.correlation_id
    client.receive_data(broker.answer(header, SaslHandshakeResponse(mechanisms=["PLAIN"])))
    [(header, auth)] = broker.receive(client.data_to_send())
    assert auth.auth_bytes == b"\0alice\0secret"
    done = broker.answer(header, SaslAuthenticateResponse(session_lifetime_ms=2000))
    assert client.receive_data(done) == [Reauthenticated(2000)]
    [(header, _)] = broker.receive(client.data_to_send())
    assert header.correlation_id == held.correlation_id
    [event] = client.receive_data(broker.answer(header, MetadataResponse()))
    assert isinstance(event, Response) and event.correlation_id == held.correlation_id


def test_reauthentication_needs_sasl() -> None:
    broker = FakeBroker()
    client = ClientConnection("test")
    negotiated(broker, client)
    with pytest.raises(RuntimeError):
        client.reauthenticate()
