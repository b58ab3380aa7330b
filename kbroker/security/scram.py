"""SCRAM-SHA-256/512 server side (RFC 5802, RFC 7677), sans-IO.

Credentials are kept the way Kafka keeps them (salt, iterations, stored key,
server key), so the password itself is never stored and a credential written
by Kafka's tools can be read back.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka refuses fewer iterations than this for SCRAM credentials (KIP-84).
MIN_ITERATIONS = 4096
_INVALID = "Authentication failed: invalid credentials"


class ScramError(Exception):
    """The exchange failed; the message is safe to send to the client (KIP-152)."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(digest: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, digest).digest()


def make_credential(
    mechanism: str, password: str, salt: bytes | None = None, iterations: int = MIN_ITERATIONS
) -> ScramCredential:
    digest = MECHANISMS[mechanism]
    salt = salt if salt is not None else os.urandom(32)
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    client_key = _hmac(digest, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(digest, client_key).digest(),
        server_key=_hmac(digest, salted, b"Server Key"),
    )


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"Invalid SCRAM attribute {part!r}")
        out[part[0]] = part[2:]
    return out


def _decode_username(name: str) -> str:
    # RFC 5802 5.1: ',' and '=' in names travel as =2C and =3D.
    return name.replace("=2C", ",").replace("=3D", "=")


class _State(Enum):
    FIRST = 1
    FINAL = 2
    DONE = 3


class ScramServer:
    """One SCRAM exchange: feed client messages, get server messages back.

    `lookup` maps a user name to its credential (None if unknown); it is
    called once, after the client-first message names the user.
    """

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        nonce: str | None = None,
    ) -> None:
        self._digest = MECHANISMS[mechanism]
        self._lookup = lookup
        self._server_nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self._state = _State.FIRST
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    @property
    def complete(self) -> bool:
        return self._state is _State.DONE

    def step(self, message: bytes) -> bytes:
        if self._state is _State.FIRST:
            return self._first(message.decode())
        if self._state is _State.FINAL:
            return self._final(message.decode())
        raise ScramError("SCRAM exchange already complete")

    def _first(self, message: str) -> bytes:
        gs2, sep, bare = message.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise ScramError("Invalid SCRAM client first message (channel binding not supported)")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs:
            raise ScramError("Invalid SCRAM client first message")
        self.username = _decode_username(attrs["n"])
        authz = authzid[2:] if authzid.startswith("a=") else ""
        if authz and _decode_username(authz) != self.username:
            raise ScramError("Authorization id differs from the authenticated user")
        self._credential = self._lookup(self.username)
        if self._credential is None:
            # The same message as a wrong password: no hint whether the user exists.
            raise ScramError(_INVALID)
        self._client_first_bare = bare
        self._nonce = attrs["r"] + self._server_nonce
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        self._state = _State.FINAL
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        assert self._credential is not None
        without_proof, _, proof_part = message.rpartition(",p=")
        attrs = _attributes(without_proof)
        if attrs.get("r") != self._nonce:
            raise ScramError("Invalid SCRAM nonce")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError as exc:
            raise ScramError("Invalid SCRAM client proof") from exc
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._digest, self._credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("Invalid SCRAM client proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        expected = self._credential.stored_key
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), expected):
            raise ScramError(_INVALID)
        server_sig = _hmac(self._digest, self._credential.server_key, auth_message)
        self._state = _State.DONE
        return b"v=" + base64.b64encode(server_sig)
