"""CreateAcls, DescribeAcls and DeleteAcls (KIP-140; prefixed patterns from v1, KIP-290),
every version.

Without an authorizer (``authorizer.class.name`` empty) Kafka answers SECURITY_DISABLED.
With one, creating and deleting need ALTER on the cluster and describing needs DESCRIBE
(else CLUSTER_AUTHORIZATION_FAILED). Each creation and each delete filter is validated on
its own (INVALID_REQUEST, as Kafka's controller checks them; in ZooKeeper a resource name
must also be a valid znode name, as Kafka's AclAuthorizer requires); describe and delete filters
select ACLs as kbroker.security.acls.AclBindingFilter says. Version 0 has no pattern type
field: it decodes as LITERAL, which is what Kafka makes of a v0 request. ACLs live in the
metadata backend (controller/acl_store.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from kbroker.authorization import authorize
from kbroker.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from wire.errors import ErrorCode
from wire.messages import create_acls_response as create_out
from wire.messages import delete_acls_response as delete_out
from wire.messages import describe_acls_response as describe_out
from wire.messages.create_acls_request import AclCreation, CreateAclsRequest
from wire.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from wire.messages.describe_acls_request import DescribeAclsRequest
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

NO_AUTHORIZER = "No Authorizer is configured."
NOT_AUTHORIZED = "Not authorized to alter or describe ACLs: the cluster's permission is needed."


E = TypeVar("E", ResourceType, PatternType, AclOperation, PermissionType)


def _code(enum: type[E], value: int) -> E:
    """Codes this broker does not know are UNKNOWN, as Kafka reads them."""
    try:
        return enum(value)
    except ValueError:
        return enum(0)


def _binding(creation: AclCreation) -> AclBinding:
    return AclBinding(
        _code(ResourceType, creation.resource_type),
        creation.resource_name,
        _code(PatternType, creation.resource_pattern_type),
        creation.principal,
        creation.host,
        _code(AclOperation, creation.operation),
        _code(PermissionType, creation.permission_type),
    )


def _filter(request: DescribeAclsRequest | DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(
        _code(ResourceType, request.resource_type_filter),
        request.resource_name_filter,
        _code(PatternType, request.pattern_type_filter),
        request.principal_filter,
        request.host_filter,
        _code(AclOperation, request.operation),
        _code(PermissionType, request.permission_type),
    )


def _refusal(broker: Broker, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    if broker.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    if not authorize(broker, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED
    return None


async def handle_create_acls(
    broker: Broker, header: RequestHeader, request: CreateAclsRequest, version: int
) -> create_out.CreateAclsResponse:
    refusal = _refusal(broker, AclOperation.ALTER)
    if refusal is not None:
        code, message = refusal
        return create_out.CreateAclsResponse(
            results=[
                create_out.AclCreationResult(error_code=code, error_message=message)
                for _ in request.creations
            ]
        )
    results: list[create_out.AclCreationResult] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        binding = _binding(creation)
        problem = binding.problem() or broker.metadata.acl_refusal(binding)
        if problem is not None:
            results.append(
                create_out.AclCreationResult(
                    error_code=ErrorCode.INVALID_REQUEST, error_message=problem
                )
            )
            continue
        valid.append(binding)
        results.append(create_out.AclCreationResult(error_message=None))
    if valid:
        await broker.metadata.alter_acls(valid, [])
    return create_out.CreateAclsResponse(results=results)


def _describe_resources(acls: list[AclBinding]) -> list[describe_out.DescribeAclsResource]:
    """ACLs grouped by resource pattern, as Kafka answers them."""
    grouped: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for acl in sorted(acls, key=lambda a: (a.resource_type, a.name, a.pattern_type, repr(a))):
        grouped.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(acl)
    return [
        describe_out.DescribeAclsResource(
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern_type,
            acls=[
                describe_out.AclDescription(
                    principal=a.principal,
                    host=a.host,
                    operation=a.operation,
                    permission_type=a.permission,
                )
                for a in entries
            ],
        )
        for (resource_type, name, pattern_type), entries in grouped.items()
    ]


async def handle_describe_acls(
    broker: Broker, header: RequestHeader, request: DescribeAclsRequest, version: int
) -> describe_out.DescribeAclsResponse:
    refusal = _refusal(broker, AclOperation.DESCRIBE)
    if refusal is None:
        acl_filter = _filter(request)
        problem = acl_filter.problem()
        if problem is not None:
            refusal = ErrorCode.INVALID_REQUEST, problem
    if refusal is not None:
        code, message = refusal
        return describe_out.DescribeAclsResponse(error_code=code, error_message=message)
    assert broker.authorizer is not None
    return describe_out.DescribeAclsResponse(
        error_message=None, resources=_describe_resources(broker.authorizer.acls(acl_filter))
    )


async def handle_delete_acls(
    broker: Broker, header: RequestHeader, request: DeleteAclsRequest, version: int
) -> delete_out.DeleteAclsResponse:
    refusal = _refusal(broker, AclOperation.ALTER)
    if refusal is not None:
        code, message = refusal
        return delete_out.DeleteAclsResponse(
            filter_results=[
                delete_out.DeleteAclsFilterResult(error_code=code, error_message=message)
                for _ in request.filters
            ]
        )
    assert broker.authorizer is not None
    results: list[delete_out.DeleteAclsFilterResult] = []
    doomed: set[AclBinding] = set()
    # Every filter is matched against the ACLs as they were when the request came.
    for wire_filter in request.filters:
        acl_filter = _filter(wire_filter)
        problem = acl_filter.problem()
        if problem is not None:
            results.append(
                delete_out.DeleteAclsFilterResult(
                    error_code=ErrorCode.INVALID_REQUEST, error_message=problem
                )
            )
            continue
        matched = broker.authorizer.acls(acl_filter)
        doomed.update(matched)
        results.append(
            delete_out.DeleteAclsFilterResult(
                error_message=None,
                matching_acls=[
                    delete_out.DeleteAclsMatchingAcl(
                        error_message=None,
                        resource_type=a.resource_type,
                        resource_name=a.name,
                        pattern_type=a.pattern_type,
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission,
                    )
                    for a in sorted(matched, key=repr)
                ],
            )
        )
    if doomed:
        await broker.metadata.alter_acls([], sorted(doomed, key=repr))
    return delete_out.DeleteAclsResponse(filter_results=results)
