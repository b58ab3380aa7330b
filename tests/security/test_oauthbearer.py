"""OAUTHBEARER with unsecured JWTs, as Kafka's default validator takes them."""

from __future__ import annotations

import base64
import json

import pytest

from kbroker.security.oauthbearer import OAuthBearerError, OAuthBearerExchange, validator_options

NOW = 1_800_000_000.0


def token(claims: dict[str, object], alg: str = "none", signature: str = "") -> str:
    def part(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': alg})}.{part(claims)}.{signature}"


def message(jwt: str) -> bytes:
    return f"n,,\x01auth=Bearer {jwt}\x01\x01".encode()


def exchange(**options: str) -> OAuthBearerExchange:
    return OAuthBearerExchange(options, clock=lambda: NOW)


def test_a_valid_token_names_the_principal_and_its_remaining_life() -> None:
    ex = exchange()
    assert ex.step(message(token({"sub": "alice", "exp": NOW + 60}))) == b""
    assert ex.complete and ex.username == "alice" and ex.remaining_ms == 60_000


@pytest.mark.parametrize(
    ("jwt", "error"),
    [
        (token({"sub": "alice", "exp": NOW - 1}), "expired"),
        (token({"exp": NOW + 60}), "principal claim"),
        (token({"sub": "alice"}), "'exp'"),
        (token({"sub": "alice", "exp": NOW + 60}, alg="HS256"), "alg"),
        (token({"sub": "alice", "exp": NOW + 60}, signature="abc"), "empty signature"),
        ("not-a-jwt", "3 parts"),
    ],
)
def test_refused_tokens(jwt: str, error: str) -> None:
    with pytest.raises(OAuthBearerError, match=error):
        exchange().step(message(jwt))


def test_validator_options_from_the_jaas_line() -> None:
    options = validator_options(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorPrincipalClaimName="user" unsecuredValidatorRequiredScope="read write" '
        "unsecuredValidatorAllowableClockSkewMs=5000;"
    )
    ex = OAuthBearerExchange(options, clock=lambda: NOW)
    claims = {"user": "bob", "exp": NOW - 2, "scope": ["read", "write"]}
    ex.step(message(token(claims)))  # within the 5 s of clock skew
    assert ex.username == "bob"
    with pytest.raises(OAuthBearerError, match="scope"):
        OAuthBearerExchange(options, clock=lambda: NOW).step(
            message(token({"user": "bob", "exp": NOW + 9, "scope": "read"}))
        )


def test_not_a_bearer_message() -> None:
    with pytest.raises(OAuthBearerError, match="bearer"):
        exchange().step(b"n,,\x01auth=Basic xyz\x01\x01")
