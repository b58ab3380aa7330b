"""SASL client mechanisms: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677).

A mechanism is a small state machine over opaque tokens: ``start()`` gives the client's
first token, ``step(challenge)`` takes each server token and gives the next client token,
or None once the exchange is over (``done`` is then True). How tokens travel (inside
SaslAuthenticate requests, or raw after a v0 SaslHandshake) is the connection's business.

No randomness is drawn here unless the caller leaves it to us: SCRAM's client nonce comes
from an injected function, so the RFC test vectors can be replayed byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Protocol

from wire.errors import ErrorCode, KafkaError

# Kafka refuses fewer PBKDF2 iterations than this for both SCRAM mechanisms; a server
# asking for fewer is not a Kafka broker we should send a proof derived that cheaply to.
SCRAM_MIN_ITERATIONS = 4096
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# RFC 5802 section 7: the GS2 header of a client without channel binding, and its base64.
_GS2_HEADER = "n,,"
_CHANNEL_BINDING = base64.b64encode(_GS2_HEADER.encode()).decode()


class SaslError(KafkaError):
    """The exchange failed on the client side (a bad server message or proof)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.SASL_AUTHENTICATION_FAILED, message)


class SaslMechanism(Protocol):
    """One client side of a SASL mechanism; ``start()`` begins a fresh exchange."""

    name: str

    @property
    def done(self) -> bool: ...

    def start(self) -> bytes: ...

    def step(self, challenge: bytes) -> bytes | None: ...


class Plain:
    """PLAIN: one token, ``authzid NUL authcid NUL password`` with an empty authzid."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def start(self) -> bytes:
        self._done = False
        return self._token

    def step(self, challenge: bytes) -> bytes | None:
        # The server's answer to PLAIN carries nothing; its arrival without an error is the
        # success.
        self._done = True
        return None


def _saslname(username: str) -> str:
    """RFC 5802 section 5.1: ``=`` and ``,`` in a user name are escaped."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslError(f"malformed SCRAM message {message!r}")
        found.setdefault(key, value)
    return found


class Scram:
    """SCRAM-SHA-256 or SCRAM-SHA-512 without channel binding (what Kafka offers)."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        nonce: Callable[[], str] | None = None,
    ) -> None:
        if mechanism not in _SCRAM_HASHES:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        self.name = mechanism
        self._hash = _SCRAM_HASHES[mechanism]
        self._username = username
        self._password = password.encode()
        self._nonce = nonce if nonce is not None else lambda: secrets.token_urlsafe(24)
        self._client_first_bare = ""
        self._client_nonce = ""
        self._server_signature = b""
        self._stage = 0

    @property
    def done(self) -> bool:
        return self._stage == 3

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.digest(key, message, self._hash)

    def start(self) -> bytes:
        self._client_nonce = self._nonce()
        self._client_first_bare = f"n={_saslname(self._username)},r={self._client_nonce}"
        self._stage = 1
        return (_GS2_HEADER + self._client_first_bare).encode()

    def step(self, challenge: bytes) -> bytes | None:
        if self._stage == 1:
            self._stage = 2
            return self._client_final(challenge.decode())
        if self._stage == 2:
            self._verify_server_final(challenge.decode())
            self._stage = 3
            return None
        raise SaslError("SCRAM message out of turn")

    def _client_final(self, server_first: str) -> bytes:
        fields = _attributes(server_first)
        if "m" in fields:
            raise SaslError("the server requires a SCRAM extension this client lacks")
        try:
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        except (KeyError, ValueError) as exc:
            raise SaslError(f"bad SCRAM server-first message {server_first!r}") from exc
        if not nonce.startswith(self._client_nonce) or nonce == self._client_nonce:
            raise SaslError("the server's nonce does not extend ours")
        if iterations < SCRAM_MIN_ITERATIONS:
            raise SaslError(f"{iterations} iterations is below {SCRAM_MIN_ITERATIONS}")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={_CHANNEL_BINDING},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: str) -> None:
        fields = _attributes(server_final)
        if "e" in fields:
            raise SaslError(f"the server refused: {fields['e']}")
        try:
            signature = base64.b64decode(fields["v"])
        except (KeyError, ValueError) as exc:
            raise SaslError(f"bad SCRAM server-final message {server_final!r}") from exc
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslError("the server's signature is wrong: it does not know the password")


def mechanism_for(name: str, username: str, password: str) -> SaslMechanism:
    """The client mechanism Kafka calls ``name`` (its ``sasl.mechanism`` values)."""
    if name == "PLAIN":
        return Plain(username, password)
    if name in _SCRAM_HASHES:
        return Scram(name, username, password)
    raise ValueError(f"unsupported sasl.mechanism {name!r} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
