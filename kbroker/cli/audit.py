"""``kbroker audit --topic T [--tier NAME=bootstrap[,command-config][,topic=T]] ...
[--group G[@TIER]] [--window 10m] [--watch SECONDS [--metrics-port P]]``: compares the
per-window record counts of every tier (kbroker/audit/).

Each tier is a cluster whose brokers publish ``__audit`` (or, with ``topic=T``, a topic T of
counts in the same format, such as the Spark source writes: what Spark read); without
``--tier`` the one tier is ``--bootstrap-server``. ``--group G`` adds the consumer group G's
committed position on the first tier's cluster (``G@NAME``: on tier NAME's) as a tier
(kbroker/audit/compare.py says how). Every window of the topics is printed with each tier's
count and its status; the exit status is 1 when any window is missing from a tier or counted
differently.

``--watch SECONDS`` keeps comparing, every SECONDS, printing one summary line per check, and
``--metrics-port P`` serves the last check's missing and mismatched windows per topic and
tier as Prometheus gauges (kbroker/audit/watch.py), as a service an alert can watch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import re
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kbroker.audit.compare import (
    MATCH,
    CompareError,
    TierCounts,
    WindowRow,
    compare,
    consumed,
    rewindow,
)
from kbroker.audit.counter import DEFAULT_WINDOW_MS
from kbroker.audit.records import AUDIT_TOPIC
from kbroker.audit.watch import AuditWatch
from kbroker.cli.ops.admin import OpsError, describe_kafka_error, parse_bootstrap
from kbroker.cli.ops.audit import read_audit
from kbroker.cli.ops.output import (
    EXIT_FAILED,
    EXIT_OK,
    add_common_options,
    emit_json,
    run_command,
    table,
)
from kbroker.client import KafkaClient
from kbroker.client_core.security import security_config
from kbroker.config import load_properties
from kbroker.metrics import MetricsServer
from wire.errors import KafkaError

_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_ADDRESS = re.compile(r".+:\d+$")


def parse_duration_ms(text: str) -> int:
    """``10m``, ``600s``, ``600000ms`` or ``600000`` (ms) -> milliseconds."""
    found = _DURATION.match(text.strip())
    if found is None or int(found.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a positive duration: {text!r} (e.g. 10m, 30s)")
    return int(found.group(1)) * _UNIT_MS[found.group(2) or "ms"]


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class Tier:
    name: str
    bootstrap: str
    config: str | None = None
    # The topic holding the tier's counts: the brokers' __audit, or a reader's (auditTopic of
    # the Spark source).
    topic: str = AUDIT_TOPIC


def parse_tier(text: str) -> Tier:
    """``NAME=HOST:PORT[,HOST:PORT...][,command-config file][,topic=T]``."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise argparse.ArgumentTypeError(f"a tier is NAME=bootstrap[,command-config]: {text!r}")
    parts = rest.split(",")
    topics = [p.removeprefix("topic=") for p in parts if p.startswith("topic=")]
    parts = [p for p in parts if not p.startswith("topic=")]
    if len(topics) > 1 or "" in topics:
        raise argparse.ArgumentTypeError(f"tier {name!r}: at most one topic=NAME")
    config = None if not parts or _ADDRESS.match(parts[-1]) else parts.pop()
    if not parts:
        raise argparse.ArgumentTypeError(f"tier {name!r} names no bootstrap server")
    return Tier(name, ",".join(parts), config, *topics)


async def _tier_counts(tier: Tier, timeout: float) -> tuple[TierCounts, int | None, KafkaClient]:
    props = load_properties(tier.config) if tier.config else {}
    client = KafkaClient(
        parse_bootstrap(tier.bootstrap),
        client_id=props.get("client.id", "kbroker-audit"),
        timeout=timeout,
        security=security_config(props),
    )
    counts, window_ms = await read_audit(client, tier.topic)
    return counts, window_ms, client


