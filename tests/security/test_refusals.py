"""What a secured broker does with clients it must refuse: each gets the protocol's error (or
a closed connection where the protocol has none), the broker logs it once, and everyone
else is still served."""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from compat_tests.broker_process import api_versions_error
from tests.security.secure_broker import SecureBroker, start_secure_broker
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.frame import decode_response, encode_request
from wire.messages.metadata_request import MetadataRequest
from wire.messages.request_header import RequestHeader
from wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
from wire.messages.sasl_handshake_request import SaslHandshakeRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def wait_for_log(secure: SecureBroker, pattern: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, secure.log_text())
        if found:
            return found.group(0)
        time.sleep(0.1)
    raise AssertionError(f"no log line matching {pattern!r}")


def still_serving(secure: SecureBroker) -> None:
    """A good client on the SASL_SSL listener, and the plaintext probe, still get answers."""
    admin = AdminClient(secure.client_settings("sasl_ssl_scram"))
    assert admin.list_topics(timeout=10).brokers
    assert api_versions_error("127.0.0.1", secure.ports["PLAINTEXT"]) == 0


def refused_admin(settings: dict[str, str]) -> str:
    admin = AdminClient({**settings, "socket.connection.setup.timeout.ms": "5000"})
    with pytest.raises(KafkaException) as failure:
        admin.list_topics(timeout=5)
    return str(failure.value)


@pytest.mark.parametrize(
    ("mode", "change", "logged"),
    [
        (
            "sasl_ssl_scram",
            {"sasl.password": "wrong"},
            r"Failed authentication with /127\.0\.0\.1 \(Authentication failed: invalid "
            r"credentials with SASL mechanism SCRAM-SHA-512\)",
        ),
        (
            "sasl_plaintext_plain",
            {"sasl.username": "mallory"},
            r"Failed authentication with /127\.0\.0\.1 \(Authentication failed: Invalid "
            r"username or password with SASL mechanism PLAIN\)",
        ),
        ("sasl_ssl_scram", {"ssl.ca.location": "probe"}, r"SSL handshake failed"),
    ],
    ids=["wrong-password", "unknown-user", "untrusted-broker"],
)
def test_bad_credentials(
    secure: SecureBroker,
    tmp_path_factory: pytest.TempPathFactory,
    mode: str,
    change: dict[str, str],
    logged: str,
) -> None:
    settings = {**secure.client_settings(mode), **change}
    if change.get("ssl.ca.location") == "probe":
        # The client trusts another CA: it refuses the broker, the broker logs the abort.
        from tests.security.certs import write_pki

        settings["ssl.ca.location"] = str(write_pki(tmp_path_factory.mktemp("other")).ca)
    refused_admin(settings)
    wait_for_log(secure, logged)
    still_serving(secure)


def test_plaintext_client_on_a_tls_port(secure: SecureBroker) -> None:
    port = secure.ports["SASL_SSL"]
    with pytest.raises(OSError):
        api_versions_error("127.0.0.1", port, timeout=5)
    wait_for_log(
        secure,
        r"Failed authentication with /127\.0\.0\.1 \(SSL handshake failed: "
        r"\[SSL: WRONG_VERSION_NUMBER\]",
    )
    still_serving(secure)


def test_tls_client_without_a_certificate_on_the_mutual_tls_port(secure: SecureBroker) -> None:
    settings = secure.client_settings("mtls")
    del settings["ssl.certificate.location"], settings["ssl.key.location"]
    refused_admin(settings)
    still_serving(secure)


def _raw(secure: SecureBroker, listener: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", secure.ports[listener]), timeout=5)


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize(
    ("payload", "logged"),
    [
        (b"\x47\x45\x54\x20/ HTTP/1.1\r\n\r\n", r"bad frame"),
        (
            struct.pack(">i", 6) + b"\xff\xfe\x00\x00\x00\x01",
            r"closing connection from 127\.0\.0\.1",
        ),
        (
            encode_request(
                RequestHeader(
                    request_api_key=ApiKey.METADATA, request_api_version=4, correlation_id=1
                ),
                MetadataRequest(topics=None),
                4,
            ),
            r"request \(api key 3\) before authentication",
        ),
    ],
    ids=["http", "garbage-header", "metadata-first"],
)
def test_bytes_before_authentication_close_the_connection(
    secure: SecureBroker, payload: bytes, logged: str
) -> None:
    with _raw(secure, "SASL_PLAINTEXT") as sock:
        sock.sendall(payload)
        assert _closed(sock)
    wait_for_log(secure, logged)
    still_serving(secure)


def _call(sock: socket.socket, api_key: int, version: int, body: object) -> object:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=9)
    sock.sendall(encode_request(header, body, version))  # type: ignore[arg-type]
    (size,) = struct.unpack(">i", _exact(sock, 4))
    return decode_response(_exact(sock, size), api_key, version)[1]


def _exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _plain_login(sock: socket.socket, user: str, password: str) -> object:
    handshake = _call(sock, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    assert handshake.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    token = f"\0{user}\0{password}".encode()
    return _call(sock, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token))


def test_failed_authentication_is_answered_with_a_message(secure: SecureBroker) -> None:
    """KIP-152: SASL_AUTHENTICATION_FAILED with the reason, after the failure delay."""
    with _raw(secure, "SASL_PLAINTEXT") as sock:
        started = time.monotonic()
        answer = _plain_login(sock, "alice", "not-her-password")
        assert time.monotonic() - started >= 0.09  # connection.failed.authentication.delay.ms
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
        assert "Invalid username or password" in answer.error_message  # type: ignore[attr-defined]
        assert _closed(sock)


@pytest.fixture(scope="module")
def short_sessions(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[], SecureBroker]]:
    brokers: list[SecureBroker] = []

    def start() -> SecureBroker:
        brokers.append(
            start_secure_broker(
                tmp_path_factory.mktemp("reauth"),
                **{"listener.name.sasl_plaintext.connections.max.reauth.ms": "1500"},
            )
        )
        return brokers[-1]

    yield start
    for broker in brokers:
        broker.process.stop()


def test_expired_session_closes_the_connection(short_sessions: Callable[[], SecureBroker]) -> None:
    """KIP-368: a client that does not re-authenticate within connections.max.reauth.ms is
    disconnected at its next request; one that re-authenticates goes on."""
    secure = short_sessions()
    with _raw(secure, "SASL_PLAINTEXT") as sock:
        answer = _plain_login(sock, "alice", "alice-secret")
        assert answer.session_lifetime_ms == 1500  # type: ignore[attr-defined]
        _call(sock, ApiKey.METADATA, 4, MetadataRequest(topics=[]))
        time.sleep(1.7)
        header = RequestHeader(
            request_api_key=ApiKey.METADATA, request_api_version=4, correlation_id=2
        )
        sock.sendall(encode_request(header, MetadataRequest(topics=[]), 4))
        assert _closed(sock)
    wait_for_log(secure, r"SASL session expired")
    with _raw(secure, "SASL_PLAINTEXT") as sock:
        _plain_login(sock, "alice", "alice-secret")
        time.sleep(1.0)
        again = _plain_login(sock, "alice", "alice-secret")
        assert again.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
        time.sleep(1.0)
        # 2 s after the first login, 1 s after the second: still within the new session.
        _call(sock, ApiKey.METADATA, 4, MetadataRequest(topics=[]))
