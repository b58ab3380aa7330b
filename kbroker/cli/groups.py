"""``kbroker groups``: groups and their committed offsets, over the Kafka protocol.

- ``list``: every group on every broker, with its type (classic, consumer for KIP-848's
  protocol, share for KIP-932), protocol type and state; ``--type`` and ``--state`` filter
  as kafka-consumer-groups.sh --list --type/--state do (ListGroups v5 filters).
- ``describe GROUP``: like ``kafka-consumer-groups --describe`` (with ``--state --verbose``
  and ``--members --verbose`` in one): per partition the committed offset, the log end
  offset, the lag, and the member that owns it; then the members. A consumer group shows its
  group epoch, target assignment epoch and assignor, and per member its epoch, subscription
  (topic names or regular expression), assigned and target partitions; a classic group the
  members' "consumer" protocol assignments; a share group its start offset per partition
  (the lag counted from there) and its members' assignments.
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
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kbroker.cli.ops import groups as ops_groups
from kbroker.cli.ops.admin import OpsError
from kbroker.cli.ops.groups import (
    CLASSIC,
    CONSUMER,
    SHARE,
    GroupDescription,
    MemberDescription,
    ResetTarget,
    lag_rows,
)
from kbroker.cli.ops.output import EXIT_OK, add_common_options, emit_json, run_command, table
from kbroker.client import LATEST, KafkaClient, TopicPartition

GROUP_TYPES = (CLASSIC, CONSUMER, SHARE, "streams")

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


def add_topic_scope(parser: argparse.ArgumentParser) -> None:
    """The partitions an offsets reset applies to: --topic TOPIC[:P,P] (repeatable) or
    --all-topics, as Kafka's group tools take them."""
    scope = parser.add_mutually_exclusive_group(required=True)
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


