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
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# The mechanisms' numbers in AlterUserScramCredentials / DescribeUserScramCredentials.
MECHANISM_CODES: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
# Kafka refuses fewer iterations than this for SCRAM credentials (KIP-84), and more than
# MAX_ITERATIONS through AlterUserScramCredentials (KIP-554).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
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
    return credential_from_salted(mechanism, salt, iterations, salted)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword, Hi(password, salt, i): what an admin client sends in
    AlterUserScramCredentials (KIP-554) instead of the password."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def credential_from_salted(
    mechanism: str, salt: bytes, iterations: int, salted: bytes
) -> ScramCredential:
    """The stored credential of a salted password (the password itself is not needed)."""
    digest = MECHANISMS[mechanism]
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


def _server_nonce() -> str:
    # Letters and digits only, as Kafka's own: librdkafka 2.0 (kcat on Debian) garbles a
    # nonce holding base64's '+' or '/' when it echoes it back.
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(32))


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
        self._server_nonce = nonce or _server_nonce()
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
        # RFC 5802 asks for the combined nonce echoed exactly. Kafka 3.x accepts any nonce
        # that ends with it, and librdkafka 2.0 (Debian's kcat) relies on that: it sends
        # the client nonce twice. The nonce is inside the signed AuthMessage either way.
        if not attrs.get("r", "").endswith(self._nonce):
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


def credential_to_string(credential: ScramCredential) -> str:
    """The text Kafka stores for a credential (a user's config entry named after the
    mechanism): ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``."""
    b64 = base64.b64encode
    return (
        f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
        f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}"
    )


def credential_from_string(text: str) -> ScramCredential:
    """The inverse of credential_to_string (ValueError when malformed)."""
    fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    try:
        return ScramCredential(
            salt=base64.b64decode(fields["salt"], validate=True),
            iterations=int(fields["iterations"]),
            stored_key=base64.b64decode(fields["stored_key"], validate=True),
            server_key=base64.b64decode(fields["server_key"], validate=True),
        )
    except (KeyError, ValueError) as exc:
        raise ValueError(f"malformed SCRAM credential: {exc}") from exc
