"""ACL authorization (KIP-11, KIP-290 prefixed ACLs): the pure part, no IO.

An ACL binding says that a principal (``User:alice``; ``User:*`` is every principal)
connecting from a host (an address; ``*`` is every host) is allowed or denied an operation
on a resource pattern: a resource type and a name, matched literally (``*`` being every
resource of the type) or as a prefix of resource names.

A request is authorized as Kafka's ACL authorizers decide:

1. a super user (``super.users``, semicolon-separated principals) may do anything;
2. the ACLs whose pattern matches the resource are collected; none at all means the
   ``allow.everyone.if.no.acl.found`` answer (default: denied);
3. a matching DENY for the operation itself or for ALL denies;
4. otherwise a matching ALLOW grants: for the operation itself, for ALL, and for the
   operations that imply it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS
   implies DESCRIBE_CONFIGS). Implication is for ALLOW only: a DENY of READ does not deny
   DESCRIBE.

Codes are Kafka's (its ResourceType, PatternType, AclOperation, AclPermissionType); names,
as ZooKeeper stores them, are the codes' names in Pascal case (``DescribeConfigs``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"
# The one name a CLUSTER resource has.
CLUSTER_NAME = "kafka-cluster"
# Kafka's value of an authorized-operations field nobody asked for (Integer.MIN_VALUE).
OPERATIONS_NOT_REQUESTED = -(2**31)


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


Op = AclOperation
E = TypeVar("E", ResourceType, PatternType, AclOperation, PermissionType)
# An ALLOW of any of these grants the key (Kafka's implied operations).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    Op.DESCRIBE: frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}),
    Op.DESCRIBE_CONFIGS: frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
}
# The operations each resource type has (Kafka's AclEntry.supportedOperations, as of 3.9:
# groups gained the config operations in 4.0, with group configs, which kbroker does not
# have): what an authorized-operations bitfield is made of.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE,
        Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Op.READ, Op.DELETE, Op.DESCRIBE),
    ResourceType.CLUSTER: (
        Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Op.WRITE, Op.DESCRIBE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}  # fmt: skip


def pascal_name(value: IntEnum) -> str:
    """``DESCRIBE_CONFIGS`` as Kafka stores it: ``DescribeConfigs``."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def parse_name(enum: type[E], name: str) -> E:
    """A code from its Pascal-case or upper-case name (``Read``, ``READ``, ``TransactionalId``,
    ``TRANSACTIONAL_ID``); UNKNOWN when it names nothing, as Kafka parses them."""
    wanted = name.replace("_", "").upper()
    for member in enum:
        if member.name.replace("_", "") == wanted:
            return member
    return enum(0)


def principal_valid(principal: str) -> bool:
    """``<type>:<name>`` with a non-empty type (Kafka's parseKafkaPrincipal)."""
    kind, sep, _ = principal.partition(":")
    return bool(sep and kind)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: who may or may not do what on which resources."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def problem(self) -> str | None:
        """Why Kafka refuses to create this binding (INVALID_REQUEST), or None."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return f"Invalid resourceType {self.resource_type.name}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid patternType {self.pattern_type.name}"
        if self.operation in (Op.UNKNOWN, Op.ANY):
            return f"Invalid operation {self.operation.name}"
        if self.permission not in (PermissionType.ALLOW, PermissionType.DENY):
            return f"Invalid permissionType {self.permission.name}"
        if not self.name:
            return "Invalid empty resource name"
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if not principal_valid(self.principal):
            return f"Invalid principal {self.principal!r}: expected principalType:principalName"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: None names and ANY codes match anything.

    Pattern types: LITERAL or PREFIXED select bindings of that type with exactly the name;
    ANY, bindings of any type with exactly the name; MATCH, every binding that applies to a
    resource of that name (literal with the name or ``*``, prefixed with a prefix of it)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = Op.ANY
    permission: PermissionType = PermissionType.ANY

    def problem(self) -> str | None:
        """Why the filter is refused (INVALID_REQUEST): an UNKNOWN code, or None."""
        if ResourceType.UNKNOWN == self.resource_type or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == Op.UNKNOWN or self.permission == PermissionType.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self.matches_pattern(acl) and self.matches_entry(acl)

    def matches_pattern(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        kind = self.pattern_type
        if kind not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        if self.name is None:
            return True
        if kind in (PatternType.ANY, acl.pattern_type):
            return self.name == acl.name
        if acl.pattern_type == PatternType.LITERAL:
            return acl.name in (self.name, WILDCARD)
        return self.name.startswith(acl.name)

    def matches_entry(self, acl: AclBinding) -> bool:
        return (
            self.principal in (None, acl.principal)
            and self.host in (None, acl.host)
            and self.operation in (Op.ANY, acl.operation)
            and self.permission in (PermissionType.ANY, acl.permission)
        )


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


def _grants(acl: AclBinding, operation: AclOperation) -> bool:
    """Does this (principal- and host-matching) ACL speak for `operation`?"""
    if acl.operation in (Op.ALL, operation):
        return True
    return acl.permission == PermissionType.ALLOW and acl.operation in IMPLIED_BY.get(operation, ())


class AclIndex:
    """A set of ACLs indexed for authorization: literal ACLs by (type, name), prefixed ACLs
    by type and prefix, with the prefix lengths present, so a lookup costs one dict probe
    per distinct prefix length rather than a scan."""

    def __init__(self, acls: Iterable[AclBinding]) -> None:
        self.acls = frozenset(acls)
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        for acl in self.acls:
            if acl.pattern_type == PatternType.PREFIXED:
                by_prefix = self._prefixed.setdefault(acl.resource_type, {})
                by_prefix.setdefault(acl.name, []).append(acl)
            else:
                self._literal.setdefault((acl.resource_type, acl.name), []).append(acl)
        for kind, by_prefix in self._prefixed.items():
            self._prefix_lengths[kind] = sorted({len(p) for p in by_prefix})

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose pattern applies to the resource."""
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found.extend(self._literal.get((resource_type, WILDCARD), ()))
        by_prefix = self._prefixed.get(resource_type)
        if by_prefix:
            for length in self._prefix_lengths[resource_type]:
                if length > len(name):
                    break
                found.extend(by_prefix.get(name[:length], ()))
        return found


