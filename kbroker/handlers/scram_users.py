"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), every version.

An upsertion carries the salted password (RFC 5802's Hi(password, salt, i)), never the
password; the broker derives the stored and server keys and keeps those (the metadata
backend: ZooKeeper's /config/users/<user>, or the embedded store). Each user is judged on
its own, with Kafka's errors: an empty name (or one ZooKeeper cannot store, ``.`` or
``..``, where Kafka fails with UNKNOWN_SERVER_ERROR) or an unacceptable salt, salted
password or iteration count (4096..16384) is UNACCEPTABLE_CREDENTIAL, an unknown mechanism
UNSUPPORTED_SASL_MECHANISM, a user named twice in one request DUPLICATE_RESOURCE, and
deleting or describing a credential that does not exist RESOURCE_NOT_FOUND.

SaslHandshake and SaslAuthenticate reach these handlers only on listeners without SASL
(a SASL listener's connection answers them itself, kbroker/server/authentication.py):
there they are answered ILLEGAL_SASL_STATE, as Kafka answers them.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from controller.credential_store import ScramChange
from kbroker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_CODES,
    MIN_ITERATIONS,
    credential_from_salted,
)
from wire.errors import ErrorCode
from wire.messages import alter_user_scram_credentials_response as alter_out
from wire.messages import describe_user_scram_credentials_response as describe_out
from wire.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from wire.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from wire.messages.request_header import RequestHeader
from wire.messages.sasl_authenticate_response import SaslAuthenticateResponse
from wire.messages.sasl_handshake_response import SaslHandshakeResponse

if TYPE_CHECKING:
    from kbroker.broker import Broker

MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


async def handle_sasl_handshake(
    broker: Broker, header: RequestHeader, request: object, version: int
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


async def handle_sasl_authenticate(
    broker: Broker, header: RequestHeader, request: object, version: int
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SASL is not enabled on this listener",
    )


def _failure(
    user: str, error: ErrorCode, message: str
) -> alter_out.AlterUserScramCredentialsResult:
    return alter_out.AlterUserScramCredentialsResult(
        user=user, error_code=error, error_message=message
    )


def _name_problem(broker: Broker, user: str, mechanism: str | None) -> tuple[ErrorCode, str] | None:
    """What is wrong with an entry's user name or mechanism, if anything."""
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    refusal = broker.metadata.scram_user_refusal(user)
    if refusal is not None:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, refusal
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


async def handle_alter_user_scram_credentials(
    broker: Broker, header: RequestHeader, request: AlterUserScramCredentialsRequest, version: int
) -> alter_out.AlterUserScramCredentialsResponse:
    current = broker.metadata.scram_credentials()
    named = collections.Counter(
        [(d.name, d.mechanism) for d in request.deletions]
        + [(u.name, u.mechanism) for u in request.upsertions]
    )
    users = list(
        dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    )
    failures: dict[str, alter_out.AlterUserScramCredentialsResult] = {}

    def fail(user: str, error: ErrorCode, message: str) -> None:
        failures.setdefault(user, _failure(user, error, message))

    for (user, _), count in named.items():
        if count > 1:
            fail(
                user,
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
    changes: list[ScramChange] = []
    for deletion in request.deletions:
        mechanism = MECHANISM_NAMES.get(deletion.mechanism)
        problem = _name_problem(broker, deletion.name, mechanism)
        if problem is not None:
            fail(deletion.name, *problem)
        elif mechanism not in current.get(deletion.name, {}):
            fail(
                deletion.name,
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        else:
            changes.append((deletion.name, mechanism, None))
    for upsertion in request.upsertions:
        mechanism = MECHANISM_NAMES.get(upsertion.mechanism)
        problem = _name_problem(broker, upsertion.name, mechanism)
        if problem is not None:
            fail(upsertion.name, *problem)
        elif upsertion.iterations < MIN_ITERATIONS:
            fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif upsertion.iterations > MAX_ITERATIONS:
            fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not upsertion.salt or not upsertion.salted_password:
            fail(
                upsertion.name,
                ErrorCode.UNACCEPTABLE_CREDENTIAL,
                "Credential must have a salt and a salted password",
            )
        else:
            credential = credential_from_salted(
                mechanism, upsertion.salt, upsertion.iterations, upsertion.salted_password
            )
            changes.append((upsertion.name, mechanism, credential))
    accepted = [change for change in changes if change[0] not in failures]
    if accepted:
        await broker.metadata.alter_scram_credentials(accepted)
    results = [
        failures.get(user)
        or alter_out.AlterUserScramCredentialsResult(
            user=user, error_code=ErrorCode.NONE, error_message=None
        )
        for user in users
    ]
    return alter_out.AlterUserScramCredentialsResponse(results=results)


async def handle_describe_user_scram_credentials(
    broker: Broker,
    header: RequestHeader,
    request: DescribeUserScramCredentialsRequest,
    version: int,
) -> describe_out.DescribeUserScramCredentialsResponse:
    current = broker.metadata.scram_credentials()
    wanted = [u.name for u in request.users or []]
    counts = collections.Counter(wanted)
    results: list[describe_out.DescribeUserScramCredentialsResult] = []
    for user in dict.fromkeys(wanted) if wanted else sorted(current):
        result = describe_out.DescribeUserScramCredentialsResult(user=user, error_message=None)
        if counts[user] > 1:
            result.error_code = ErrorCode.DUPLICATE_RESOURCE
            result.error_message = (
                "Cannot describe SCRAM credentials for the same user twice in a single request"
            )
        elif user not in current:
            result.error_code = ErrorCode.RESOURCE_NOT_FOUND
            result.error_message = "Attempt to describe a user credential that does not exist"
        else:
            result.credential_infos = [
                describe_out.CredentialInfo(
                    mechanism=MECHANISM_CODES[mechanism], iterations=credential.iterations
                )
                for mechanism, credential in sorted(current[user].items())
            ]
        results.append(result)
    return describe_out.DescribeUserScramCredentialsResponse(error_message=None, results=results)
