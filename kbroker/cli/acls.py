"""``kbroker acls``: add, list and remove ACLs (what ``kafka-acls.sh --add|--list|--remove``
does), over the Kafka protocol, with kafka-acls.sh's option names.

    kbroker acls add --allow-principal User:alice [--allow-host 10.0.0.1]
                     [--deny-principal User:bob [--deny-host H]] --operation Read
                     --topic T [--group G] [--cluster] [--transactional-id X]
                     [--resource-pattern-type literal|prefixed]
    kbroker acls list [--topic T ...] [--principal User:alice] [--resource-pattern-type ...]
    kbroker acls remove --topic T [--allow-principal User:alice] [--operation Read] ...

Hosts default to ``*``; ``add`` makes one ACL per resource, principal, host and operation
(``All`` when no ``--operation`` is given). ``list`` and ``remove`` name resources with the
pattern type given (``literal`` by default; ``any`` and ``match`` select more, as
DescribeAcls filters do); ``list`` with no resource lists every ACL, ``remove`` of a
resource with no principal removes all its ACLs.
"""

from __future__ import annotations

import argparse
from typing import Any, TypeVar

from kbroker.cli.ops.acls import create_acls, delete_acls, describe_acls
from kbroker.cli.ops.admin import OpsError
from kbroker.cli.ops.output import EXIT_OK, add_common_options, emit_json, run_command, table
from kbroker.client import KafkaClient
from kbroker.security.acls import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    parse_name,
    pascal_name,
)

E = TypeVar("E", AclOperation, PatternType)
# (option, resource type) of the resource options, as kafka-acls.sh names them.
RESOURCE_OPTIONS = (
    ("topic", ResourceType.TOPIC),
    ("group", ResourceType.GROUP),
    ("transactional_id", ResourceType.TRANSACTIONAL_ID),
    ("delegation_token", ResourceType.DELEGATION_TOKEN),
    ("user_principal", ResourceType.USER),
)


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    found = [(kind, name) for option, kind in RESOURCE_OPTIONS for name in getattr(args, option)]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _operations(args: argparse.Namespace, default: AclOperation) -> list[AclOperation]:
    return [_parse(AclOperation, op) for op in args.operation] or [default]


def _parse(enum: type[E], text: str) -> E:
    value = parse_name(enum, text)
    if value == 0:
        raise OpsError(f"unknown {enum.__name__} {text!r}")
    return value


def _entries(args: argparse.Namespace) -> list[tuple[str, str, PermissionType]]:
    """(principal, host, permission) of the --allow-/--deny- options."""
    allow_hosts = args.allow_host or [WILDCARD]
    deny_hosts = args.deny_host or [WILDCARD]
    return [(p, h, PermissionType.ALLOW) for p in args.allow_principal for h in allow_hosts] + [
        (p, h, PermissionType.DENY) for p in args.deny_principal for h in deny_hosts
    ]


def _row(acl: AclBinding) -> tuple[str, ...]:
    return (
        pascal_name(acl.resource_type),
        acl.name,
        pascal_name(acl.pattern_type),
        acl.principal,
        acl.host,
        pascal_name(acl.operation),
        pascal_name(acl.permission),
    )


HEADERS = ("RESOURCE_TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")


def _emit(args: argparse.Namespace, acls: list[AclBinding]) -> None:
    rows = sorted(_row(a) for a in acls)
    if args.json:
        emit_json([dict(zip((h.lower() for h in HEADERS), row, strict=True)) for row in rows])
    else:
        print(table(HEADERS, rows))


async def _add(args: argparse.Namespace, client: KafkaClient) -> int:
    pattern = _parse(PatternType, args.resource_pattern_type)
    resources = _resources(args)
    entries = _entries(args)
    if not resources or not entries:
        raise OpsError("name a resource (--topic, --group, --cluster, ...) and a principal")
    bindings = [
        AclBinding(kind, name, pattern, principal, host, op, permission)
        for kind, name in resources
        for principal, host, permission in entries
        for op in _operations(args, AclOperation.ALL)
    ]
    await create_acls(client, bindings)
    _emit(args, bindings)
    return EXIT_OK


def _filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    pattern = _parse(PatternType, args.resource_pattern_type)
    resources: list[tuple[ResourceType, str | None]] = [*_resources(args)]
    entries: list[tuple[str | None, str | None, PermissionType]] = [*_entries(args)]
    if args.principal is not None:
        entries.append((args.principal, None, PermissionType.ANY))
    if not entries:
        entries = [(None, None, PermissionType.ANY)]
    if not resources:
        resources, pattern = [(ResourceType.ANY, None)], PatternType.ANY
    return [
        AclBindingFilter(kind, name, pattern, principal, host, op, permission)
        for kind, name in resources
        for principal, host, permission in entries
        for op in _operations(args, AclOperation.ANY)
    ]


async def _list(args: argparse.Namespace, client: KafkaClient) -> int:
    found: set[AclBinding] = set()
    for acl_filter in _filters(args):
        found.update(await describe_acls(client, acl_filter))
    _emit(args, sorted(found, key=repr))
    return EXIT_OK


async def _remove(args: argparse.Namespace, client: KafkaClient) -> int:
    if not _resources(args):
        raise OpsError("name the resource whose ACLs to remove (--topic, --group, --cluster, ...)")
    _emit(args, await delete_acls(client, _filters(args)))
    return EXIT_OK


def _add_options(parser: argparse.ArgumentParser, *, pattern_help: str) -> None:
    for option, kind in RESOURCE_OPTIONS:
        parser.add_argument(
            f"--{option.replace('_', '-')}",
            action="append",
            default=[],
            metavar="NAME",
            help=f"a {pascal_name(kind)} resource ({WILDCARD}: every one)",
        )
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type", default="literal", metavar="TYPE", help=pattern_help
    )
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    parser.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OP",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All",
    )
    add_common_options(parser)


def register(sub: Any) -> None:
    acls = sub.add_parser("acls", help="add, list and remove ACLs")
    actions = acls.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add ACLs")
    _add_options(add, pattern_help="literal (default) or prefixed")
    add.set_defaults(func=run_command(_add))
    listing = actions.add_parser("list", help="ACLs of the named resources (default: all)")
    _add_options(listing, pattern_help="literal (default), prefixed, any or match")
    listing.add_argument("--principal", help="only the ACLs of this principal")
    listing.set_defaults(func=run_command(_list))
    remove = actions.add_parser("remove", help="remove ACLs of the named resources")
    _add_options(remove, pattern_help="literal (default), prefixed, any or match")
    remove.add_argument("--principal", help="only the ACLs of this principal")
    remove.set_defaults(func=run_command(_remove))
