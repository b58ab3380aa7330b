"""ACLs (kbroker/security/acls.py) as both metadata backends store them.

ZooKeeper keeps them where Kafka's ZooKeeper-mode brokers do, one znode per resource
pattern, so ACLs written by either side are seen by the other:

- literal patterns at ``/kafka-acl/<ResourceType>/<name>``, prefixed ones at
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` (``<ResourceType>`` in Pascal
  case: ``Topic``, ``Group``, ``Cluster``, ``TransactionalId``, ``DelegationToken``,
  ``User``; every broker creates the six under both roots at start, as Kafka's
  AclAuthorizer does); each holds ``{"acls":[{"principal":"User:alice",
  "permissionType":"Allow","host":"*","operation":"Read"}],"version":1}`` (compact, in
  Kafka's order), operations and permission types in Pascal case (``DescribeConfigs``).
  A pattern with no ACL left has no znode. Names are not encoded: a name ZooKeeper cannot
  take as a znode name (one with ``/``, ``.``, ``..``, control characters) is refused, as
  Kafka's AclAuthorizer refuses it.
- after each change of a pattern, a sequential change notification: for literal
  patterns ``/kafka-acl-changes/acl_changes_<seq>`` holding ``TOPIC:<name>`` (the
  resource type's upper-case name, a colon, the name), for prefixed ones
  ``/kafka-acl-extended-changes/acl_changes_<seq>`` holding ``{"version":1,
  "resourceType":"TOPIC","name":"<name>","patternType":"PREFIXED"}``. Kafka's brokers
  watch these; kbroker's watch the ACL znodes themselves, and purge the notifications
  (controller/config_znodes.py).

The embedded backend keeps a list of ``{"resource_type": "Topic", "name": "t",
"pattern_type": "Literal", "principal": "User:alice", "host": "*", "operation": "Read",
"permission_type": "Allow"}``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from controller.zk_paths import kafka_json, znode_name_problem
from kbroker.security.acls import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    parse_name,
    pascal_name,
)

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
PREFIXED_ROOT = f"{EXTENDED_ROOT}/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
# The stored pattern types and the root of each.
ROOTS = ((PatternType.LITERAL, LITERAL_ROOT), (PatternType.PREFIXED, PREFIXED_ROOT))
STORED_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))
# Created at start, as Kafka does, so listings never hit a missing parent.
PATHS = (
    *(f"{root}/{pascal_name(t)}" for _, root in ROOTS for t in STORED_TYPES),
    LITERAL_CHANGES,
    EXTENDED_CHANGES,
)
JSON_VERSION = 1

# A resource pattern: what one znode holds the ACLs of.
Pattern = tuple[ResourceType, str, PatternType]


def pattern_of(acl: AclBinding) -> Pattern:
    return (acl.resource_type, acl.name, acl.pattern_type)


def by_pattern(acls: Iterable[AclBinding]) -> dict[Pattern, set[AclBinding]]:
    out: dict[Pattern, set[AclBinding]] = {}
    for acl in acls:
        out.setdefault(pattern_of(acl), set()).add(acl)
    return out


def apply_changes(
    acls: Collection[AclBinding], add: Iterable[AclBinding], remove: Iterable[AclBinding]
) -> frozenset[AclBinding]:
    return frozenset((set(acls) - set(remove)) | set(add))


def resource_path(pattern: Pattern) -> str:
    resource_type, name, pattern_type = pattern
    root = LITERAL_ROOT if pattern_type == PatternType.LITERAL else PREFIXED_ROOT
    return f"{root}/{pascal_name(resource_type)}/{name}"


def encode_acls(acls: Iterable[AclBinding]) -> bytes:
    entries = [
        {
            "principal": a.principal,
            "permissionType": pascal_name(a.permission),
            "host": a.host,
            "operation": pascal_name(a.operation),
        }
        for a in sorted(acls, key=lambda a: (a.principal, a.host, a.operation, a.permission))
    ]
    return kafka_json({"acls": entries, "version": JSON_VERSION})


def decode_acls(data: bytes, pattern: Pattern) -> set[AclBinding]:
    """The ACLs of one znode; entries naming an unknown operation or permission are left
    out (ValueError for JSON that is not an ACL list at all)."""
    if not data:
        return set()
    try:
        state = json.loads(data)
        if state["version"] != JSON_VERSION:
            raise ValueError(f"ACL znode version {state['version']}")
        entries: list[Mapping[str, Any]] = state["acls"]
        out: set[AclBinding] = set()
        for entry in entries:
            operation = parse_name(AclOperation, str(entry["operation"]))
            permission = parse_name(PermissionType, str(entry["permissionType"]))
            binding = AclBinding(
                *pattern, str(entry["principal"]), str(entry["host"]), operation, permission
            )
            if binding.problem() is None:
                out.add(binding)
        return out
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not an ACL znode: {exc!r}") from exc


def zookeeper_problem(acl: AclBinding) -> str | None:
    """Why the binding's resource name cannot name its znode, or None."""
    problem = znode_name_problem(acl.name)
    return None if problem is None else f"Invalid resource name for ZooKeeper: {problem}"


def parse_resource_type(node: str) -> ResourceType:
    return parse_name(ResourceType, node)


def change_notification(pattern: Pattern) -> tuple[str, bytes]:
    """(path prefix for a sequential znode, data) announcing a change of `pattern`."""
    resource_type, name, pattern_type = pattern
    if pattern_type == PatternType.LITERAL:
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", f"{resource_type.name}:{name}".encode()
    event = {
        "version": 1,
        "resourceType": resource_type.name,
        "name": name,
        "patternType": pattern_type.name,
    }
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", kafka_json(event)


def to_json(acls: Iterable[AclBinding]) -> list[dict[str, str]]:
    return [
        {
            "resource_type": pascal_name(a.resource_type),
            "name": a.name,
            "pattern_type": pascal_name(a.pattern_type),
            "principal": a.principal,
            "host": a.host,
            "operation": pascal_name(a.operation),
            "permission_type": pascal_name(a.permission),
        }
        for a in sorted(acls, key=repr)
    ]


def from_json(items: Iterable[Mapping[str, Any]]) -> frozenset[AclBinding]:
    return frozenset(
        AclBinding(
            parse_name(ResourceType, str(item["resource_type"])),
            str(item["name"]),
            parse_name(PatternType, str(item["pattern_type"])),
            str(item["principal"]),
            str(item["host"]),
            parse_name(AclOperation, str(item["operation"])),
            parse_name(PermissionType, str(item["permission_type"])),
        )
        for item in items
    )
