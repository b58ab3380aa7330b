"""ACLs over the protocol: CreateAcls, DescribeAcls and DeleteAcls (KIP-140), for
``kbroker acls``. Bindings and filters are kbroker.security.acls values."""

from __future__ import annotations

from collections.abc import Sequence

from kbroker.cli.ops.admin import OpsError, _check
from kbroker.client import KafkaClient
from kbroker.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from wire.api_keys import ApiKey
from wire.messages.create_acls_request import AclCreation, CreateAclsRequest
from wire.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from wire.messages.describe_acls_request import DescribeAclsRequest


def _binding(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> AclBinding:
    return AclBinding(
        ResourceType(resource_type),
        name,
        PatternType(pattern_type),
        principal,
        host,
        AclOperation(operation),
        PermissionType(permission),
    )


async def create_acls(client: KafkaClient, bindings: Sequence[AclBinding]) -> None:
    request = CreateAclsRequest(
        creations=[
            AclCreation(
                resource_type=b.resource_type,
                resource_name=b.name,
                resource_pattern_type=b.pattern_type,
                principal=b.principal,
                host=b.host,
                operation=b.operation,
                permission_type=b.permission,
            )
            for b in bindings
        ]
    )
    connection = await client.any_connection()
    response, _ = await connection.request(ApiKey.CREATE_ACLS, request)
    for result in response.results:
        _check(result.error_code, result.error_message, "ACLs")


async def describe_acls(client: KafkaClient, acl_filter: AclBindingFilter) -> list[AclBinding]:
    request = DescribeAclsRequest(
        resource_type_filter=acl_filter.resource_type,
        resource_name_filter=acl_filter.name,
        pattern_type_filter=acl_filter.pattern_type,
        principal_filter=acl_filter.principal,
        host_filter=acl_filter.host,
        operation=acl_filter.operation,
        permission_type=acl_filter.permission,
    )
    connection = await client.any_connection()
    response, _ = await connection.request(ApiKey.DESCRIBE_ACLS, request)
    _check(response.error_code, response.error_message, "ACLs")
    return [
        _binding(
            r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
            a.permission_type,
        )
        for r in response.resources
        for a in r.acls
    ]  # fmt: skip


async def delete_acls(client: KafkaClient, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
    """Delete what the filters match; returns the ACLs deleted."""
    if not filters:
        raise OpsError("nothing to remove")
    request = DeleteAclsRequest(
        filters=[
            DeleteAclsFilter(
                resource_type_filter=f.resource_type,
                resource_name_filter=f.name,
                pattern_type_filter=f.pattern_type,
                principal_filter=f.principal,
                host_filter=f.host,
                operation=f.operation,
                permission_type=f.permission,
            )
            for f in filters
        ]
    )
    connection = await client.any_connection()
    response, _ = await connection.request(ApiKey.DELETE_ACLS, request)
    deleted: set[AclBinding] = set()
    for result in response.filter_results:
        _check(result.error_code, result.error_message, "ACLs")
        for m in result.matching_acls:
            _check(m.error_code, m.error_message, "ACLs")
            deleted.add(
                _binding(
                    m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                    m.operation, m.permission_type,
                )
            )  # fmt: skip
    return sorted(deleted, key=repr)
