"""``kbroker users``: SCRAM users (what ``kafka-configs.sh --entity-type users
--alter --add-config 'SCRAM-SHA-512=[password=...]'`` does), over the Kafka protocol, or
straight into ZooKeeper before any broker runs (as ``kafka-configs.sh --zookeeper`` did, to
create the brokers' own inter-broker user).

    kbroker users list [--user U ...]
    kbroker users add USER --password P [--mechanism SCRAM-SHA-512 ...] [--iterations N]
                            [--zookeeper HOST:PORT[/chroot]]
    kbroker users delete USER [--mechanism SCRAM-SHA-256 ...] [--zookeeper ...]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kbroker.cli.ops.admin import OpsError
from kbroker.cli.ops.output import (
    EXIT_FAILED,
    EXIT_OK,
    add_common_options,
    emit_json,
    run_command,
    table,
)
from kbroker.cli.ops.users import DEFAULT_MECHANISMS, alter_users, check_mechanisms, describe_users
from kbroker.client import KafkaClient
from kbroker.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, make_credential

ZOOKEEPER_TIMEOUT_SECONDS = 15.0


async def _list(args: argparse.Namespace, client: KafkaClient) -> int:
    users = await describe_users(client, args.user or None)
    if args.json:
        emit_json(
            {u: [{"mechanism": m, "iterations": i} for m, i in creds] for u, creds in users.items()}
        )
        return EXIT_OK
    rows = [(u, m, i) for u, creds in sorted(users.items()) for m, i in creds]
    print(table(("USER", "MECHANISM", "ITERATIONS"), rows))
    return EXIT_OK


async def _add(args: argparse.Namespace, client: KafkaClient) -> int:
    await alter_users(
        client,
        args.user,
        password=args.password,
        add=args.mechanism or DEFAULT_MECHANISMS,
        iterations=args.iterations,
    )
    print("ok")
    return EXIT_OK


async def _delete(args: argparse.Namespace, client: KafkaClient) -> int:
    mechanisms = args.mechanism
    if not mechanisms:
        known = await describe_users(client, [args.user])
        mechanisms = [m for m, _ in known.get(args.user, [])]
    await alter_users(client, args.user, delete=mechanisms)
    print("ok")
    return EXIT_OK


def _in_zookeeper(args: argparse.Namespace) -> int:
    """add/delete with --zookeeper: write the user's znode directly."""
    from controller.credential_store import ScramChange, zookeeper_problem
    from controller.zk_backend import write_scram_credentials

    try:
        mechanisms = check_mechanisms(args.mechanism or DEFAULT_MECHANISMS)
    except OpsError as exc:
        print(f"kbroker: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    problem = zookeeper_problem(args.user)
    if problem is not None:
        print(f"kbroker: error: {problem}", file=sys.stderr)
        return EXIT_FAILED
    changes: list[ScramChange] = [
        (
            args.user,
            m,
            None
            if args.action == "delete"
            else make_credential(m, args.password, iterations=args.iterations),
        )
        for m in mechanisms
    ]
    try:
        write_scram_credentials(args.zookeeper, changes, ZOOKEEPER_TIMEOUT_SECONDS)
    except Exception as exc:  # kazoo raises its own timeouts and session errors
        message = str(exc) or type(exc).__name__
        print(f"kbroker: error: ZooKeeper {args.zookeeper}: {message}", file=sys.stderr)
        return EXIT_FAILED
    print("ok")
    return EXIT_OK


def _iterations(text: str) -> int:
    value = int(text)
    if not MIN_ITERATIONS <= value <= MAX_ITERATIONS:
        raise argparse.ArgumentTypeError(f"between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    return value


def _dispatch(protocol: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        if getattr(args, "zookeeper", None):
            return _in_zookeeper(args)
        return int(protocol(args))

    return run


def register(sub: Any) -> None:
    users = sub.add_parser("users", help="SCRAM users: list, add, delete")
    actions = users.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="users with SCRAM credentials")
    listing.add_argument("--user", action="append", default=[], help="only this user (repeatable)")
    add_common_options(listing)
    listing.set_defaults(func=run_command(_list))
    for name, command, text in (
        ("add", _add, "set a user's password (for each mechanism)"),
        ("delete", _delete, "remove a user's credentials"),
    ):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("user")
        if name == "add":
            parser.add_argument("--password", required=True)
            parser.add_argument(
                "--iterations", type=_iterations, default=MIN_ITERATIONS, help="PBKDF2 rounds"
            )
        parser.add_argument(
            "--mechanism",
            action="append",
            default=[],
            help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: both)",
        )
        parser.add_argument(
            "--zookeeper",
            metavar="HOST:PORT[/CHROOT]",
            help="write to the cluster's ZooKeeper directly (before any broker runs)",
        )
        add_common_options(parser)
        parser.set_defaults(func=_dispatch(run_command(command)))
