"""``kbroker share-groups``: share groups (KIP-932), as Kafka's kafka-share-groups.sh shows and
changes them, over the Kafka protocol (kbroker or any broker with share groups).

- ``list [--state S]``: every share group; with ``--state``, a GROUP/STATE table of those in
  the states given (all with ``--state all``).
- ``describe GROUP``: per partition the share-partition start offset and the lag (records
  not yet acknowledged or archived, KIP-1226), with ``--verbose`` the leader epoch;
  ``--members``: each member's id, host, client id and assignment (``--verbose``: its
  epoch); ``--state``: the coordinator, state and member count (``--verbose``: the group
  and assignment epochs).
- ``reset-offsets GROUP``: the start offsets to the earliest or latest offset, or the first
  at or after a time, for some topics or all the group has; a plan unless ``--execute``
  (the group must have no members).
- ``delete-offsets GROUP --topic T``: forget the group's state of topics.
- ``delete GROUP...``: delete groups and their share-partition state.

Every command takes ``--bootstrap-server HOST:PORT[,HOST:PORT]`` and ``--json``. Exit status:
0 on success, 1 when the operation failed (the reason on stderr), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
from typing import Any

from kbroker.cli.groups import add_topic_scope, parse_datetime, parse_topic_spec
from kbroker.cli.ops import groups as ops_groups
from kbroker.cli.ops import share_groups as ops
from kbroker.cli.ops.admin import OpsError
from kbroker.cli.ops.groups import SHARE, clamp
from kbroker.cli.ops.output import (
    EXIT_FAILED,
    EXIT_OK,
    add_common_options,
    emit_json,
    run_command,
    table,
)
from kbroker.client import EARLIEST, LATEST, KafkaClient, TopicPartition
from wire.errors import ErrorCode


async def _list(args: argparse.Namespace, client: KafkaClient) -> int:
    groups = [(g.group_id, g.state) for g in await ops_groups.list_groups(client, [SHARE])]
    wanted = {s.lower() for s in args.state} - {"all"}
    if wanted:
        groups = [g for g in groups if g[1].lower() in wanted]
    if args.json:
        emit_json([{"group": g, "state": s} for g, s in groups])
    elif args.state:
        print(table(("GROUP", "STATE"), groups))
    else:
        for group, _ in groups:
            print(group)
    return EXIT_OK


def _assignment(partitions: tuple[TopicPartition, ...]) -> str:
    return ",".join(f"{t}:{p}" for t, p in partitions) or "-"


async def _describe(args: argparse.Namespace, client: KafkaClient) -> int:
    described = await ops_groups.describe_group(client, args.group, SHARE)
    if args.members:
        members = described.members
        if args.json:
            emit_json(
                [
                    {
                        "group": args.group,
                        "member_id": m.member_id,
                        "host": m.host,
                        "client_id": m.client_id,
                        "member_epoch": m.epoch,
                        "assignment": [[t, p] for t, p in m.assignment],
                    }
                    for m in members
                ]
            )
        elif not members:
            print(f"Share group '{args.group}' has no active members.")
        else:
            headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            headers += ["MEMBER-EPOCH", "ASSIGNMENT"] if args.verbose else ["ASSIGNMENT"]
            rows = []
            for m in members:
                row: list[object] = [args.group, m.member_id, m.host, m.client_id]
                row.append(len(m.assignment))
                if args.verbose:
                    row.append(m.epoch)
                row.append(_assignment(m.assignment))
                rows.append(row)
            print(table(headers, rows))
        return EXIT_OK
    if args.state:
        await client.coordinator(args.group)
        address = client.cluster.coordinator(args.group)
        state = {
            "group": args.group,
            "state": described.state,
            "group_epoch": described.epoch,
            "assignment_epoch": described.assignment_epoch,
            "members": len(described.members),
        }
        if args.json:
            emit_json(state)
            return EXIT_OK
        node = next((n for n, a in client.brokers.items() if a == address), -1)
        host, port = address or ("?", -1)
        headers = ["GROUP", "COORDINATOR (ID)", "STATE"]
        row: list[object] = [args.group, f"{host}:{port}  ({node})", described.state]
        if args.verbose:
            headers += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
            row += [described.epoch, described.assignment_epoch]
        print(table([*headers, "#MEMBERS"], [[*row, len(described.members)]]))
        return EXIT_OK
    offsets = await ops.share_offsets(client, args.group)
    if args.json:
        emit_json(
            [
                {
                    "group": args.group,
                    "topic": o.topic,
                    "partition": o.partition,
                    "leader_epoch": o.leader_epoch,
                    "start_offset": o.start_offset,
                    "lag": o.lag,
                }
                for o in offsets
            ]
        )
        return EXIT_OK
    headers = ["GROUP", "TOPIC", "PARTITION"]
    headers += ["LEADER-EPOCH", "START-OFFSET", "LAG"] if args.verbose else ["START-OFFSET", "LAG"]
    rows = []
    for o in offsets:
        row: list[object] = [args.group, o.topic, o.partition]
        if args.verbose:
            row.append(o.leader_epoch)
        row += [o.start_offset, "-" if o.lag is None else o.lag]
        rows.append(row)
    print(table(headers, rows))
    return EXIT_OK


async def _reset(args: argparse.Namespace, client: KafkaClient) -> int:
    current = {
        (o.topic, o.partition): o.start_offset for o in await ops.share_offsets(client, args.group)
    }
    if args.all_topics:
        partitions = sorted(current)
    else:
        partitions = await ops_groups.group_partitions(
            client, current, [parse_topic_spec(s) for s in args.topic]
        )
    if not partitions:
        raise OpsError("no partitions selected")
    earliest = await client.list_offsets(partitions, EARLIEST)
    latest = await client.list_offsets(partitions, LATEST)
    if args.to_earliest:
        targets = earliest
    elif args.to_latest:
        targets = latest
    else:
        by_time = await client.list_offsets(partitions, args.to_datetime)
        targets = {tp: latest[tp] if o < 0 else o for tp, o in by_time.items()}
    plan = {tp: clamp(targets[tp], earliest[tp], latest[tp]) for tp in partitions}
    if args.execute:
        await ops.alter_share_offsets(client, args.group, plan)
    rows = [(args.group, t, p, offset) for (t, p), offset in sorted(plan.items())]
    if args.json:
        emit_json(
            {
                "result": "reset" if args.execute else "dry run",
                "offsets": [
                    {"group": g, "topic": t, "partition": p, "new": n} for g, t, p, n in rows
                ],
            }
        )
        return EXIT_OK
    print(table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows))
    if not args.execute:
        print("(dry run: nothing changed; add --execute to apply)")
    return EXIT_OK


async def _delete_offsets(args: argparse.Namespace, client: KafkaClient) -> int:
    results = await ops.delete_share_offsets(client, args.group, args.topic)
    if args.json:
        emit_json({t: e.name if e != ErrorCode.NONE else None for t, e in sorted(results.items())})
    else:
        print(
            table(
                ("TOPIC", "STATUS"),
                [
                    (t, "Successful" if e == ErrorCode.NONE else f"Error: {e.name}")
                    for t, e in sorted(results.items())
                ],
            )
        )
    return EXIT_OK if all(e == ErrorCode.NONE for e in results.values()) else EXIT_FAILED


async def _delete(args: argparse.Namespace, client: KafkaClient) -> int:
    results = {group: await ops.delete_group(client, group) for group in args.group}
    if args.json:
        emit_json({g: e.name if e != ErrorCode.NONE else None for g, e in results.items()})
    for group, error in results.items():
        if args.json:
            continue
        if error == ErrorCode.NONE:
            print(f"Deletion of requested share group '{group}' was successful.")
        else:
            print(f"Deletion of share group '{group}' failed: {error.name}")
    return EXIT_OK if all(e == ErrorCode.NONE for e in results.values()) else EXIT_FAILED


def register(sub: Any) -> None:
    """Add ``share-groups`` to ``kbroker``'s subcommands."""
    groups = sub.add_parser(
        "share-groups", help="share groups: list, describe, reset or delete offsets, delete"
    )
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="all share groups")
    add_common_options(listing)
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        help="show states; only groups in this state (repeatable; 'all' for every state)",
    )
    listing.set_defaults(func=run_command(_list))

    describe = actions.add_parser("describe", help="start offsets and lag, members or state")
    describe.add_argument("group")
    add_common_options(describe)
    shown = describe.add_mutually_exclusive_group()
    shown.add_argument("--members", action="store_true", help="the members and assignments")
    shown.add_argument("--state", action="store_true", help="coordinator, state, epoch")
    describe.add_argument("--verbose", action="store_true", help="more columns")
    describe.set_defaults(func=run_command(_describe))

    reset = actions.add_parser(
        "reset-offsets", help="move a group's start offsets (dry run unless --execute)"
    )
    reset.add_argument("group")
    add_common_options(reset)
    add_topic_scope(reset)
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument(
        "--to-datetime", type=parse_datetime, metavar="ISO-8601", help="UTC unless a zone is given"
    )
    reset.add_argument("--execute", action="store_true", help="change the start offsets")
    reset.set_defaults(func=run_command(_reset))

    forget = actions.add_parser("delete-offsets", help="forget the group's state of topics")
    forget.add_argument("group")
    add_common_options(forget)
    forget.add_argument("--topic", action="append", required=True, help="repeatable")
    forget.set_defaults(func=run_command(_delete_offsets))

    delete = actions.add_parser("delete", help="delete share groups and their state")
    delete.add_argument("group", nargs="+")
    add_common_options(delete)
    delete.set_defaults(func=run_command(_delete))
