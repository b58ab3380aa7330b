"""SASL OAUTHBEARER (RFC 7628, KIP-255) with unsecured JWTs, as Kafka's default validator
(OAuthBearerUnsecuredValidatorCallbackHandler) checks them: for development and client
tests, never for production (anyone can make such a token).

The client's one message is ``n,,\\x01auth=Bearer <token>\\x01\\x01`` (a GS2 header, then
key=value pairs separated by \\x01). An unsecured token is ``base64url(header).base64url(
claims).`` with ``"alg": "none"`` and no signature. The token must carry the principal claim
(``sub`` unless ``unsecuredValidatorPrincipalClaimName`` says otherwise) and ``exp``, must not
have expired (``unsecuredValidatorAllowableClockSkewMs`` of slack), and must hold every scope
of ``unsecuredValidatorRequiredScope``. The principal is ``User:<that claim>``; the session
may not outlive the token (KIP-368).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

MECHANISM = "OAUTHBEARER"
# JAAS options of OAuthBearerLoginModule that configure the unsecured validator.
_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class OAuthBearerError(Exception):
    """The token was refused; the message is safe to send to the client (KIP-152)."""


def validator_options(jaas_config: str | None) -> dict[str, str]:
    """The ``unsecuredValidator*`` options of an OAuthBearerLoginModule JAAS line."""
    if not jaas_config:
        return {}
    return {
        m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
        for m in _OPTION.finditer(jaas_config)
        if m.group(1).startswith("unsecuredValidator")
    }


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _claims(token: str) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3 or parts[2]:
        raise OAuthBearerError("Unsecured JWS must have 3 parts and an empty signature")
    try:
        header = json.loads(_b64url(parts[0]))
        claims = json.loads(_b64url(parts[1]))
    except (ValueError, binascii.Error) as exc:
        raise OAuthBearerError(f"Malformed JWT: {exc}") from exc
    if not isinstance(header, dict) or header.get("alg") != "none":
        raise OAuthBearerError('Unsecured JWS must have "alg": "none"')
    if not isinstance(claims, dict):
        raise OAuthBearerError("JWT claims must be a JSON object")
    return claims


class OAuthBearerExchange:
    """One OAUTHBEARER exchange, the shape SaslSession drives."""

    def __init__(self, options: Mapping[str, str], clock: Callable[[], float] = time.time) -> None:
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        self._skew_s = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0")) / 1000
        self._clock = clock
        self.username: str | None = None
        # How long the token was still valid when checked (bounds the session, KIP-368).
        self.remaining_ms: int | None = None

    @property
    def complete(self) -> bool:
        return self.username is not None

    def step(self, message: bytes) -> bytes:
        text = message.decode("utf-8", "replace")
        gs2, sep, rest = text.partition("\x01")
        if not sep or not gs2.startswith(("n,", "y,")):
            raise OAuthBearerError("Invalid OAUTHBEARER client first message")
        pairs = dict(p.split("=", 1) for p in rest.split("\x01") if "=" in p)
        auth = pairs.get("auth", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise OAuthBearerError("Invalid OAUTHBEARER client first message: no bearer token")
        claims = _claims(token.strip())
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal:
            raise OAuthBearerError(f"No principal claim {self._principal_claim!r} in the token")
        expiry = claims.get("exp")
        if not isinstance(expiry, int | float):
            raise OAuthBearerError("The token has no 'exp' claim")
        now = self._clock()
        if now - self._skew_s >= expiry:
            raise OAuthBearerError("The token has expired")
        scope = claims.get("scope", [])
        held = set(scope.split() if isinstance(scope, str) else scope)
        missing = [s for s in self._required_scope if s not in held]
        if missing:
            raise OAuthBearerError(f"The token lacks the required scope {missing}")
        self.username = principal
        self.remaining_ms = max(0, int((expiry - now) * 1000))
        return b""