def parse_datetime(text: str) -> int:
    """ISO 8601 to epoch milliseconds; a time without a zone is UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date-time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_group_types(text: str) -> list[str]:
    """``consumer`` or ``classic,share``: the group types ListGroups v5 knows (KIP-848; streams
    groups are Kafka's, KIP-1071), in any case."""
    types = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [t for t in types if t not in GROUP_TYPES]
    if unknown or not types:
        raise argparse.ArgumentTypeError(
            f"unknown group type in {text!r} (one of {', '.join(GROUP_TYPES)})"
        )
    return types


def parse_states(text: str) -> list[str]:
    """``Stable`` or ``Empty,Assigning``; the broker compares states ignoring case."""
    states = [s.strip() for s in text.split(",") if s.strip()]
    if not states:
        raise argparse.ArgumentTypeError(f"no state in {text!r}")
    return states


def parse_zk_offset(data: bytes) -> int:
    """A ZooKeeper offset node holds the offset as decimal text."""
    text = data.decode("ascii").strip()
    if not text.lstrip("-").isdigit():
        raise ValueError(f"not an offset: {text!r}")
    return int(text)


# --- plumbing -------------------------------------------------------------------------------


# --- commands -------------------------------------------------------------------------------


async def _list(args: argparse.Namespace, client: KafkaClient) -> int:
    types = [t for chosen in args.type for t in chosen]
    states = [s for chosen in args.state for s in chosen]
    listed = await ops_groups.list_groups(client, types, states)
    if args.json:
        emit_json(
            [
                {
                    "group": g.group_id,
                    "type": g.group_type,
                    "protocol_type": g.protocol_type,
                    "state": g.state,
                }
                for g in listed
            ]
        )
    else:
        print(
            table(
                ("GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"),
                [(g.group_id, g.group_type, g.protocol_type or "-", g.state) for g in listed],
            )
        )
    return EXIT_OK


def format_partitions(partitions: Iterable[TopicPartition]) -> str:
    """``orders:0,1;audit:2``, as kafka-consumer-groups.sh --members --verbose prints an
    assignment; ``-`` for none."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def format_subscription(member: MemberDescription) -> str:
    """Topic names, and a regular expression between slashes; ``-`` for none."""
    parts = list(member.subscription)
    if member.subscription_regex:
        parts.append(f"/{member.subscription_regex}/")
    return ",".join(parts) or "-"


def _member_json(member: MemberDescription, group: GroupDescription) -> dict[str, Any]:
    def partitions(tps: Iterable[TopicPartition]) -> list[dict[str, Any]]:
        return [{"topic": t, "partition": p} for t, p in tps]

    described: dict[str, Any] = {
        "member_id": member.member_id,
        "instance_id": member.instance_id,
        "client_id": member.client_id,
        "host": member.host,
        "assigned": partitions(member.assignment),
    }
    if group.group_type != CLASSIC:
        described.update(
            rack=member.rack,
            member_epoch=member.epoch,
            subscribed_topics=list(member.subscription),
        )
    if group.group_type == CONSUMER:
        described.update(
            subscribed_topic_regex=member.subscription_regex, target=partitions(member.target)
        )
    return described


def _members_table(group: GroupDescription) -> str:
    if group.group_type == CLASSIC:
        return table(
            ("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNED"),
            [
                (
                    m.member_id,
                    m.instance_id or "-",
                    m.client_id,
                    m.host,
                    format_partitions(m.assignment),
                )
                for m in group.members
            ],
        )
    consumer = group.group_type == CONSUMER
    headers = ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "RACK", "MEMBER-EPOCH"]
    headers += ["SUBSCRIPTION", "ASSIGNED"] + (["TARGET"] if consumer else [])
    rows = []
    for m in group.members:
        row: list[object] = [m.member_id, m.instance_id or "-", m.client_id, m.host]
        row += [m.rack or "-", m.epoch, format_subscription(m), format_partitions(m.assignment)]
        if consumer:
            row.append(format_partitions(m.target))
        rows.append(row)
    return table(headers, rows)


async def _describe(args: argparse.Namespace, client: KafkaClient) -> int:
    described = await ops_groups.describe_any_group(client, args.group)
    share = described.group_type == SHARE
    broker_lag: dict[TopicPartition, int | None] = {}
    if share:
        # A share group has no committed offsets: its start offset per partition (KIP-932) is
        # where it reads from; the broker counts its lag (KIP-1226), else it is counted here
        # from the start offset.
        progress = await ops_groups.share_group_progress(client, args.group)
        committed = {tp: (start, "") for tp, (start, _) in progress.items()}
        broker_lag = {tp: lag for tp, (_, lag) in progress.items()}
        owners = {}
    else:
        committed = await client.committed(args.group)
        owners = ops_groups.owners(described)
    partitions = sorted(set(committed) | set(owners))
    ends = await client.list_offsets(partitions, LATEST) if partitions else {}
    rows = [
        replace(r, reported_lag=broker_lag.get((r.topic, r.partition)))
        for r in lag_rows(committed, ends, owners)
    ]
    classic = described.group_type == CLASSIC
    if args.json:
        offset_key = "start_offset" if share else "committed_offset"
        emit_json(
            {
                "group": args.group,
                "type": described.group_type,
                "state": described.state,
                "protocol_type": described.protocol_type,
                "protocol": described.assignor if classic else None,
                "assignor": None if classic else described.assignor,
                "group_epoch": described.epoch,
                "assignment_epoch": described.assignment_epoch,
                "members": [_member_json(m, described) for m in described.members],
                "partitions": [
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        offset_key: r.committed,
                        "log_end_offset": r.log_end,
                        "lag": r.lag,
                    }
                    | (
                        {}
                        if share
                        else {
                            "member_id": r.member_id or None,
                            "host": r.host or None,
                            "client_id": r.client_id or None,
                        }
                    )
                    for r in rows
                ],
            }
        )
        return EXIT_OK
    members = len(described.members)
    print(
        f"Group {args.group}: type {described.group_type}, state {described.state}, "
        f"{members} member{'s' if members != 1 else ''}"
    )
    if classic:
        print(f"Protocol: {described.assignor or '-'}")
    else:
        print(
            f"Group epoch: {described.epoch}, assignment epoch: {described.assignment_epoch}, "
            f"assignor: {described.assignor or '-'}"
        )
    print()
    if share:
        print(
            table(
                ("TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG"),
                [
                    (
                        r.topic,
                        r.partition,
                        "-" if r.committed is None else r.committed,
                        r.log_end,
                        "-" if r.lag is None else r.lag,
                    )
                    for r in rows
                ],
            )
        )
    else:
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
    if described.members:
        print()
        print(_members_table(described))
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

    listing = actions.add_parser("list", help="all groups with their type, protocol and state")
    add_common_options(listing)
    listing.add_argument(
        "--type",
        action="append",
        default=[],
        type=parse_group_types,
        metavar="TYPE[,TYPE]",
        help="only groups of these types: classic, consumer, share (repeatable)",
    )
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        type=parse_states,
        metavar="STATE[,STATE]",
        help="only groups in these states, e.g. Stable or Empty,Assigning (repeatable)",
    )
    listing.set_defaults(func=run_command(_list))

    describe = actions.add_parser(
        "describe", help="epochs, members and their partitions; offsets, log ends and lag"
    )
    describe.add_argument("group")
    add_common_options(describe)
    describe.set_defaults(func=run_command(_describe))

    reset = actions.add_parser(
        "reset-offsets", help="move a group's committed offsets (dry run unless --execute)"
    )
    reset.add_argument("group")
    add_common_options(reset)
    add_topic_scope(reset)
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
