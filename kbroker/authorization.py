"""Authorization of requests: the broker's authorizer and the request's principal.

The authorizer (kbroker/security/acls.py) exists when ``authorizer.class.name`` names one
of Kafka's ACL authorizers; without it every request is allowed, as in Kafka. Handlers ask
through ``authorize``, which takes the principal and host of the request being handled
from the connection's context (kbroker.server.connection): ``PRINCIPAL`` is the SASL user or
the mutual-TLS client's mapped name once the connection has authenticated (``User:ANONYMOUS``
until then, and on PLAINTEXT listeners), ``CLIENT_HOST`` its address. Each connection's
worker task runs in its own context, so a handler sees its own connection's values.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from kbroker.security.acls import (
    AclBinding,
    AclOperation,
    Authorizer,
    ResourceType,
    all_operations,
    parse_super_users,
)
from kbroker.server.connection import CLIENT_HOST, PRINCIPAL

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.config import BrokerConfig


def build_authorizer(
    config: BrokerConfig, source: Callable[[], Collection[AclBinding]]
) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` asks for, over the ACLs `source` gives."""
    if not config.get("authorizer.class.name"):
        return None
    return Authorizer(
        source,
        super_users=parse_super_users(config.get("super.users")),
        allow_if_no_acl=config.get("allow.everyone.if.no.acl.found"),
    )


def request_host() -> str:
    """The client's address, as ACLs name hosts (without the leading slash)."""
    return CLIENT_HOST.get().lstrip("/")


def authorize(
    broker: Broker, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    """May the principal of the request being handled do `operation` on the resource?"""
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(PRINCIPAL.get(), request_host(), operation, resource_type, name)


def describable_topics(broker: Broker) -> Callable[[str], bool] | None:
    """Whether the principal of the request being handled may DESCRIBE a topic, as a
    predicate that keeps answering for that principal after the handler returns (the group
    coordinator may use it later); None without an authorizer."""
    authorizer = broker.authorizer
    if authorizer is None:
        return None
    principal, host = PRINCIPAL.get(), request_host()

    def describable(name: str) -> bool:
        return authorizer.authorize(
            principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC, name
        )

    return describable


def authorize_any(broker: Broker, operation: AclOperation, resource_type: ResourceType) -> bool:
    """May this request's principal do `operation` on some resource of the type?"""
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any(PRINCIPAL.get(), request_host(), operation, resource_type)


def authorized_operations(broker: Broker, resource_type: ResourceType, name: str) -> int:
    """The ``*_authorized_operations`` bitfield of the resource for this request's
    principal; every operation the type has without an authorizer, as Kafka answers."""
    authorizer = broker.authorizer
    if authorizer is None:
        return all_operations(resource_type)
    return authorizer.authorized_operations(PRINCIPAL.get(), request_host(), resource_type, name)
