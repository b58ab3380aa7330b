"""AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554) against an
in-process broker: what is stored, and Kafka's error for each bad entry."""

from __future__ import annotations

from kbroker.broker import Broker
from kbroker.security.scram import make_credential, salted_password
from tests.server.conftest import RawClient
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

SHA256, SHA512 = 1, 2
SALT = b"0123456789abcdef"


def upsert(name: str, mechanism: int = SHA256, iterations: int = 4096) -> ScramCredentialUpsertion:
    salted = salted_password("SCRAM-SHA-256", "pw", SALT, 4096) if mechanism == SHA256 else b"x"
    return ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=SALT, salted_password=salted
    )


async def alter(client: RawClient, **request: object) -> dict[str, tuple[int, str | None]]:
    response = await client.call(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        AlterUserScramCredentialsRequest(**request),  # type: ignore[arg-type]
    )
    return {r.user: (r.error_code, r.error_message) for r in response.results}  # type: ignore[attr-defined]


async def test_stored_credential_is_the_one_the_password_gives(
    broker: Broker, client: RawClient
) -> None:
    assert await alter(client, upsertions=[upsert("alice")]) == {"alice": (0, None)}
    stored = broker.metadata.scram_credentials()["alice"]["SCRAM-SHA-256"]
    assert stored == make_credential("SCRAM-SHA-256", "pw", salt=SALT, iterations=4096)
    described = await client.call(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, DescribeUserScramCredentialsRequest(users=None)
    )
    (result,) = described.results  # type: ignore[attr-defined]
    assert (result.user, [(c.mechanism, c.iterations) for c in result.credential_infos]) == (
        "alice",
        [(SHA256, 4096)],
    )


async def test_each_bad_entry_gets_kafkas_error(broker: Broker, client: RawClient) -> None:
    results = await alter(
        client,
        upsertions=[
            upsert(""),
            upsert("few", iterations=100),
            upsert("many", iterations=20000),
            upsert("mech", mechanism=9),
            upsert("twice"),
            upsert("twice"),
            upsert("good"),
        ],
        deletions=[ScramCredentialDeletion(name="ghost", mechanism=SHA256)],
    )
    assert {user: code for user, (code, _) in results.items()} == {
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "mech": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "twice": ErrorCode.DUPLICATE_RESOURCE,
        "good": ErrorCode.NONE,
        "ghost": ErrorCode.RESOURCE_NOT_FOUND,
    }
    assert results["few"][1] == "Too few iterations"
    assert set(broker.metadata.scram_credentials()) == {"good"}
    described = await client.call(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        DescribeUserScramCredentialsRequest(users=[UserName(name="good"), UserName(name="ghost")]),
    )
    codes = {r.user: r.error_code for r in described.results}  # type: ignore[attr-defined]
    assert codes == {"good": ErrorCode.NONE, "ghost": ErrorCode.RESOURCE_NOT_FOUND}


async def test_credentials_survive_a_restart_of_the_embedded_store(
    broker: Broker, client: RawClient
) -> None:
    await alter(client, upsertions=[upsert("alice")])
    from controller.embedded import EmbeddedMetadata

    reloaded = EmbeddedMetadata(broker.config)
    await reloaded.start()
    assert reloaded.scram_credentials() == broker.metadata.scram_credentials()
    await alter(client, deletions=[ScramCredentialDeletion(name="alice", mechanism=SHA256)])
    assert broker.metadata.scram_credentials() == {}
