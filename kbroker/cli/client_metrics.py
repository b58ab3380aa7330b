"""``kbroker client-metrics``: client telemetry subscriptions (KIP-714), with the options of
Kafka's ``kafka-client-metrics.sh``, over the Kafka protocol (kbroker or any Kafka 3.7+).

    kbroker client-metrics list
    kbroker client-metrics describe [--name NAME]
    kbroker client-metrics alter (--name NAME | --generate-name) [--metrics m1,m2]
                                 [--interval MS] [--match k1=v1,k2=v2]
    kbroker client-metrics delete --name NAME

``alter`` changes only the configs it is given; an empty value (``--interval ''``) resets
that config to its default. A subscription whose configs are all deleted is gone.
"""

from __future__ import annotations

import argparse
from typing import Any

from controller.embedded import kafka_uuid_string, random_kafka_uuid
from kbroker.cli.ops.admin import OpsError
from kbroker.cli.ops.client_metrics import (
    alter_subscription,
    delete_subscription,
    describe_subscriptions,
    list_subscriptions,
)
from kbroker.cli.ops.output import EXIT_OK, add_common_options, emit_json, run_command, table
from kbroker.client import KafkaClient

SELECTORS = (
    "client_id, client_instance_id, client_software_name, client_software_version, "
    "client_source_address, client_source_port"
)


async def _list(args: argparse.Namespace, client: KafkaClient) -> int:
    names = await list_subscriptions(client)
    if args.json:
        emit_json(names)
    else:
        print(table(("NAME",), [(n,) for n in names]))
    return EXIT_OK


async def _describe(args: argparse.Namespace, client: KafkaClient) -> int:
    names = await list_subscriptions(client)
    if args.name is not None:
        if args.name not in names:
            # Kafka answers any name with the defaults; like its tool, say it is not there.
            raise OpsError(f"client metrics subscription {args.name!r} does not exist")
        names = [args.name]
    found = await describe_subscriptions(client, names)
    if args.json:
        emit_json(found)
        return EXIT_OK
    rows = [
        (name, c.get("metrics", ""), c.get("interval.ms", ""), c.get("match", ""))
        for name, c in sorted(found.items())
    ]
    print(table(("NAME", "METRICS", "INTERVAL.MS", "MATCH"), rows))
    return EXIT_OK


async def _alter(args: argparse.Namespace, client: KafkaClient) -> int:
    if (args.name is None) == (not args.generate_name):
        raise OpsError("give exactly one of --name and --generate-name")
    name = args.name if args.name is not None else kafka_uuid_string(random_kafka_uuid())
    changes = {
        key: value
        for key, value in (
            ("metrics", args.metrics),
            ("interval.ms", args.interval),
            ("match", args.match),
        )
        if value is not None
    }
    await alter_subscription(client, name, changes)
    if args.json:
        emit_json({"name": name, "altered": sorted(changes)})
    else:
        print(f"altered client metrics subscription {name}")
    return EXIT_OK


async def _delete(args: argparse.Namespace, client: KafkaClient) -> int:
    await delete_subscription(client, args.name)
    if args.json:
        emit_json({"name": args.name, "deleted": True})
    else:
        print(f"deleted client metrics subscription {args.name}")
    return EXIT_OK


def register(sub: Any) -> None:
    command = sub.add_parser(
        "client-metrics", help="client telemetry subscriptions (KIP-714, kafka-client-metrics.sh)"
    )
    actions = command.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="names of the subscriptions")
    add_common_options(listing)
    listing.set_defaults(func=run_command(_list))
    describe = actions.add_parser("describe", help="configs of one or every subscription")
    describe.add_argument("--name", help="one subscription (default: all)")
    add_common_options(describe)
    describe.set_defaults(func=run_command(_describe))
    alter = actions.add_parser("alter", help="create or change a subscription")
    alter.add_argument("--name", help="the subscription")
    alter.add_argument("--generate-name", action="store_true", help="a new random name (printed)")
    alter.add_argument(
        "--metrics",
        metavar="M1,M2",
        help="metric name prefixes ('*': all); empty: reset to none",
    )
    alter.add_argument(
        "--interval", metavar="MS", help="push interval, 100-3600000 ms; empty: reset (300000)"
    )
    alter.add_argument(
        "--match",
        metavar="K1=V1,K2=V2",
        help=f"client selectors (regexes), all must match: {SELECTORS}; empty: every client",
    )
    add_common_options(alter)
    alter.set_defaults(func=run_command(_alter))
    delete = actions.add_parser("delete", help="remove a subscription")
    delete.add_argument("--name", required=True)
    add_common_options(delete)
    delete.set_defaults(func=run_command(_delete))
