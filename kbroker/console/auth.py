"""Who may use the console and proof that an action came from its own pages.

HTTP basic authentication (RFC 7617) against users from a file of ``user:password`` lines,
compared in constant time; and CSRF tokens: every browser gets a random session id in a
``SameSite=Strict`` cookie, and every form carries the HMAC of that id under a secret of this
console process. An action whose token does not match the cookie's session is refused, so
another site can neither read the token nor forge it (the synchronizer-token pattern).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from pathlib import Path


class AuthConfigError(ValueError):
    """The users file cannot be used."""


def load_users(path: Path) -> dict[str, str]:
    """``user:password`` per line; blank lines and lines starting with ``#`` are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AuthConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user or not password:
            raise AuthConfigError(f"{path}:{number}: expected user:password")
        users[user] = password
    if not users:
        raise AuthConfigError(f"{path}: no users")
    return users


def basic_user(header: str | None, users: Mapping[str, str]) -> str | None:
    """The user an ``Authorization: Basic ...`` header proves, or None."""
    if not header:
        return None
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    if not sep:
        return None
    expected = users.get(user)
    # Compared even for an unknown user, so the time taken does not tell which users exist.
    known = hmac.compare_digest(password.encode(), (expected or secrets.token_hex(16)).encode())
    return user if expected is not None and known else None


class CsrfTokens:
    """Session ids and the tokens that go with them."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    @staticmethod
    def new_session() -> str:
        return secrets.token_urlsafe(24)

    def token(self, session: str) -> str:
        return hmac.new(self._secret, session.encode(), hashlib.sha256).hexdigest()

    def valid(self, session: str | None, token: str | None) -> bool:
        if not session or not token:
            return False
        return hmac.compare_digest(self.token(session), token)
