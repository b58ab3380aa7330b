"""``kbroker schema-registry``: the schema registry as a process of its own, beside any
Kafka-compatible cluster (kbroker, Apache Kafka, ...), keeping its state in the cluster's
``_schemas`` topic like Confluent's registry.

    kbroker schema-registry --bootstrap-server HOST:PORT [--listeners http://0.0.0.0:8081]
                            [--command-config FILE] [--replication-factor 3]

It is the only writer of ``_schemas``: run one per cluster (the brokers' own registry,
``schema.registry.listeners``, is the replicated one). SIGINT or SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from urllib.parse import urlsplit

from kbroker import logfmt
from kbroker.cli.ops.admin import parse_bootstrap
from kbroker.cli.ops.output import DEFAULT_BOOTSTRAP, EXIT_FAILED, EXIT_OK
from kbroker.client import KafkaClient
from kbroker.client_core.security import SecurityConfigError, security_config
from kbroker.config import load_properties
from kbroker.schema_registry.http import HttpSecurity, RegistryApp
from kbroker.schema_registry.service import RegistryService
from kbroker.schema_registry.store import ClientStore
from wire.errors import KafkaError

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


async def _writer_url() -> str | None:
    return None


async def _serve(args: argparse.Namespace) -> int:
    listeners = []
    for entry in args.listeners.split(","):
        parts = urlsplit(entry.strip())
        if parts.scheme != "http" or parts.port is None:
            print(
                f"kbroker: error: --listeners {entry!r}: expected http://host:port", file=sys.stderr
            )
            return EXIT_FAILED
        listeners.append(("http", parts.hostname or "", parts.port))
    props = load_properties(args.command_config) if args.command_config else {}
    client = KafkaClient(
        parse_bootstrap(args.bootstrap_server),
        client_id="kbroker-schema-registry",
        timeout=args.timeout,
        security=security_config(props),
    )
    service = RegistryService(ClientStore(client, args.replication_factor, args.timeout))
    app = RegistryApp(service, HttpSecurity(), _writer_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await service.start()
        ports = await app.start(listeners, None)
        print(f"schema registry ready on port(s) {', '.join(map(str, ports))}", flush=True)
        await stop.wait()
    finally:
        await app.close()
        await service.stop()
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    logfmt.configure(args.log_level, LOG_FORMAT)
    try:
        return asyncio.run(_serve(args))
    except (OSError, TimeoutError, KafkaError, SecurityConfigError) as exc:
        print(f"kbroker: error: {exc or type(exc).__name__}", file=sys.stderr)
        return EXIT_FAILED


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "schema-registry", help="run a schema registry beside a Kafka-compatible cluster"
    )
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT")
    parser.add_argument("--command-config", metavar="FILE", help="Kafka client properties")
    parser.add_argument(
        "--listeners", default="http://0.0.0.0:8081", help="http://host:port, comma-separated"
    )
    parser.add_argument("--replication-factor", type=int, default=3, help="of a new _schemas")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    parser.set_defaults(func=_run)
