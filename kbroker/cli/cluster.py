"""``kbroker cluster describe`` and ``kbroker health``: cluster-wide views.

Options every command takes, exit statuses: see kbroker.cli.ops.output.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kbroker.cli.ops import admin, transactions
from kbroker.cli.ops.output import (
    EXIT_OK,
    add_common_options,
    emit_json,
    ids,
    run_command,
    table,
)
from kbroker.cli.transactions import (
    OPEN_TRANSACTION_HEADERS,
    open_transaction_json,
    open_transaction_rows,
)
from kbroker.client import KafkaClient

# Partitions named one per line by `cluster describe` before it summarizes the rest.
LISTED_PARTITIONS = 10


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


def register(sub: Any) -> None:
    """``kbroker cluster describe`` and ``kbroker health``."""
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
