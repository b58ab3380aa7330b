"""The ``kbroker`` command.

``kbroker start [server.properties] [--override key=value ...]`` runs a broker in the
foreground. Configuration precedence: the properties file, then ``KBROKER_<NAME>`` environment
variables, then ``--override`` flags (see kbroker.config). A configuration error is reported on
stderr, naming the property, with exit status 2.

The other subcommands are clients of a running cluster, one module each in this package
(``topics``, ``console``, ``cluster``, ``groups``, ``share-groups``, ``quotas``,
``transactions``, ``users``, ``client-metrics``, ``mirrors``, ``audit``, and ``console``: the web
console), over the
protocol operations of ``kbroker.cli.ops``; ``schemas`` is a client of a schema registry's REST API,
and ``schema-registry`` runs one beside any Kafka-compatible cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kbroker import logfmt
from kbroker.cli import (
    acls,
    audit,
    client_metrics,
    cluster,
    console,
    features,
    groups,
    mirrors,
    quotas,
    schema_registry,
    schemas,
    share_groups,
    topics,
    transactions,
    users,
    web_console,
)
from kbroker.config import BrokerConfig, ConfigError, resolve_properties

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
EXIT_CONFIG_ERROR = 2
EXIT_START_FAILED = 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbroker", description="A message broker that speaks the Kafka protocol."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    start = sub.add_parser("start", help="run a broker in the foreground")
    start.add_argument("properties", nargs="?", help="a Kafka server.properties file (optional)")
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a property, over the file and KBROKER_* environment variables (repeatable)",
    )
    start.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging threshold (default INFO)",
    )
    start.set_defaults(func=_start)
    for commands in (
        topics,
        console,
        cluster,
        groups,
        share_groups,
        quotas,
        acls,
        transactions,
        users,
        client_metrics,
        features,
        mirrors,
        audit,
        schemas,
        schema_registry,
        web_console,
    ):
        commands.register(sub)
    return parser


def _configure_logging(level: str) -> None:
    logfmt.configure(level, LOG_FORMAT)


def _start(args: argparse.Namespace) -> int:
    _configure_logging(args.log_level)
    try:
        props = resolve_properties(args.properties, os.environ, args.override)
        config = BrokerConfig.from_properties(props)
    except ConfigError as e:
        print(f"kbroker: configuration error: {e}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    config.log_no_effect()
    # Imported here so the command line (and its configuration checks) works without the
    # server side being importable.
    from controller.embedded import MetadataStoreError
    from kbroker.broker import run_broker
    from kbroker.log.dir_lock import LogDirInUse

    try:
        status = run_broker(config)
    except ConfigError as e:
        print(f"kbroker: configuration error: {e}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except (MetadataStoreError, LogDirInUse) as e:
        print(f"kbroker: cannot start: {e}", file=sys.stderr)
        return EXIT_START_FAILED
    return status


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    raise SystemExit(args.func(args))
