"""``kbroker console``: the web console (kbroker.console) as its own process beside any
Kafka-compatible cluster.

It binds to 127.0.0.1:8080 unless ``--listen`` says otherwise, serves HTTPS with
``--tls-cert``/``--tls-key``, asks for HTTP basic authentication with ``--basic-auth-file``
(``user:password`` lines), and changes nothing in the cluster unless ``--allow-writes`` is
given. The cluster connection takes Kafka's client properties from ``--command-config``
(TLS, SASL), as the other commands do. Once listening it prints its address on stdout; it
stops on SIGINT or SIGTERM. The cluster need not be up when it starts: pages say what cannot
be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import ssl
import sys
from pathlib import Path
from typing import Any

from kbroker import logfmt
from kbroker.cli.ops.admin import OpsError, parse_bootstrap
from kbroker.cli.ops.output import DEFAULT_BOOTSTRAP, EXIT_FAILED, EXIT_OK
from kbroker.client_core.security import SecurityConfigError, security_config
from kbroker.config import ConfigError, load_properties

DEFAULT_LISTEN = "127.0.0.1:8080"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _credentials(text: str) -> tuple[str, str]:
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise argparse.ArgumentTypeError("expected USER:PASSWORD")
    return user, password


def _server_tls(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    if cert is None and key is None:
        return None
    if cert is None:
        raise OpsError("--tls-key needs --tls-cert")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise OpsError(f"TLS certificate or key: {exc}") from None
    return context


async def _serve(args: argparse.Namespace) -> int:
    # Imported here: the other commands need neither aiohttp nor the templates.
    from aiohttp import web

    from kbroker.client import KafkaClient
    from kbroker.console.app import build_app
    from kbroker.console.auth import load_users
    from kbroker.console.context import DEFAULT_VENDOR_DIR, Console
    from kbroker.console.sampler import Sampler
    from kbroker.console.samples import SampleStore
    from kbroker.console.schemas import RegistryClient

    bootstrap = parse_bootstrap(args.bootstrap_server)
    props = load_properties(args.command_config) if args.command_config else {}
    security = security_config(props)
    tls = _server_tls(args.tls_cert, args.tls_key)
    users = load_users(Path(args.basic_auth_file)) if args.basic_auth_file else {}
    client = KafkaClient(
        bootstrap,
        client_id=props.get("client.id", "kbroker-console"),
        timeout=args.timeout,
        security=security,
    )
    store = SampleStore()
    registry = None
    if args.schema_registry:
        registry = RegistryClient(args.schema_registry, args.schema_registry_user)
    console = Console(
        client=client,
        bootstrap=args.bootstrap_server,
        store=store,
        sampler=Sampler(client, store, args.sample_interval, args.metrics_url),
        allow_writes=args.allow_writes,
        users=users,
        registry=registry,
        vendor_dir=Path(args.assets) if args.assets else DEFAULT_VENDOR_DIR,
    )
    runner = web.AppRunner(build_app(console), access_log=None)
    await runner.setup()
    host, port = args.listen
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise OpsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = runner.addresses[0][1] if runner.addresses else port
    scheme = "https" if tls else "http"
    shown_host = f"[{host}]" if ":" in host else host
    mode = "writes allowed" if args.allow_writes else "read-only"
    print(
        f"kbroker console: {scheme}://{shown_host}:{bound}/ "
        f"(cluster {args.bootstrap_server}, {mode})",
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from kbroker.console.auth import AuthConfigError

    # Warnings (a sample of the cluster that failed) with a time, as the broker logs; the
    # address line stays alone on stdout.
    logfmt.configure("WARNING", LOG_FORMAT)
    try:
        return asyncio.run(_serve(args))
    except (OpsError, ConfigError, SecurityConfigError, AuthConfigError) as exc:
        print(f"kbroker: error: {exc}", file=sys.stderr)
        return EXIT_FAILED


def register(sub: Any) -> None:
    """Add ``console`` (beside ``console-producer`` and ``console-consumer``)."""
    parser = sub.add_parser(
        "console", help="the web console: a cluster in a browser (read-only by default)"
    )
    parser.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker(s) of the cluster, comma-separated (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties for the cluster (security.protocol, sasl.*, ssl.*)",
    )
    parser.add_argument(
        "--listen",
        type=parse_listen,
        default=parse_listen(DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"where to serve (default {DEFAULT_LISTEN}; port 0 picks a free one)",
    )
    parser.add_argument(
        "--allow-writes",
        action="store_true",
        help="allow creating and deleting topics, editing configs, resetting offsets, producing",
    )
    parser.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this PEM chain")
    parser.add_argument("--tls-key", metavar="FILE", help="the PEM private key of --tls-cert")
    parser.add_argument(
        "--basic-auth-file", metavar="FILE", help="require HTTP basic auth: user:password lines"
    )
    parser.add_argument(
        "--schema-registry", metavar="URL", help="decode Avro, Protobuf and JSON Schema records"
    )
    parser.add_argument(
        "--schema-registry-user",
        type=_credentials,
        metavar="USER:PASSWORD",
        help="basic auth for the schema registry",
    )
    parser.add_argument(
        "--metrics-url",
        action="append",
        default=[],
        metavar="URL",
        help="a kbroker broker's Prometheus endpoint (repeatable): per-topic bytes in and out",
    )
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often the charts' samples are taken (default 10)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="time limit for each request to the cluster (default 15)",
    )
    parser.add_argument(
        "--assets",
        default=os.environ.get("KBROKER_CONSOLE_ASSETS"),
        metavar="DIR",
        help="where the charting library's package is (uplot/dist/...); default "
        "$KBROKER_CONSOLE_ASSETS, else build/console-web/node_modules of the checkout",
    )
    parser.set_defaults(func=_run)