class Authorizer:
    """Decides requests against the ACLs `source` returns (the metadata backend's set,
    the same object until ACLs change, so the index is rebuilt only then)."""

    def __init__(
        self,
        source: Callable[[], Collection[AclBinding]],
        *,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self._source = source
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._indexed: tuple[Collection[AclBinding] | None, AclIndex] = (None, AclIndex(()))

    def index(self) -> AclIndex:
        acls = self._source()
        if self._indexed[0] is not acls:
            self._indexed = (acls, AclIndex(acls))
        return self._indexed[1]

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = self.index().matching(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        applying = [
            acl
            for acl in acls
            if acl.principal in (principal, WILDCARD_PRINCIPAL)
            and acl.host in (host, WILDCARD)
            and _grants(acl, operation)
        ]
        if any(acl.permission == PermissionType.DENY for acl in applying):
            return False
        return any(acl.permission == PermissionType.ALLOW for acl in applying)

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May the principal do `operation` on some resource of the type? (Kafka's
        authorizeByResourceType, which lets an idempotent producer in with WRITE on any
        topic, KIP-679.) Yes for a super user; no when a DENY for it covers every resource
        (literal ``*``); otherwise yes when an ALLOW applies to some pattern that no DENY
        covers, and, when the type has no ACL at all, ``allow.everyone.if.no.acl.found``."""
        if principal in self.super_users:
            return True
        of_type = [acl for acl in self.index().acls if acl.resource_type == resource_type]
        if not of_type:
            return self.allow_if_no_acl
        applying = [
            acl
            for acl in of_type
            if acl.principal in (principal, WILDCARD_PRINCIPAL)
            and acl.host in (host, WILDCARD)
            and _grants(acl, operation)
        ]
        denials = [acl for acl in applying if acl.permission == PermissionType.DENY]
        if any(d.pattern_type == PatternType.LITERAL and d.name == WILDCARD for d in denials):
            return False

        def denied(acl: AclBinding) -> bool:
            return any(
                (d.pattern_type == PatternType.LITERAL and d.name == acl.name)
                or (d.pattern_type == PatternType.PREFIXED and acl.name.startswith(d.name))
                for d in denials
            )

        return any(acl.permission == PermissionType.ALLOW and not denied(acl) for acl in applying)

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bitfield Kafka answers for ``include_*_authorized_operations``: bit ``code``
        set for each operation of the resource type that is allowed."""
        return operations_bitfield(
            op
            for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(principal, host, op, resource_type, name)
        )

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [acl for acl in self.index().acls if acl_filter.matches(acl)]


def operations_bitfield(operations: Iterable[AclOperation]) -> int:
    value = 0
    for op in operations:
        value |= 1 << int(op)
    return value


def all_operations(resource_type: ResourceType) -> int:
    """What Kafka answers without an authorizer: every operation the type has."""
    return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])
