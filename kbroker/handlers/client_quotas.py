"""DescribeClientQuotas and AlterClientQuotas (KIP-546), every version.

Entities are users, client ids (alone or together) and IP addresses; a null name is the
type's default entity. Describe filters by components: match type 0 names the entity
exactly, 1 matches the default entity, 2 any entity of that type that is not the
default; ``strict`` keeps only entities with exactly the filtered types. Alter validates
each entry on its own (INVALID_REQUEST for unknown or repeated entity types, keys that do
not apply to the entity, values that are not positive, names the metadata backend cannot
store: ``.`` or ``..`` in ZooKeeper, where Kafka fails with UNKNOWN_SERVER_ERROR), then
applies the valid ones
unless ``validate_only``. Quotas live in the metadata backend (controller/quota_store.py).
Describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS (else
CLUSTER_AUTHORIZATION_FAILED), as in Kafka.
"""

from __future__ import annotations

import math
from collections.abc import Container
from typing import TYPE_CHECKING

from controller.quota_store import QuotaChange
from kbroker.authorization import authorize
from kbroker.quotas import ENTITY_TYPES, WHOLE_NUMBER_KEYS, QuotaEntity, valid_keys
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.messages import alter_client_quotas_response as alter_out
from wire.messages import describe_client_quotas_response as describe_out
from wire.messages.alter_client_quotas_request import AlterClientQuotasRequest, EntryData
from wire.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def _may(broker: Broker, operation: AclOperation) -> bool:
    return authorize(broker, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def _check_entity_type(entity_type: str, seen: Container[str]) -> None:
    if entity_type not in ENTITY_TYPES:
        raise _invalid(f"Custom entity type {entity_type!r} not supported")
    if entity_type in seen:
        raise _invalid(f"Duplicate entity type {entity_type!r}")


async def handle_describe_client_quotas(
    broker: Broker, header: RequestHeader, request: DescribeClientQuotasRequest, version: int
) -> describe_out.DescribeClientQuotasResponse:
    try:
        if not _may(broker, AclOperation.DESCRIBE_CONFIGS):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")
        wanted: dict[str, tuple[int, str | None]] = {}
        for component in request.components:
            _check_entity_type(component.entity_type, wanted)
            if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
                raise _invalid(f"Unknown match type {component.match_type}")
            wanted[component.entity_type] = (component.match_type, component.match)
    except KafkaError as exc:
        return describe_out.DescribeClientQuotasResponse(
            error_code=exc.code, error_message=exc.message, entries=None
        )
    entries = [
        describe_out.EntryData(
            entity=[describe_out.EntityData(entity_type=t, entity_name=name) for t, name in key],
            values=[describe_out.ValueData(key=k, value=v) for k, v in sorted(quotas.items())],
        )
        for key, quotas in sorted(
            broker.metadata.client_quotas().items(), key=lambda item: repr(item[0])
        )
        if _matches(key, wanted, request.strict)
    ]
    return describe_out.DescribeClientQuotasResponse(error_message=None, entries=entries)


def _matches(key: QuotaEntity, wanted: dict[str, tuple[int, str | None]], strict: bool) -> bool:
    names = dict(key)
    if strict and set(names) != set(wanted):
        return False
    for entity_type, (match_type, match) in wanted.items():
        if entity_type not in names:
            return False
        name = names[entity_type]
        if match_type == MATCH_EXACT and name != match:
            return False
        if match_type == MATCH_DEFAULT and name is not None:
            return False
        if match_type == MATCH_SPECIFIED and name is None:
            return False
    return True


def _change(broker: Broker, entry: EntryData) -> QuotaChange:
    """The entry as a change, or KafkaError(INVALID_REQUEST)."""
    names: dict[str, str | None] = {}
    for part in entry.entity:
        _check_entity_type(part.entity_type, names)
        if part.entity_name == "":
            raise _invalid("Empty entity name")
        names[part.entity_type] = part.entity_name
    key: QuotaEntity = tuple(sorted(names.items()))
    allowed = valid_keys(key)
    if not allowed:
        raise _invalid(f"Invalid quota entity {sorted(names)}")
    refusal = broker.metadata.quota_entity_refusal(key)
    if refusal is not None:
        raise _invalid(refusal)
    ops: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key not in allowed:
            raise _invalid(f"Invalid configuration key {op.key} for entity {sorted(names)}")
        if op.key in ops:
            raise _invalid(f"Duplicate quota key {op.key}")
        if op.remove:
            ops[op.key] = None
            continue
        if not math.isfinite(op.value) or op.value <= 0:
            raise _invalid(f"Quota {op.key} must be positive, got {op.value}")
        if op.key in WHOLE_NUMBER_KEYS and op.value != int(op.value):
            raise _invalid(f"Quota {op.key} must be a whole number, got {op.value}")
        ops[op.key] = op.value
    return key, ops


async def handle_alter_client_quotas(
    broker: Broker, header: RequestHeader, request: AlterClientQuotasRequest, version: int
) -> alter_out.AlterClientQuotasResponse:
    results: list[alter_out.EntryData] = []
    changes: list[QuotaChange] = []
    allowed = _may(broker, AclOperation.ALTER_CONFIGS)
    for entry in request.entries:
        entity = [
            alter_out.EntityData(entity_type=p.entity_type, entity_name=p.entity_name)
            for p in entry.entity
        ]
        try:
            if not allowed:
                raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")
            changes.append(_change(broker, entry))
        except KafkaError as exc:
            results.append(
                alter_out.EntryData(error_code=exc.code, error_message=exc.message, entity=entity)
            )
            continue
        results.append(alter_out.EntryData(error_message=None, entity=entity))
    if changes and not request.validate_only:
        await broker.metadata.alter_client_quotas(changes)
    return alter_out.AlterClientQuotasResponse(entries=results)
