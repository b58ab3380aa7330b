"""``kbroker topics``: create, list, describe, alter and delete topics.

Options every command takes, exit statuses: see kbroker.cli.ops.output.
"""

from __future__ import annotations

import argparse
from typing import Any

from kbroker.cli.ops import admin
from kbroker.cli.ops.admin import OpsError
from kbroker.cli.ops.output import (
    EXIT_OK,
    Progress,
    add_common_options,
    emit_json,
    ids,
    key_value,
    run_command,
    table,
)
from kbroker.client import KafkaClient
from wire.errors import ErrorCode

TOPIC_WAIT_SECONDS = 60.0


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


def register(sub: Any) -> None:
    """``kbroker topics ...``."""
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
        "--config", type=key_value, action="append", default=[], metavar="KEY=VALUE"
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
    alter.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY")
    alter.set_defaults(func=run_command(_topics_alter))

    delete = actions.add_parser("delete", help="delete a topic and wait until it is gone")
    add_common_options(delete)
    delete.add_argument("--topic", required=True)
    delete.add_argument("--if-exists", action="store_true")
    delete.set_defaults(func=run_command(_topics_delete))
