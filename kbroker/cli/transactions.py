"""``kbroker transactions``: what Kafka's kafka-transactions.sh shows, over the protocol.

kbroker transactions list [--state S ...] [--producer-id P ...]
kbroker transactions describe TRANSACTIONAL_ID
kbroker transactions find-hanging [--max-transaction-timeout MS]
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any

from kbroker.cli.ops.output import EXIT_OK, add_common_options, emit_json, ids, run_command, table
from kbroker.cli.ops.transactions import (
    OpenTransaction,
    describe_transaction,
    hanging,
    list_transactions,
    max_transaction_timeout_ms,
    open_transactions,
)
from kbroker.client import KafkaClient


def timestamp(ms: int) -> str:
    """An epoch millisecond time as ISO 8601 UTC; "-" for none (-1)."""
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def open_transaction_rows(transactions: list[OpenTransaction], now_ms: int) -> list[tuple]:
    return [
        (
            f"{t.topic}-{t.partition}",
            t.producer_id,
            t.producer_epoch,
            t.start_offset,
            timestamp(t.last_timestamp_ms),
            f"{(now_ms - t.last_timestamp_ms) // 1000} s",
        )
        for t in transactions
    ]


OPEN_TRANSACTION_HEADERS = (
    "PARTITION",
    "PRODUCER_ID",
    "EPOCH",
    "START_OFFSET",
    "LAST_WRITE",
    "AGE",
)


def open_transaction_json(t: OpenTransaction) -> dict[str, object]:
    return {
        "topic": t.topic,
        "partition": t.partition,
        "producer_id": t.producer_id,
        "producer_epoch": t.producer_epoch,
        "start_offset": t.start_offset,
        "last_timestamp_ms": t.last_timestamp_ms,
        "coordinator_epoch": t.coordinator_epoch,
    }


async def _list(args: argparse.Namespace, client: KafkaClient) -> int:
    found = await list_transactions(client, args.state, args.producer_id)
    if args.json:
        emit_json(
            [
                {
                    "transactional_id": t.transactional_id,
                    "coordinator": t.coordinator,
                    "producer_id": t.producer_id,
                    "state": t.state,
                }
                for t in found
            ]
        )
        return EXIT_OK
    rows = [(t.transactional_id, t.coordinator, t.producer_id, t.state) for t in found]
    print(table(("TRANSACTIONAL_ID", "COORDINATOR", "PRODUCER_ID", "STATE"), rows))
    return EXIT_OK


async def _describe(args: argparse.Namespace, client: KafkaClient) -> int:
    d = await describe_transaction(client, args.transactional_id)
    if args.json:
        emit_json(
            {
                "transactional_id": d.transactional_id,
                "coordinator": d.coordinator,
                "state": d.state,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "timeout_ms": d.timeout_ms,
                "start_time_ms": d.start_time_ms,
                "partitions": [[t, p] for t, p in d.partitions],
            }
        )
        return EXIT_OK
    rows = [
        (
            d.transactional_id,
            d.coordinator,
            d.state,
            d.producer_id,
            d.producer_epoch,
            d.timeout_ms,
            timestamp(d.start_time_ms),
            ",".join(f"{t}-{p}" for t, p in d.partitions) or "-",
        )
    ]
    headers = (
        "TRANSACTIONAL_ID",
        "COORDINATOR",
        "STATE",
        "PRODUCER_ID",
        "EPOCH",
        "TIMEOUT_MS",
        "STARTED",
        "PARTITIONS",
    )
    print(table(headers, rows))
    return EXIT_OK


async def _find_hanging(args: argparse.Namespace, client: KafkaClient) -> int:
    limit = args.max_transaction_timeout
    if limit is None:
        limit = await max_transaction_timeout_ms(client)
    now_ms = int(time.time() * 1000)
    open_now = await open_transactions(client)
    found = hanging(open_now.found, now_ms, limit)
    if args.json:
        emit_json([open_transaction_json(t) for t in found])
        return EXIT_OK
    print(table(OPEN_TRANSACTION_HEADERS, open_transaction_rows(found, now_ms)))
    if open_now.unreachable:
        print(f"not asked (unreachable from here): brokers {ids(open_now.unreachable)}")
    return EXIT_OK


def register(sub: Any) -> None:
    transactions = sub.add_parser(
        "transactions", help="list, describe and find hanging transactions"
    )
    actions = transactions.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="transactional ids and their states, per coordinator")
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        help="only this state (Empty, Ongoing, PrepareCommit, ...; repeatable)",
    )
    listing.add_argument(
        "--producer-id",
        action="append",
        type=int,
        default=[],
        help="only this producer id (repeatable)",
    )
    add_common_options(listing)
    listing.set_defaults(func=run_command(_list))
    describe = actions.add_parser(
        "describe", help="state, producer id and epoch, timeout, start time, partitions"
    )
    describe.add_argument("transactional_id")
    add_common_options(describe)
    describe.set_defaults(func=run_command(_describe))
    find = actions.add_parser(
        "find-hanging",
        help="partitions holding a transaction open longer than any coordinator allows",
    )
    find.add_argument(
        "--max-transaction-timeout",
        type=int,
        metavar="MS",
        help="open this long counts as hanging (default: the brokers' transaction.max.timeout.ms)",
    )
    add_common_options(find)
    find.set_defaults(func=run_command(_find_hanging))
