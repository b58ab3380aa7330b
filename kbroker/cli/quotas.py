"""``kbroker quotas``: describe and alter client quotas (what ``kafka-configs.sh
--entity-type users|clients`` does for quotas), over the Kafka protocol.

    kbroker quotas describe [--user U | --user-default] [--client-id C | --client-default]
    kbroker quotas alter --user U [--client-id C] --add producer_byte_rate=1048576
                         [--delete consumer_byte_rate]
"""

from __future__ import annotations

import argparse
from typing import Any

from kbroker.cli.ops.output import EXIT_OK, add_common_options, emit_json, run_command, table
from kbroker.cli.ops.quotas import alter_quotas, describe_quotas
from kbroker.client import KafkaClient


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    entity: list[tuple[str, str | None]] = []
    if args.user is not None or args.user_default:
        entity.append(("user", None if args.user_default else args.user))
    if args.client_id is not None or args.client_default:
        entity.append(("client-id", None if args.client_default else args.client_id))
    return entity


def _name(name: str | None) -> str:
    return "<default>" if name is None else name


async def _describe(args: argparse.Namespace, client: KafkaClient) -> int:
    quotas = await describe_quotas(client, _entity(args))
    if args.json:
        emit_json(
            [
                {"entity": {t: n for t, n in key}, "quotas": values}
                for key, values in sorted(quotas.items(), key=lambda kv: repr(kv[0]))
            ]
        )
        return EXIT_OK
    rows = [
        (
            ", ".join(f"{t}={_name(n)}" for t, n in key),
            ", ".join(f"{k}={v:g}" for k, v in sorted(values.items())),
        )
        for key, values in sorted(quotas.items(), key=lambda kv: repr(kv[0]))
    ]
    print(table(("ENTITY", "QUOTAS"), rows))
    return EXIT_OK


async def _alter(args: argparse.Namespace, client: KafkaClient) -> int:
    await alter_quotas(client, _entity(args), dict(args.add), args.delete)
    print("ok")
    return EXIT_OK


def _quota(text: str) -> tuple[str, float]:
    key, sep, value = text.partition("=")
    if sep and key:
        try:
            return key, float(value)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"expected KEY=NUMBER, got {text!r}")


def _add_entity_options(parser: argparse.ArgumentParser) -> None:
    user = parser.add_mutually_exclusive_group()
    user.add_argument("--user", help="a user principal name")
    user.add_argument("--user-default", action="store_true", help="the default user")
    client = parser.add_mutually_exclusive_group()
    client.add_argument("--client-id")
    client.add_argument("--client-default", action="store_true", help="the default client id")


def register(sub: Any) -> None:
    quotas = sub.add_parser("quotas", help="describe and alter client quotas")
    actions = quotas.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = actions.add_parser("describe", help="quotas of the matching entities")
    _add_entity_options(describe)
    add_common_options(describe)
    describe.set_defaults(func=run_command(_describe))
    alter = actions.add_parser("alter", help="set or delete quotas of one entity")
    _add_entity_options(alter)
    alter.add_argument(
        "--add",
        action="append",
        type=_quota,
        default=[],
        metavar="KEY=VALUE",
        help="producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate",
    )
    alter.add_argument("--delete", action="append", default=[], metavar="KEY")
    add_common_options(alter)
    alter.set_defaults(func=run_command(_alter))
