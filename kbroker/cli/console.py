"""``kbroker console-producer``, ``console-consumer`` and ``console-share-consumer``: lines in,
records out, and back.

Options every command takes, exit statuses: see kbroker.cli.ops.output.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kbroker.cli.ops.admin import OpsError
from kbroker.cli.ops.console import (
    ConsumerOptions,
    ProducerOptions,
    ShareConsumerOptions,
    run_consumer,
    run_producer,
    run_share_consumer,
)
from kbroker.cli.ops.output import (
    EXIT_OK,
    Progress,
    add_common_options,
    emit_json,
    key_value,
    run_command,
)
from kbroker.client import KafkaClient
from kbroker.share_consumer import AcknowledgementMode, ShareConsumer


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


async def _console_share_consumer(args: argparse.Namespace, client: KafkaClient) -> int:
    options = ShareConsumerOptions(
        topic=args.topic,
        group=args.group,
        max_messages=args.max_messages,
        timeout_ms=args.timeout_ms,
        release_every=args.release_every,
        reject_every=args.reject_every,
        print_key=args.print_key,
        print_offset=args.print_offset,
        print_delivery_count=args.print_delivery_count,
        key_separator=args.key_separator,
    )
    consumer = ShareConsumer(
        args.bootstrap_server,
        args.group,
        acknowledgement_mode=AcknowledgementMode.EXPLICIT,
        client=client,
    )
    progress = Progress(f"share consumer {args.topic}", interval=5.0)
    count = await run_share_consumer(consumer, options, sys.stdout, progress)
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return EXIT_OK


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def register(sub: Any) -> None:
    """``kbroker console-producer``, ``console-consumer`` and ``console-share-consumer``."""
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
        type=key_value,
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

    share = sub.add_parser(
        "console-share-consumer",
        help="print a topic's records as a member of a share group, acknowledging each",
    )
    add_common_options(share)
    share.add_argument("--topic", required=True)
    share.add_argument(
        "--group",
        default="console-share-consumer",
        help="the share group (default console-share-consumer, as Kafka's tool)",
    )
    share.add_argument("--max-messages", type=_positive, metavar="N")
    share.add_argument(
        "--timeout-ms", type=int, metavar="MS", help="exit after MS without a record"
    )
    share.add_argument(
        "--release-every",
        type=_positive,
        metavar="N",
        help="release every Nth record (delivered again) instead of accepting it",
    )
    share.add_argument(
        "--reject-every",
        type=_positive,
        metavar="N",
        help="reject every Nth record (never delivered again); wins over --release-every",
    )
    share.add_argument("--print-key", action="store_true")
    share.add_argument("--print-offset", action="store_true")
    share.add_argument("--print-delivery-count", action="store_true")
    share.add_argument("--key-separator", default="\t", metavar="SEP")
    share.set_defaults(func=run_command(_console_share_consumer))
