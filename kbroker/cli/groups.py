"""``kbroker groups``: consumer groups and their committed offsets, over the Kafka protocol.

- ``list``: every group on every broker, with its protocol type and state.
- ``describe GROUP``: like ``kafka-consumer-groups --describe``: per partition the committed
  offset, the log end offset, the lag, and the member that owns the partition (member id,
  host, client id), from the members' "consumer" protocol assignments.
- ``reset-offsets GROUP``: to the earliest or latest offset, a given offset, or the first
  offset at or after a time. Prints the plan; ``--execute`` commits it. The group must have no
  active members (the broker refuses commits without membership otherwise).
- ``import-zk-offsets``: offsets kept in ZooKeeper by consumers of the original design
  (``/consumers/<group>/offsets/<topic>/<partition>``, the decimal next offset to read) are
  committed into ``__consumer_offsets``, so those consumers can move to stock clients without
  reprocessing or skipping records. Prints the plan; ``--execute`` commits it.

Every command takes ``--bootstrap-server HOST:PORT[,HOST:PORT]`` and ``--json``. Exit status:
0 on success, 1 when the operation failed (the reason on stderr), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from kbroker.cli.ops import groups as ops_groups
from kbroker.cli.ops.admin import OpsError
from kbroker.cli.ops.groups import CLASSIC, ResetTarget, lag_rows
from kbroker.cli.ops.output import EXIT_OK, add_common_options, emit_json, run_command, table
from kbroker.client import LATEST, KafkaClient, TopicPartition

# --- pure helpers ---------------------------------------------------------------------------


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,2,5``."""
    topic, sep, partitions = spec.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"no topic in {spec!r}")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in partitions.split(",") if p})
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad partition list in {spec!r}") from None


