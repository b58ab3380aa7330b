"""CreateAcls, DescribeAcls and DeleteAcls over the wire, every version (issue 12, item 4)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.security.acls import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from tests.server.conftest import RawClient, broker_config, free_port
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.create_acls_request import AclCreation, CreateAclsRequest
from wire.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from wire.messages.describe_acls_request import DescribeAclsRequest

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
VERSIONS = range(0, 4)
Row = tuple[int, str, int, str, str, int, int]


def creation(
    name: str,
    operation: int = AclOperation.READ,
    *,
    resource_type: int = ResourceType.TOPIC,
    pattern: int = PatternType.LITERAL,
    principal: str = "User:alice",
    permission: int = PermissionType.ALLOW,
) -> AclCreation:
    return AclCreation(
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=pattern,
        principal=principal,
        host="*",
        operation=operation,
        permission_type=permission,
    )


def _filter_fields(kw: dict[str, object]) -> dict[str, object]:
    """A filter matching every ACL, with `kw` on top; ``v0=True``: a version 0 filter,
    which has no pattern type field (LITERAL; Kafka's clients turn ANY into it)."""
    v0 = kw.pop("v0", False)
    fields: dict[str, object] = {
        "resource_type_filter": ResourceType.ANY,
        "resource_name_filter": None,
        "pattern_type_filter": PatternType.LITERAL if v0 else PatternType.ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": AclOperation.ANY,
        "permission_type": PermissionType.ANY,
    }
    return fields | kw


def describe_all(**kw: object) -> DescribeAclsRequest:
    return DescribeAclsRequest(**_filter_fields(kw))  # type: ignore[arg-type]


def delete_filter(**kw: object) -> DeleteAclsFilter:
    return DeleteAclsFilter(**_filter_fields(kw))  # type: ignore[arg-type]


async def rows(client: RawClient, version: int, request: DescribeAclsRequest) -> set[Row]:
    response = await client.call(ApiKey.DESCRIBE_ACLS, version, request)
    assert response.error_code == ErrorCode.NONE, response
    return {
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
         a.permission_type)
        for r in response.resources
        for a in r.acls
    }  # fmt: skip


async def _start(tmp_path: Path, **props: str) -> Broker:
    broker = Broker(broker_config(tmp_path / "data", free_port(), **props))
    await broker.start()
    return broker


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[tuple[Broker, RawClient]]:
    """A broker with the ACL authorizer where this client (User:ANONYMOUS) is a super user."""
    broker = await _start(
        tmp_path, authorizer_class_name=ACL_AUTHORIZER, super_users="User:ANONYMOUS;User:admin"
    )
    client = await RawClient.connect(broker.port)
    try:
        yield broker, client
    finally:
        await client.close()
        await broker.stop()


async def test_security_disabled_without_an_authorizer(broker: Broker, client: RawClient) -> None:
    for version in VERSIONS:
        created = await client.call(
            ApiKey.CREATE_ACLS, version, CreateAclsRequest(creations=[creation("t")])
        )
        assert [r.error_code for r in created.results] == [ErrorCode.SECURITY_DISABLED]
        v0 = version == 0
        described = await client.call(ApiKey.DESCRIBE_ACLS, version, describe_all(v0=v0))
        assert described.error_code == ErrorCode.SECURITY_DISABLED
        assert described.error_message == "No Authorizer is configured."
        deleted = await client.call(
            ApiKey.DELETE_ACLS, version, DeleteAclsRequest(filters=[delete_filter(v0=v0)])
        )
        assert [r.error_code for r in deleted.filter_results] == [ErrorCode.SECURITY_DISABLED]
    assert broker.metadata.acls() == frozenset()


async def test_cluster_permission_needed(tmp_path: Path) -> None:
    broker = await _start(tmp_path, authorizer_class_name=ACL_AUTHORIZER)
    client = await RawClient.connect(broker.port)
    try:
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        created = await client.call(
            ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[creation("t")])
        )
        assert [r.error_code for r in created.results] == [refused]
        assert (await client.call(ApiKey.DESCRIBE_ACLS, 3, describe_all())).error_code == refused
        deleted = await client.call(
            ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=[delete_filter()])
        )
        assert [r.error_code for r in deleted.filter_results] == [refused]
        assert broker.metadata.acls() == frozenset()
        # DESCRIBE on the cluster is enough to describe; ALTER (which implies it) to change.
        describe = AclBinding(
            ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:ANONYMOUS",
            "127.0.0.1", AclOperation.DESCRIBE, PermissionType.ALLOW,
        )  # fmt: skip
        await broker.metadata.alter_acls([describe], [])
        assert len(await rows(client, 3, describe_all())) == 1
        created = await client.call(
            ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[creation("t")])
        )
        assert [r.error_code for r in created.results] == [refused]
        alter = AclBinding(
            ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:*", "*",
            AclOperation.ALTER, PermissionType.ALLOW,
        )  # fmt: skip
        await broker.metadata.alter_acls([alter], [])
        created = await client.call(
            ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[creation("t")])
        )
        assert [r.error_code for r in created.results] == [ErrorCode.NONE]
    finally:
        await client.close()
        await broker.stop()


