"""Output of the operations commands: aligned text tables, JSON, progress on stderr, and the
options and error reporting every command shares.

Tables are for people: a header row, columns padded to the widest cell, two spaces between
columns. ``--json`` prints one JSON document instead, for scripts. Progress lines go to
stderr so stdout stays clean for data; on a terminal they overwrite each other.

Every command (``kbroker topics|console-*|cluster|health|groups ...``) takes
``--bootstrap-server``, ``--command-config``, ``--json`` and ``--timeout``
(``add_common_options``) and runs through
``run_command``: one client for its duration; a failure prints ``kbroker: error: <reason>`` on
stderr and exits with status 1 (argparse exits with 2 for bad arguments).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TextIO

from kbroker.cli.ops.admin import OpsError, describe_kafka_error, parse_bootstrap
from kbroker.client import KafkaClient
from kbroker.client_core.security import SecurityConfigError, security_config
from kbroker.config import ConfigError, load_properties
from wire.errors import KafkaError

EXIT_OK = 0
EXIT_FAILED = 1
DEFAULT_BOOTSTRAP = "localhost:9092"

# A command: the parsed arguments and a connected client in, the exit status out.
Command = Callable[[argparse.Namespace, KafkaClient], Awaitable[int]]


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Render ``rows`` under ``headers`` with left-aligned, padded columns."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def emit_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(value, indent=2, sort_keys=True), file=out or sys.stdout)


def ids(values: Sequence[int]) -> str:
    """Broker id lists as Kafka's tools print them: ``1,2,3``."""
    return ",".join(str(v) for v in values)


class Progress:
    """Rate-limited progress on stderr: rewritten in place on a terminal, one line per update
    (at most every ``interval`` seconds) otherwise."""

    def __init__(self, label: str, *, out: TextIO | None = None, interval: float = 1.0) -> None:
        self._label = label
        self._out = out or sys.stderr
        self._interval = interval
        # Quiet for the first interval: short operations print only their final line.
        self._last = time.monotonic()
        self._tty = self._out.isatty()
        self._shown = False

    def update(self, text: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self._interval:
            return
        self._last = now
        self._shown = True
        if self._tty:
            self._out.write(f"\r{self._label}: {text}\x1b[K")
        else:
            self._out.write(f"{self._label}: {text}\n")
        self._out.flush()

    def done(self, text: str) -> None:
        if self._tty and self._shown:
            self._out.write("\r\x1b[K")
        self._out.write(f"{self._label}: {text}\n")
        self._out.flush()


def add_common_options(parser: argparse.ArgumentParser, *, timeout: float = 30.0) -> None:
    """``--bootstrap-server``, ``--command-config``, ``--json`` and ``--timeout`` (default
    ``timeout`` seconds)."""
    parser.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker(s) to connect to, comma-separated (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties (security.protocol, sasl.*, ssl.*), as Kafka's tools take",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--timeout",
        type=float,
        default=timeout,
        metavar="SECONDS",
        help=f"time limit for each request (default {timeout:g})",
    )


def run_command(command: Command) -> Callable[[argparse.Namespace], int]:
    """Wrap an async command: one client for its duration, errors turned into exit 1."""

    def run(args: argparse.Namespace) -> int:
        async def main() -> int:
            bootstrap = parse_bootstrap(args.bootstrap_server)
            props = load_properties(args.command_config) if args.command_config else {}
            security = security_config(props)
            client_id = props.get("client.id", "kbroker-cli")
            async with KafkaClient(
                bootstrap, client_id=client_id, timeout=args.timeout, security=security
            ) as client:
                return await command(args, client)

        try:
            return asyncio.run(main())
        except (OpsError, ConfigError, SecurityConfigError) as exc:
            message = str(exc)
        except KafkaError as exc:
            message = describe_kafka_error(exc)
        except (OSError, TimeoutError) as exc:
            message = f"cannot reach {args.bootstrap_server}: {exc or type(exc).__name__}"
        print(f"kbroker: error: {message}", file=sys.stderr)
        return EXIT_FAILED

    return run


def key_value(text: str) -> tuple[str, str]:
    """argparse type of KEY=VALUE options."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value