def parse_datetime(text: str) -> int:
    """ISO 8601 to epoch milliseconds; a time without a zone is UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date-time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_zk_offset(data: bytes) -> int:
    """A ZooKeeper offset node holds the offset as decimal text."""
    text = data.decode("ascii").strip()
    if not text.lstrip("-").isdigit():
        raise ValueError(f"not an offset: {text!r}")
    return int(text)


# --- plumbing -------------------------------------------------------------------------------


# --- commands -------------------------------------------------------------------------------


async def _list(args: argparse.Namespace, client: KafkaClient) -> int:
    listed = await ops_groups.list_groups(client)
    groups = [(g.group_id, g.protocol_type, g.state) for g in listed]
    if args.state:
        wanted = {s.lower() for s in args.state}
        groups = [g for g in groups if g[2].lower() in wanted]
    if args.json:
        emit_json([{"group": g, "protocol_type": t, "state": s} for g, t, s in groups])
    else:
        print(table(("GROUP", "PROTOCOL-TYPE", "STATE"), groups))
    return EXIT_OK


async def _describe(args: argparse.Namespace, client: KafkaClient) -> int:
    described = await ops_groups.describe_group(client, args.group, CLASSIC)
    state = described.state
    committed = await client.committed(args.group)
    owners = ops_groups.owners(described)
    partitions = sorted(set(committed) | set(owners))
    ends = await client.list_offsets(partitions, LATEST) if partitions else {}
    rows = lag_rows(committed, ends, owners)
    if args.json:
        emit_json(
            {
                "group": args.group,
                "state": state,
                "protocol_type": described.protocol_type,
                "protocol": described.assignor,
                "partitions": [
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        "committed_offset": r.committed,
                        "log_end_offset": r.log_end,
                        "lag": r.lag,
                        "member_id": r.member_id or None,
                        "host": r.host or None,
                        "client_id": r.client_id or None,
                    }
                    for r in rows
                ],
            }
        )
        return EXIT_OK
    members = len(described.members)
    print(f"Group {args.group}: state {state}, {members} member{'s' if members != 1 else ''}")
    print(
        table(
            (
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ),
            [
                (
                    r.topic,
                    r.partition,
                    "-" if r.committed is None else r.committed,
                    r.log_end,
                    "-" if r.lag is None else r.lag,
                    r.member_id or "-",
                    r.host or "-",
                    r.client_id or "-",
                )
                for r in rows
            ],
        )
    )
    return EXIT_OK


async def _selected_partitions(
    client: KafkaClient, args: argparse.Namespace, committed: Iterable[TopicPartition]
) -> list[TopicPartition]:
    topics = None if args.all_topics else [parse_topic_spec(s) for s in args.topic]
    return await ops_groups.group_partitions(client, committed, topics)


async def _reset(args: argparse.Namespace, client: KafkaClient) -> int:
    committed = await client.committed(args.group)
    partitions = await _selected_partitions(client, args, committed)
    if args.to_earliest:
        target = ResetTarget("earliest")
    elif args.to_latest:
        target = ResetTarget("latest")
    elif args.to_offset is not None:
        target = ResetTarget("offset", args.to_offset)
    else:
        timestamp = args.to_timestamp if args.to_timestamp is not None else args.to_datetime
        target = ResetTarget("timestamp", timestamp)
    planned = await ops_groups.plan_reset(client, args.group, partitions, target)
    plan = {(r.topic, r.partition): r.new for r in planned}
    if args.execute:
        await ops_groups.commit_offsets(client, args.group, plan)
    _print_plan(args, plan, committed, "reset" if args.execute else "dry run")
    return EXIT_OK


def _print_plan(
    args: argparse.Namespace,
    plan: dict[TopicPartition, int],
    committed: dict[TopicPartition, tuple[int, str]],
    result: str,
    group: str | None = None,
) -> None:
    rows = [
        (
            group or args.group,
            t,
            p,
            committed[(t, p)][0] if (t, p) in committed else "-",
            offset,
        )
        for (t, p), offset in sorted(plan.items())
    ]
    if args.json:
        emit_json(
            {
                "result": result,
                "offsets": [
                    {"group": g, "topic": t, "partition": p, "current": c, "new": n}
                    for g, t, p, c, n in rows
                ],
            }
        )
        return
    print(table(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"), rows))
    if result == "dry run":
        print("(dry run: nothing committed; add --execute to apply)")


def read_zk_offsets(
    zookeeper: str, group: str | None, timeout: float
) -> dict[str, dict[TopicPartition, int]]:
    """Group -> (topic, partition) -> offset from ``/consumers`` in ZooKeeper."""
    # Only this command needs ZooKeeper; importing the ZooKeeper backend (and so kazoo) here
    # keeps the other commands free of it.
    from controller.zk_backend import read_consumer_offsets

    return {
        g: {tp: parse_zk_offset(data) for tp, data in offsets.items()}
        for g, offsets in read_consumer_offsets(zookeeper, group, timeout).items()
    }


async def _import_zk(args: argparse.Namespace, client: KafkaClient) -> int:
    loop = asyncio.get_running_loop()
    try:
        stored = await loop.run_in_executor(
            None, read_zk_offsets, args.zookeeper, args.group, args.timeout
        )
    except ValueError as exc:
        raise OpsError(f"unreadable offset in ZooKeeper: {exc}") from None
    except Exception as exc:  # kazoo's connection errors share no base class with OSError
        raise OpsError(f"cannot read offsets from ZooKeeper at {args.zookeeper}: {exc}") from None
    if not stored:
        raise OpsError(f"no consumer offsets under /consumers in {args.zookeeper}")
    existing = await client.partitions(
        sorted({t for offsets in stored.values() for t, _ in offsets})
    )
    report: list[dict[str, Any]] = []
    rows = []
    for g, offsets in sorted(stored.items()):
        known = {tp: o for tp, o in offsets.items() if tp[1] in existing.get(tp[0], [])}
        skipped = sorted(set(offsets) - set(known))
        committed = await client.committed(g) if known else {}
        if args.execute and known:
            await ops_groups.commit_offsets(client, g, known)
        for (t, p), offset in sorted(offsets.items()):
            current = committed[(t, p)][0] if (t, p) in committed else None
            note = "topic or partition missing" if (t, p) in skipped else ""
            rows.append((g, t, p, "-" if current is None else current, offset, note or "-"))
            report.append(
                {
                    "group": g,
                    "topic": t,
                    "partition": p,
                    "current": current,
                    "zookeeper": offset,
                    "skipped": bool(note),
                }
            )
    result = "imported" if args.execute else "dry run"
    if args.json:
        emit_json({"result": result, "offsets": report})
        return EXIT_OK
    print(
        table(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "ZOOKEEPER-OFFSET", "NOTE"), rows)
    )
    if not args.execute:
        print("(dry run: nothing committed; add --execute to apply)")
    return EXIT_OK


# --- registration ---------------------------------------------------------------------------


def register(sub: Any) -> None:
    """Add ``groups`` to ``kbroker``'s subcommands."""
    groups = sub.add_parser("groups", help="consumer groups: list, describe, reset and import")
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="all groups with their state")
    add_common_options(listing)
    listing.add_argument(
        "--state", action="append", default=[], help="only groups in this state (repeatable)"
    )
    listing.set_defaults(func=run_command(_list))

    describe = actions.add_parser("describe", help="committed offsets, log ends, lag, owners")
    describe.add_argument("group")
    add_common_options(describe)
    describe.set_defaults(func=run_command(_describe))

    reset = actions.add_parser(
        "reset-offsets", help="move a group's committed offsets (dry run unless --execute)"
    )
    reset.add_argument("group")
    add_common_options(reset)
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,P]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every topic the group has offsets for"
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="OFFSET")
    target.add_argument("--to-timestamp", type=int, metavar="EPOCH-MS")
    target.add_argument(
        "--to-datetime", type=parse_datetime, metavar="ISO-8601", help="UTC unless a zone is given"
    )
    reset.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.set_defaults(func=run_command(_reset))

    zk = actions.add_parser(
        "import-zk-offsets",
        help="commit offsets kept in ZooKeeper by old consumers (dry run unless --execute)",
    )
    add_common_options(zk)
    zk.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]")
    zk.add_argument("--group", help="only this group (default: every group in ZooKeeper)")
    zk.add_argument("--execute", action="store_true", help="commit the offsets")
    zk.set_defaults(func=run_command(_import_zk))