async def test_create_validates_each_acl(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    request = CreateAclsRequest(
        creations=[
            creation("t"),
            creation("", AclOperation.WRITE),
            creation("t", AclOperation.ANY),
            creation("t", pattern=PatternType.MATCH),
            creation("t", resource_type=ResourceType.ANY),
            creation("t", permission=PermissionType.ANY),
            creation("other", resource_type=ResourceType.CLUSTER),
            creation("t", principal="alice"),
            creation("t", 99),
        ]
    )
    response = await client.call(ApiKey.CREATE_ACLS, 3, request)
    codes = [r.error_code for r in response.results]
    assert codes == [ErrorCode.NONE] + [ErrorCode.INVALID_REQUEST] * 8
    assert response.results[6].error_message == (
        "The only valid name for the CLUSTER resource is kafka-cluster"
    )
    assert broker.metadata.acls() == {
        AclBinding(
            ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
            PermissionType.ALLOW,
        )
    }  # fmt: skip


async def test_create_describe_delete_every_version(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    topic, group, lit, pre = ResourceType.TOPIC, ResourceType.GROUP, 3, 4
    for version in VERSIONS:
        name = f"v{version}"
        creations = [
            creation(name),
            creation("*", AclOperation.DESCRIBE, principal="User:*"),
            creation(name, resource_type=group, permission=PermissionType.DENY),
        ]
        if version >= 1:
            creations.append(creation(name[:1], AclOperation.WRITE, pattern=pre))
        response = await client.call(
            ApiKey.CREATE_ACLS, version, CreateAclsRequest(creations=creations)
        )
        assert all(r.error_code == ErrorCode.NONE for r in response.results), response

        read = (topic, name, lit, "User:alice", "*", AclOperation.READ, PermissionType.ALLOW)
        star = (topic, "*", lit, "User:*", "*", AclOperation.DESCRIBE, PermissionType.ALLOW)
        deny = (group, name, lit, "User:alice", "*", AclOperation.READ, PermissionType.DENY)
        prefix = (topic, "v", pre, "User:alice", "*", AclOperation.WRITE, PermissionType.ALLOW)
        literal_topic = describe_all(
            resource_type_filter=topic, resource_name_filter=name, pattern_type_filter=lit
        )
        assert await rows(client, version, literal_topic) == {read}
        v0 = version == 0
        denied = describe_all(permission_type=PermissionType.DENY, resource_name_filter=name, v0=v0)
        assert await rows(client, version, denied) == {deny}
        if version >= 1:
            match = describe_all(
                resource_type_filter=topic,
                resource_name_filter=name,
                pattern_type_filter=PatternType.MATCH,
            )
            assert await rows(client, version, match) == {read, star, prefix}
        else:
            # Version 0 knows literal patterns only.
            every_topic = describe_all(resource_type_filter=topic, v0=True)
            assert await rows(client, version, every_topic) == {
                read,
                star,
            }

        doomed = delete_filter(resource_name_filter=name, v0=v0)
        untouched = delete_filter(resource_name_filter="nothing", v0=v0)
        response = await client.call(
            ApiKey.DELETE_ACLS, version, DeleteAclsRequest(filters=[doomed, untouched])
        )
        first, second = response.filter_results
        assert first.error_code == second.error_code == ErrorCode.NONE
        matched = {
            (m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
             m.permission_type)
            for m in first.matching_acls
        }  # fmt: skip
        assert matched == {read, deny}
        assert second.matching_acls == []
        assert await rows(client, version, literal_topic) == set()
    remaining = {(a.name, a.pattern_type) for a in broker.metadata.acls()}
    assert remaining == {("*", PatternType.LITERAL), ("v", PatternType.PREFIXED)}


async def test_unknown_filter_codes_are_invalid(secured: tuple[Broker, RawClient]) -> None:
    _, client = secured
    response = await client.call(ApiKey.DESCRIBE_ACLS, 3, describe_all(operation=0))
    assert response.error_code == ErrorCode.INVALID_REQUEST
    response = await client.call(
        ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=[delete_filter(pattern_type_filter=0)])
    )
    assert [r.error_code for r in response.filter_results] == [ErrorCode.INVALID_REQUEST]
