"""SASL PLAIN (RFC 4616) and the JAAS-style user list Kafka configures it with."""

from __future__ import annotations

import hmac
import re

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
# name="value" or name=value options of one JAAS login module entry.
_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class PlainError(Exception):
    """The exchange failed; the message is safe to send to the client (KIP-152)."""


def plain_users(jaas_config: str) -> dict[str, str]:
    """Users of a PlainLoginModule entry: each `user_<name>="<password>"` option."""
    module, _, rest = jaas_config.strip().partition(" ")
    if module != _PLAIN_MODULE:
        raise ValueError(f"sasl.jaas.config: expected {_PLAIN_MODULE}, got {module!r}")
    flag, _, options = rest.strip().partition(" ")
    if flag not in ("required", "requisite", "sufficient", "optional"):
        raise ValueError(f"sasl.jaas.config: missing control flag, got {flag!r}")
    if not options.rstrip().endswith(";"):
        raise ValueError("sasl.jaas.config: an entry ends with ';'")
    users: dict[str, str] = {}
    for match in _OPTION.finditer(options):
        name, quoted, bare = match.groups()
        if name.startswith("user_"):
            value = quoted if quoted is not None else bare
            users[name[len("user_") :]] = re.sub(r"\\(.)", r"\1", value)
    return users


def authenticate_plain(token: bytes, users: dict[str, str]) -> str:
    """Check one PLAIN token (authzid NUL authcid NUL password); return the user name."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        raise PlainError("Invalid SASL/PLAIN message")
    authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
    if not user or not password:
        raise PlainError("Authentication failed: username or password is empty")
    if authzid and authzid != user:
        raise PlainError("Authentication failed: authorization id differs from the user")
    expected = users.get(user)
    # Compared even for an unknown user so the answer's timing does not reveal who exists.
    ok = hmac.compare_digest((expected or "").encode(), password.encode())
    if expected is None or not ok:
        raise PlainError("Authentication failed: Invalid username or password")
    return user


class PlainExchange:
    """PLAIN as a one-step exchange, the shape SaslSession drives."""

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.username: str | None = None

    @property
    def complete(self) -> bool:
        return self.username is not None

    def step(self, message: bytes) -> bytes:
        self.username = authenticate_plain(message, self._users)
        return b""
