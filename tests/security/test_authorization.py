"""kbroker.authorization: the authorizer from the config, the request's principal and host."""

from __future__ import annotations

import contextvars
from types import SimpleNamespace

import pytest

from kbroker.authorization import (
    PRINCIPAL,
    authorize,
    authorized_operations,
    build_authorizer,
)
from kbroker.config import BrokerConfig, ConfigError
from kbroker.security.acls import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    all_operations,
)
from kbroker.server.connection import CLIENT_HOST

READ = AclBinding(
    ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "10.1.1.1", AclOperation.READ,
    PermissionType.ALLOW,
)  # fmt: skip


def config(**props: str) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {"log.dirs": "/tmp/unused", **{k.replace("_", "."): v for k, v in props.items()}}
    )


@pytest.mark.parametrize(
    "name",
    [
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
    ],
)
def test_kafkas_authorizer_class_names(name: str) -> None:
    authorizer = build_authorizer(
        config(
            authorizer_class_name=name,
            super_users="User:admin;User:ops",
            allow_everyone_if_no_acl_found="true",
        ),
        frozenset,
    )
    assert authorizer is not None
    assert authorizer.super_users == {"User:admin", "User:ops"}
    assert authorizer.allow_if_no_acl


def test_no_authorizer_by_default_and_unknown_classes_refused() -> None:
    assert build_authorizer(config(), frozenset) is None
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        config(authorizer_class_name="com.example.MyAuthorizer")


def test_the_requests_principal_and_host_decide() -> None:
    acls = frozenset({READ})
    auth = build_authorizer(
        config(authorizer_class_name="kafka.security.authorizer.AclAuthorizer"), lambda: acls
    )
    broker = SimpleNamespace(authorizer=auth)
    open_broker = SimpleNamespace(authorizer=None)

    def check() -> tuple[bool, int]:
        return (
            authorize(broker, AclOperation.READ, ResourceType.TOPIC, "t"),  # type: ignore[arg-type]
            authorized_operations(broker, ResourceType.TOPIC, "t"),  # type: ignore[arg-type]
        )

    def as_alice(host: str) -> tuple[bool, int]:
        PRINCIPAL.set("User:alice")
        CLIENT_HOST.set(host)
        return check()

    assert check() == (False, 0)  # User:ANONYMOUS
    assert contextvars.copy_context().run(as_alice, "/10.1.1.1") == (True, (1 << 3) | (1 << 8))
    assert contextvars.copy_context().run(as_alice, "/10.1.1.2") == (False, 0)
    assert authorize(open_broker, AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")  # type: ignore[arg-type]
    assert authorized_operations(open_broker, ResourceType.GROUP, "g") == all_operations(  # type: ignore[arg-type]
        ResourceType.GROUP
    )
