"""Client quotas over the protocol: DescribeClientQuotas and AlterClientQuotas (KIP-546),
for ``kbroker quotas``. Entities are (type, name) pairs; a None name is the default."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kbroker.cli.ops.admin import OpsError, _check, _controller
from kbroker.client import KafkaClient
from wire.api_keys import ApiKey
from wire.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from wire.messages.describe_client_quotas_request import (
    ComponentData,
    DescribeClientQuotasRequest,
)

Entity = tuple[tuple[str, str | None], ...]
MATCH_EXACT = 0
MATCH_DEFAULT = 1


async def describe_quotas(
    client: KafkaClient, entity: Sequence[tuple[str, str | None]], *, strict: bool = False
) -> dict[Entity, dict[str, float]]:
    """Quotas of the entities matching `entity` (every entity when empty)."""
    request = DescribeClientQuotasRequest(
        components=[
            ComponentData(
                entity_type=t, match_type=MATCH_DEFAULT if n is None else MATCH_EXACT, match=n
            )
            for t, n in entity
        ],
        strict=strict,
    )
    connection = await client.any_connection()
    response, _ = await connection.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
    _check(response.error_code, response.error_message, "client quotas")
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries or []
    }


async def alter_quotas(
    client: KafkaClient,
    entity: Sequence[tuple[str, str | None]],
    set_: Mapping[str, float],
    delete: Iterable[str],
) -> None:
    if not entity:
        raise OpsError("name an entity: --user and/or --client-id (or their defaults)")
    ops = [OpData(key=k, value=v) for k, v in set_.items()]
    ops += [OpData(key=k, remove=True) for k in delete]
    request = AlterClientQuotasRequest(
        entries=[
            EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity], ops=ops)
        ]
    )
    connection = await _controller(client)
    response, _ = await connection.request(ApiKey.ALTER_CLIENT_QUOTAS, request)
    result = response.entries[0]
    _check(result.error_code, result.error_message, "client quotas")
