"""SCRAM users over the protocol (KIP-554): DescribeUserScramCredentials and
AlterUserScramCredentials, for ``kbroker users``. The password never leaves this process:
the request carries a random salt and the salted password (RFC 5802's Hi), from which the
broker derives the stored credential."""

from __future__ import annotations

import os
from collections.abc import Sequence

from kbroker.cli.ops.admin import OpsError, _check
from kbroker.client import KafkaClient
from kbroker.security.scram import MECHANISM_CODES, MIN_ITERATIONS, salted_password
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from wire.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)

MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}
DEFAULT_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def check_mechanisms(mechanisms: Sequence[str]) -> list[str]:
    unknown = [m for m in mechanisms if m not in MECHANISM_CODES]
    if unknown:
        raise OpsError(f"unknown mechanism {unknown[0]} (SCRAM-SHA-256 or SCRAM-SHA-512)")
    return list(dict.fromkeys(mechanisms))


async def describe_users(
    client: KafkaClient, users: Sequence[str] | None
) -> dict[str, list[tuple[str, int]]]:
    """User -> [(mechanism, iterations)], for ``users`` (every user with credentials when
    None)."""
    request = DescribeUserScramCredentialsRequest(
        users=None if not users else [UserName(name=u) for u in users]
    )
    connection = await client.any_connection()
    response, _ = await connection.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request)
    _check(response.error_code, response.error_message, "SCRAM credentials")
    found: dict[str, list[tuple[str, int]]] = {}
    for result in response.results:
        _check(result.error_code, result.error_message, f"user {result.user}")
        found[result.user] = [
            (MECHANISM_NAMES.get(c.mechanism, str(c.mechanism)), c.iterations)
            for c in result.credential_infos
        ]
    return found


async def alter_users(
    client: KafkaClient,
    user: str,
    *,
    password: str | None = None,
    add: Sequence[str] = (),
    delete: Sequence[str] = (),
    iterations: int = MIN_ITERATIONS,
) -> None:
    """Set ``user``'s credentials for the ``add`` mechanisms (from ``password``) and remove
    those of ``delete``."""
    upsertions = []
    for mechanism in check_mechanisms(add):
        assert password is not None
        salt = os.urandom(32)
        upsertions.append(
            ScramCredentialUpsertion(
                name=user,
                mechanism=MECHANISM_CODES[mechanism],
                iterations=iterations,
                salt=salt,
                salted_password=salted_password(mechanism, password, salt, iterations),
            )
        )
    deletions = [
        ScramCredentialDeletion(name=user, mechanism=MECHANISM_CODES[m])
        for m in check_mechanisms(delete)
    ]
    request = AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)
    connection = await client.any_connection()
    response, _ = await connection.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request)
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            _check(result.error_code, result.error_message, f"user {result.user}")