async def _check(args: argparse.Namespace) -> tuple[int, list[str], list[WindowRow]]:
    """Read every tier once and compare: the window length, the tier names, the rows."""
    tiers = args.tier or [Tier("cluster", args.bootstrap_server, args.command_config)]
    names = [tier.name for tier in tiers]
    if len(set(names)) != len(names):
        raise OpsError(f"tier names repeat: {names}")
    group, _, group_tier = (args.group or "").partition("@")
    group_tier = group_tier or names[0]
    if group and group_tier not in names:
        raise OpsError(f"--group {args.group}: no tier named {group_tier!r}")
    counted: list[tuple[str, TierCounts]] = []
    lengths: dict[str, int] = {}
    clients: dict[str, KafkaClient] = {}
    try:
        for tier in tiers:
            counts, window_ms, clients[tier.name] = await _tier_counts(tier, args.timeout)
            counted.append((tier.name, counts))
            if window_ms is not None:
                lengths[tier.name] = window_ms
        published = max(lengths.values(), default=DEFAULT_WINDOW_MS)
        window_ms = args.window or published
        try:
            counted = [(n, rewindow(c, lengths.get(n, published), window_ms)) for n, c in counted]
        except CompareError as exc:
            raise OpsError(str(exc)) from exc
        if group:
            committed = await clients[group_tier].committed(group)
            offsets = {tp: offset for tp, (offset, _) in committed.items()}
            source = dict(counted)[group_tier]
            counted.append((f"group:{group}", consumed(source, offsets)))
    finally:
        for client in clients.values():
            await client.close()
    return window_ms, [n for n, _ in counted], compare(counted, set(args.topic))


def _summary(rows: list[WindowRow]) -> str:
    bad = sum(r.status != MATCH for r in rows)
    return f"{len(rows)} windows, {len(rows) - bad} matching, {bad} missing or mismatched"


async def _audit(args: argparse.Namespace, _: KafkaClient) -> int:
    if args.watch is not None:
        if args.watch <= 0:
            raise OpsError(f"--watch {args.watch}: the interval must be positive")
        return await _watch(args)
    if args.metrics_port is not None:
        raise OpsError("--metrics-port serves the checks of --watch: add --watch SECONDS")
    window_ms, tier_names, rows = await _check(args)
    failed = any(r.status != MATCH for r in rows)
    if args.json:
        emit_json(
            {
                "window_ms": window_ms,
                "windows": [
                    {**dataclasses.asdict(r.key), "counts": dict(r.counts), "status": r.status}
                    for r in rows
                ],
            }
        )
    else:
        print(
            table(
                ("TOPIC", "PARTITION", "WINDOW START (UTC)", *tier_names, "STATUS"),
                [
                    (
                        r.key.topic,
                        r.key.partition,
                        _utc(r.key.window_start_ms),
                        *("-" if c is None else c for _, c in r.counts),
                        r.status,
                    )
                    for r in rows
                ],
            )
        )
        print(_summary(rows))
    return EXIT_FAILED if failed else EXIT_OK


async def _watch(args: argparse.Namespace) -> int:
    """Check every ``--watch`` seconds until SIGINT or SIGTERM, one summary line per check on
    stdout, the last result on the metrics endpoint (kbroker/audit/watch.py)."""
    watch = AuditWatch(args.topic)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    server = None
    if args.metrics_port is not None:
        server = MetricsServer(watch.render)
        port = await server.start(args.metrics_host, args.metrics_port)
        print(f"audit metrics on http://{args.metrics_host}:{port}/metrics", flush=True)
    try:
        while not stop.is_set():
            try:
                _, tier_names, rows = await _check(args)
            except (OpsError, KafkaError, OSError, TimeoutError) as exc:
                # A tier down is what the audit watches for: keep checking.
                watch.failed()
                reason = describe_kafka_error(exc) if isinstance(exc, KafkaError) else exc
                print(f"{_utc(int(time.time() * 1000))}: check failed: {reason}", flush=True)
            else:
                watch.checked(tier_names, rows, time.time())
                print(f"{_utc(int(time.time() * 1000))}: {_summary(rows)}", flush=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), args.watch)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        if server is not None:
            await server.close()
    return EXIT_OK


def register(sub: Any) -> None:
    """``kbroker audit ...``."""
    parser = sub.add_parser("audit", help="compare per-window record counts across tiers")
    add_common_options(parser)
    parser.add_argument("--topic", action="append", required=True, help="a topic (repeatable)")
    parser.add_argument(
        "--tier",
        action="append",
        type=parse_tier,
        default=[],
        metavar="NAME=HOST:PORT[,...][,CONFIG][,topic=T]",
        help="a cluster to compare (repeatable; topic=T: counts in T, such as the Spark "
        "source's auditTopic, instead of __audit); default: --bootstrap-server",
    )
    parser.add_argument(
        "--group",
        metavar="GROUP[@TIER]",
        help="also compare a consumer group's committed position (on the first tier by default)",
    )
    parser.add_argument(
        "--window",
        type=parse_duration_ms,
        metavar="DURATION",
        help="window length, a multiple of the published one (default: the published one)",
    )
    parser.add_argument(
        "--watch",
        type=float,
        metavar="SECONDS",
        help="keep comparing, every SECONDS, until stopped (the audit as a service)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="with --watch: serve the last check as Prometheus gauges on PORT (/metrics)",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="with --metrics-port: the address to listen on (default 127.0.0.1)",
    )
    parser.set_defaults(func=run_command(_audit))
