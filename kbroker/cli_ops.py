"""Operations subcommands of ``kbroker``: topics, console producer and consumer, cluster, health.

They speak the Kafka protocol (kbroker.client), so they work against any Kafka-compatible
broker. Every command takes ``--bootstrap-server HOST:PORT[,HOST:PORT]`` and ``--json``;
tables are the default output. Exit status: 0 on success, 1 when the operation failed (the
reason on stderr, prefixed ``kbroker: error:``), 2 for bad arguments (argparse).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kbroker.cli_transactions import (
    OPEN_TRANSACTION_HEADERS,
    open_transaction_json,
    open_transaction_rows,
)
from kbroker.client import KafkaClient
from kbroker.ops import admin, transactions
from kbroker.ops.admin import OpsError
from kbroker.ops.console import ConsumerOptions, ProducerOptions, run_consumer, run_producer
from kbroker.ops.output import (
    EXIT_OK,
    Progress,
    add_common_options,
    emit_json,
    ids,
    run_command,
    table,
)
from wire.errors import ErrorCode

TOPIC_WAIT_SECONDS = 60.0
# Partitions named one per line by `cluster describe` before it summarizes the rest.
LISTED_PARTITIONS = 10


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


# --- topics ---------------------------------------------------------------------------------


async def _topics_create(args: argparse.Namespace, client: KafkaClient) -> int:
    progress = Progress(f"topic {args.topic}")
    try:
        partitions, rf = await admin.create_topic(
            client,
            args.topic,
            args.partitions,
            args.replication_factor,
            dict(args.config),
            validate_only=args.validate_only,
        )
    except OpsError as exc:
        if not (args.if_not_exists and exc.code == ErrorCode.TOPIC_ALREADY_EXISTS):
            raise
        progress.done("already exists")
        return EXIT_OK
    if not args.validate_only:
        progress.update("waiting for partition leaders", force=True)
        await admin.wait_for_topic(client, args.topic, present=True, timeout=TOPIC_WAIT_SECONDS)
    state = "valid" if args.validate_only else "created"
    if args.json:
        emit_json(
            {
                "topic": args.topic,
                "partitions": partitions,
                "replication_factor": rf,
                "result": state,
            }
        )
    else:
        progress.done(f"{state} ({partitions} partitions, replication factor {rf})")
    return EXIT_OK


async def _topics_list(args: argparse.Namespace, client: KafkaClient) -> int:
    topics = await admin.describe_topics(client, None, include_internal=args.internal)
    if args.json:
        emit_json([t.name for t in topics])
    else:
        for t in topics:
            print(t.name)
    return EXIT_OK


async def _topics_describe(args: argparse.Namespace, client: KafkaClient) -> int:
    topics = await admin.describe_topics(client, args.topic or None, include_internal=True)
    configs = await admin.topic_configs(client, [t.name for t in topics])
    if args.under_replicated:
        topics = [t for t in topics if any(p.under_replicated for p in t.partitions)]
    if args.json:
        emit_json(
            [
                {
                    "topic": t.name,
                    "topic_id": t.topic_id,
                    "internal": t.internal,
                    "replication_factor": t.replication_factor,
                    "configs": configs.get(t.name, {}),
                    "partitions": [
                        {
                            "partition": p.partition,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replicas": list(p.replicas),
                            "isr": list(p.isr),
                            "offline": list(p.offline),
                        }
                        for p in t.partitions
                        if p.under_replicated or not args.under_replicated
                    ],
                }
                for t in topics
            ]
        )
        return EXIT_OK
    for t in topics:
        settings = ",".join(f"{k}={v}" for k, v in sorted(configs.get(t.name, {}).items()))
        print(
            f"Topic: {t.name}  TopicId: {t.topic_id}  PartitionCount: {len(t.partitions)}  "
            f"ReplicationFactor: {t.replication_factor}  Configs: {settings}"
        )
        rows = [
            (p.partition, p.leader, ids(p.replicas), ids(p.isr), ids(p.offline))
            for p in t.partitions
            if p.under_replicated or not args.under_replicated
        ]
        print(table(("PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"), rows))
        print()
    return EXIT_OK


async def _topics_alter(args: argparse.Namespace, client: KafkaClient) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise OpsError("nothing to alter: give --partitions, --config or --delete-config")
    done: dict[str, Any] = {"topic": args.topic}
    if args.partitions is not None:
        await admin.create_partitions(client, args.topic, args.partitions)
        await admin.wait_for_topic(client, args.topic, present=True, timeout=TOPIC_WAIT_SECONDS)
        done["partitions"] = args.partitions
    if args.config or args.delete_config:
        await admin.alter_topic_configs(client, args.topic, dict(args.config), args.delete_config)
        done["configs_set"] = dict(args.config)
        done["configs_deleted"] = list(args.delete_config)
    if args.json:
        emit_json(done)
    else:
        print(f"altered topic {args.topic}")
    return EXIT_OK


async def _topics_delete(args: argparse.Namespace, client: KafkaClient) -> int:
    progress = Progress(f"topic {args.topic}")
    try:
        await admin.delete_topic(client, args.topic)
    except OpsError as exc:
        if not (args.if_exists and exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            raise
        progress.done("does not exist")
        return EXIT_OK
    progress.update("waiting until it is gone", force=True)
    await admin.wait_for_topic(client, args.topic, present=False, timeout=TOPIC_WAIT_SECONDS)
    if args.json:
        emit_json({"topic": args.topic, "result": "deleted"})
    else:
        progress.done("deleted")
    return EXIT_OK


def _add_topics(sub: Any) -> None:
    topics = sub.add_parser("topics", help="create, list, describe, alter and delete topics")
    actions = topics.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic and wait for its leaders")
    add_common_options(create)
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="default: num.partitions")
    create.add_argument(
        "--replication-factor", type=int, default=-1, help="default: default.replication.factor"
    )
    create.add_argument(
        "--config", type=_key_value, action="append", default=[], metavar="KEY=VALUE"
    )
    create.add_argument("--if-not-exists", action="store_true")
    create.add_argument("--validate-only", action="store_true")
    create.set_defaults(func=run_command(_topics_create))

    listing = actions.add_parser("list", help="topic names")
    add_common_options(listing)
    listing.add_argument("--internal", action="store_true", help="include internal topics")
    listing.set_defaults(func=run_command(_topics_list))

    describe = actions.add_parser("describe", help="partitions, leaders, replicas, ISR, configs")
    add_common_options(describe)
    describe.add_argument("--topic", action="append", default=[], help="repeatable; default all")
    describe.add_argument(
        "--under-replicated", action="store_true", help="only partitions with ISR < replicas"
    )
    describe.set_defaults(func=run_command(_topics_describe))

    alter = actions.add_parser("alter", help="add partitions, set or delete config overrides")
    add_common_options(alter)
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, help="new total partition count")
    alter.add_argument(
        "--config", type=_key_value, action="append", default=[], metavar="KEY=VALUE"
    )
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY")
    alter.set_defaults(func=run_command(_topics_alter))

    delete = actions.add_parser("delete", help="delete a topic and wait until it is gone")
    add_common_options(delete)
    delete.add_argument("--topic", required=True)
    delete.add_argument("--if-exists", action="store_true")
    delete.set_defaults(func=run_command(_topics_delete))


# --- console producer and consumer ----------------------------------------------------------


async def _console_producer(args: argparse.Namespace, client: KafkaClient) -> int:
    options = ProducerOptions(
        topic=args.topic,
        partition=args.partition,
        key_separator=args.key_separator,
        parse_headers=args.parse_headers,
        headers=tuple(args.header),
        acks=-1 if args.acks == "all" else int(args.acks),
        batch_size=args.batch_size,
    )
    progress = Progress(f"producer {args.topic}")
    written = await run_producer(client, options, sys.stdin, progress)
    total = sum(count for _, count in written.values())
    if args.json:
        emit_json(
            {
                "topic": args.topic,
                "records": total,
                "partitions": {
                    str(p): {"first_offset": first, "records": n}
                    for p, (first, n) in sorted(written.items())
                },
            }
        )
    else:
        progress.done(f"{total} records sent to {len(written)} partition(s)")
    return EXIT_OK


async def _console_consumer(args: argparse.Namespace, client: KafkaClient) -> int:
    if args.offset is not None and not args.partition:
        raise OpsError("--offset needs --partition")
    options = ConsumerOptions(
        topic=args.topic,
        partitions=tuple(args.partition),
        from_beginning=args.from_beginning,
        offset=args.offset,
        max_messages=args.max_messages,
        timeout_ms=args.timeout_ms,
        group=args.group,
        print_key=args.print_key,
        print_headers=args.print_headers,
        print_offset=args.print_offset,
        key_separator=args.key_separator,
        as_json=args.json,
    )
    progress = Progress(f"consumer {args.topic}", interval=5.0)
    count = await run_consumer(client, options, sys.stdout, progress)
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return EXIT_OK


def _add_console(sub: Any) -> None:
    producer = sub.add_parser(
        "console-producer", help="send stdin lines as records ([KEY<SEP>]VALUE per line)"
    )
    add_common_options(producer)
    producer.add_argument("--topic", required=True)
    producer.add_argument("--partition", type=int, help="default: by key, else round-robin")
    producer.add_argument(
        "--key-separator", metavar="SEP", help="lines are KEY<SEP>VALUE (default: no key)"
    )
    producer.add_argument(
        "--parse-headers", action="store_true", help="lines start with name:value,...<TAB>"
    )
    producer.add_argument(
        "--header",
        type=_key_value,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header on every record (repeatable)",
    )
    producer.add_argument("--acks", choices=("1", "-1", "all"), default="all")
    producer.add_argument("--batch-size", type=int, default=500, help="records per request")
    producer.set_defaults(func=run_command(_console_producer))

    consumer = sub.add_parser("console-consumer", help="print a topic's records")
    add_common_options(consumer)
    consumer.add_argument("--topic", required=True)
    consumer.add_argument(
        "--partition", type=int, action="append", default=[], help="repeatable; default all"
    )
    consumer.add_argument("--from-beginning", action="store_true")
    consumer.add_argument("--offset", type=int, help="start offset (with --partition)")
    consumer.add_argument("--max-messages", type=int, metavar="N")
    consumer.add_argument(
        "--timeout-ms", type=int, metavar="MS", help="exit after MS without a record"
    )
    consumer.add_argument(
        "--group",
        help="consume as a member of this group: share its partitions, resume from and commit "
        "its offsets",
    )
    consumer.add_argument("--print-key", action="store_true")
    consumer.add_argument("--print-headers", action="store_true")
    consumer.add_argument("--print-offset", action="store_true")
    consumer.add_argument("--key-separator", default="\t", metavar="SEP")
    consumer.set_defaults(func=run_command(_console_consumer))


# --- cluster and health ---------------------------------------------------------------------


async def _cluster_describe(args: argparse.Namespace, client: KafkaClient) -> int:
    c = await admin.describe_cluster(client)
    now_ms = int(time.time() * 1000)
    open_now = await transactions.open_transactions(client)
    hanging = transactions.hanging(
        open_now.found, now_ms, await transactions.max_transaction_timeout_ms(client)
    )
    if args.json:
        emit_json(
            {
                "cluster_id": c.cluster_id,
                "controller": c.controller,
                "brokers": [{"id": b, "host": h, "port": p, "rack": r} for b, h, p, r in c.brokers],
                "topics": c.topics,
                "partitions": c.partitions,
                "under_replicated": [[t, p] for t, p in c.under_replicated],
                "offline": [[t, p] for t, p in c.offline],
                "hanging_transactions": [open_transaction_json(t) for t in hanging],
                "transactions_not_asked": open_now.unreachable,
            }
        )
        return EXIT_OK
    print(f"Cluster ID: {c.cluster_id}")
    print(f"Controller: {c.controller}")
    rows = [(b, h, p, r or "", "yes" if b == c.controller else "") for b, h, p, r in c.brokers]
    print(table(("BROKER", "HOST", "PORT", "RACK", "CONTROLLER"), rows))
    print(
        f"Topics: {c.topics}  Partitions: {c.partitions}  "
        f"Under-replicated: {len(c.under_replicated)}  Offline: {len(c.offline)}  "
        f"Hanging transactions: {len(hanging)}"
        + (
            f" (brokers {ids(open_now.unreachable)} not reachable from here)"
            if open_now.unreachable
            else ""
        )
    )
    for label, partitions in (("under-replicated", c.under_replicated), ("offline", c.offline)):
        for topic, partition in partitions[:LISTED_PARTITIONS]:
            print(f"  {label}: {topic}-{partition}")
        if len(partitions) > LISTED_PARTITIONS:
            print(f"  ... {len(partitions) - LISTED_PARTITIONS} more {label} (see --json)")
    if hanging:
        print("Hanging transactions (see kbroker transactions find-hanging):")
        print(table(OPEN_TRANSACTION_HEADERS, open_transaction_rows(hanging, now_ms)))
    return EXIT_OK


async def _health(args: argparse.Namespace, client: KafkaClient) -> int:
    cluster_id, brokers, controller = await admin.health(client)
    if args.json:
        emit_json(
            {"status": "ok", "cluster_id": cluster_id, "brokers": brokers, "controller": controller}
        )
    else:
        print(f"ok: cluster {cluster_id}, {brokers} broker(s), controller {controller}")
    return EXIT_OK


def _add_cluster(sub: Any) -> None:
    cluster = sub.add_parser("cluster", help="cluster-wide views")
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = actions.add_parser(
        "describe",
        help="brokers, controller, under-replicated and offline partitions, hanging transactions",
    )
    add_common_options(describe)
    describe.set_defaults(func=run_command(_cluster_describe))

    health = sub.add_parser(
        "health", help="exit 0 when the broker answers ApiVersions and Metadata"
    )
    add_common_options(health, timeout=5.0)
    health.set_defaults(func=run_command(_health))


def register(sub: Any) -> None:
    """Add the operations subcommands to ``kbroker``'s subparsers."""
    _add_topics(sub)
    _add_console(sub)
    _add_cluster(sub)
