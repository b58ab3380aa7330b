"""A stand-in broker for the client shells' TLS and SASL tests (the broker's own listeners
speak neither yet): TLS from an ``ssl.SSLContext``, ApiVersions, SaslHandshake,
SaslAuthenticate with PLAIN or SCRAM (server side written from RFC 5802's formulas), and
Metadata once authenticated."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import hashlib
import hmac
import ssl
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.frame import decode_request, encode_response
from wire.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from wire.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from wire.messages.sasl_authenticate_response import SaslAuthenticateResponse
from wire.messages.sasl_handshake_response import SaslHandshakeResponse

SALT = b"test-salt"
ITERATIONS = 4096


@dataclass
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path


def make_certificates(directory: Path, dns_name: str = "localhost") -> Certificates:
    """A CA and a server certificate for ``dns_name`` only (no IP address)."""
    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("test CA"))
        .issuer_name(name("test CA"))
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(dns_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    found = Certificates(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    found.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    found.server_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    found.server_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return found


def server_context(certs: Certificates) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    return context


@dataclass
class _Session:
    mechanism: str = ""
    user: str | None = None
    scram: dict[str, str] = field(default_factory=dict)


class SecureServer:
    """Serves one broker (node 0) on 127.0.0.1 with every topic asked for having one
    partition; records who authenticated and how often."""

    def __init__(
        self,
        tls: ssl.SSLContext | None,
        users: dict[str, str],
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        session_lifetime_ms: int = 0,
        advertised_host: str = "localhost",
    ) -> None:
        self._tls = tls
        self._users = users
        self._mechanisms = mechanisms
        self._lifetime = session_lifetime_ms
        self._host = advertised_host
        self.port = 0
        self.authentications: list[tuple[str, str]] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> SecureServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        session = _Session()
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, body = decode_request(await reader.readexactly(size))
                answer = self._answer(session, header.request_api_key, body)
                if answer is None:
                    break
                parts = encode_response(
                    header.correlation_id,
                    header.request_api_key,
                    header.request_api_version,
                    answer,
                )
                writer.write(b"".join(bytes(p) for p in parts))  # type: ignore[call-overload]
                await writer.drain()
                if getattr(answer, "error_code", 0):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    def _answer(self, session: _Session, api_key: int, body: Any) -> Any:
        if api_key == ApiKey.API_VERSIONS:
            ranges = {
                ApiKey.API_VERSIONS: (0, 3),
                ApiKey.METADATA: (0, 12),
                ApiKey.SASL_HANDSHAKE: (0, 1),
                ApiKey.SASL_AUTHENTICATE: (0, 2),
            }
            return ApiVersionsResponse(
                api_keys=[
                    ApiVersion(api_key=k, min_version=a, max_version=b)
                    for k, (a, b) in ranges.items()
                ]
            )
        if api_key == ApiKey.SASL_HANDSHAKE:
            session.mechanism = body.mechanism
            error = (
                0 if body.mechanism in self._mechanisms else ErrorCode.UNSUPPORTED_SASL_MECHANISM
            )
            return SaslHandshakeResponse(error_code=error, mechanisms=list(self._mechanisms))
        if api_key == ApiKey.SASL_AUTHENTICATE:
            return self._authenticate(session, bytes(body.auth_bytes))
        if api_key == ApiKey.METADATA and session.user is not None:
            topics = [
                MetadataResponseTopic(
                    name=t.name,
                    partitions=[MetadataResponsePartition(partition_index=0, leader_id=0)],
                )
                for t in body.topics or []
            ]
            broker = MetadataResponseBroker(node_id=0, host=self._host, port=self.port)
            return MetadataResponse(brokers=[broker], controller_id=0, topics=topics)
        return None

    def _refused(self) -> SaslAuthenticateResponse:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
            error_message="invalid credentials",
        )

    def _done(self, session: _Session, user: str, token: bytes = b"") -> SaslAuthenticateResponse:
        session.user = user
        self.authentications.append((session.mechanism, user))
        return SaslAuthenticateResponse(auth_bytes=token, session_lifetime_ms=self._lifetime)

    def _authenticate(self, session: _Session, token: bytes) -> SaslAuthenticateResponse:
        if session.mechanism == "PLAIN":
            _, user, password = token.decode().split("\0")
            if self._users.get(user) != password:
                return self._refused()
            return self._done(session, user)
        algorithm = "sha256" if session.mechanism == "SCRAM-SHA-256" else "sha512"
        text = token.decode()
        if "first" not in session.scram:
            bare = text[3:]
            attrs = dict(part.split("=", 1) for part in bare.split(","))
            server_first = (
                f"r={attrs['r']}server,s={base64.b64encode(SALT).decode()},i={ITERATIONS}"
            )
            session.scram = {"first": bare, "server_first": server_first, "user": attrs["n"]}
            return SaslAuthenticateResponse(auth_bytes=server_first.encode())
        scram, session.scram = session.scram, {}
        without_proof, _, proof = text.rpartition(",p=")
        password = self._users.get(scram["user"])
        if password is None:
            return self._refused()
        salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), SALT, ITERATIONS)
        stored = hashlib.new(algorithm, hmac.digest(salted, b"Client Key", algorithm)).digest()
        auth = f"{scram['first']},{scram['server_first']},{without_proof}".encode()
        signature = hmac.digest(stored, auth, algorithm)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=True))
        if hashlib.new(algorithm, client_key).digest() != stored:
            return self._refused()
        server_signature = hmac.digest(
            hmac.digest(salted, b"Server Key", algorithm), auth, algorithm
        )
        return self._done(session, scram["user"], b"v=" + base64.b64encode(server_signature))


@contextlib.contextmanager
def in_thread(server: SecureServer) -> Iterator[SecureServer]:
    """Run ``server`` on an event loop of its own, for blocking clients."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop = asyncio.Event()

    async def main() -> None:
        async with server:
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
