"""The console's pages (GET handlers): each asks kbroker.cli.ops for plain data, adds what the
sampler keeps, and renders a template. Detail pages (one topic, one group) ask the cluster
live; list pages take live metadata and the newest sample (sizes, rates, lag), so none of
them reads every partition of the cluster while a person waits.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import time
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from kbroker.cli.ops import admin, client_metrics, features, quotas, transactions, users
from kbroker.cli.ops import groups as ops_groups
from kbroker.cli.ops.acls import describe_acls
from kbroker.cli.ops.browse import MODES, NEWEST, browse
from kbroker.cli.ops.topic_state import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    describe_config_entries,
    describe_log_dirs,
    log_offsets,
    offsets_at,
)
from kbroker.client import LATEST
from kbroker.console import samples
from kbroker.console.context import Console, console_of, render
from kbroker.console.record_view import FORMATS, show
from kbroker.security.acls import AclBindingFilter
from wire.errors import ErrorCode, KafkaError

# Rows of a list page; the rest is reached by the page links (and narrowed by search).
PAGE_SIZE = 500
# Where mirror links and their audit come from, once that part exists (see mirror()).
MIRROR_OPS = "kbroker.cli.ops.mirror"


def _int(request: web.Request, name: str, default: int | None = None) -> int | None:
    text = request.query.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be a whole number, not {text!r}") from None


def _page(rows: list[Any], request: web.Request) -> tuple[list[Any], int, int]:
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    page = min(max(_int(request, "page", 1) or 1, 1), pages)
    return rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE], page, pages


async def overview(request: web.Request) -> web.Response:
    console = console_of(request)
    cluster = await admin.describe_cluster(console.client)
    listed = await ops_groups.list_groups(console.client)
    by_type: dict[str, int] = {}
    for g in listed:
        by_type[g.group_type] = by_type.get(g.group_type, 0) + 1
    racks = sorted({r for _, _, _, r in cluster.brokers if r})
    return render(
        request,
        "overview.html",
        cluster=cluster,
        racks=racks,
        groups_by_type=sorted(by_type.items()),
        group_count=len(listed),
        throughput=console.store.latest(samples.TOTAL_THROUGHPUT),
    )


@dataclasses.dataclass(frozen=True)
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    records: int | None
    size: int | None
    rate: float | None


async def topics(request: web.Request) -> web.Response:
    console = console_of(request)
    query = request.query.get("q", "").strip()
    internal = request.query.get("internal") == "1"
    described = await admin.describe_topics(console.client, None, include_internal=internal)
    snapshot = console.sampler.snapshot
    rows = []
    for t in described:
        if query and query.lower() not in t.name.lower():
            continue
        counts = [
            snapshot.log_end[(t.name, p.partition)] - snapshot.log_start[(t.name, p.partition)]
            for p in t.partitions
            if (t.name, p.partition) in snapshot.log_end
            and (t.name, p.partition) in snapshot.log_start
        ]
        rows.append(
            TopicRow(
                t.name,
                t.internal,
                len(t.partitions),
                t.replication_factor,
                sum(1 for p in t.partitions if p.under_replicated),
                sum(1 for p in t.partitions if p.leader < 0),
                sum(counts) if counts else None,
                snapshot.topic_bytes.get(t.name),
                console.store.latest(samples.throughput_key(t.name)),
            )
        )
    shown, page, pages = _page(rows, request)
    return render(
        request,
        "topics.html",
        rows=shown,
        total=len(rows),
        page=page,
        pages=pages,
        query=query,
        internal=internal,
    )


async def topic(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["topic"]
    described = (await admin.describe_topics(console.client, [name]))[0]
    tps = [(name, p.partition) for p in described.partitions]
    offsets = await log_offsets(console.client, tps)
    replicas, unasked = await describe_log_dirs(console.client, [name])
    by_partition: dict[int, list[Any]] = {}
    for r in sorted(replicas, key=lambda r: (r.partition, r.broker, r.log_dir)):
        by_partition.setdefault(r.partition, []).append(r)
    configs = await describe_config_entries(console.client, RESOURCE_TOPIC, name)
    metric_series = [
        (label, samples.metric_key(metric, name))
        for label, metric in (("Bytes in", "kbroker_bytes_in_total"),
                              ("Bytes out", "kbroker_bytes_out_total"))
        if console.store.series(samples.metric_key(metric, name))
    ]  # fmt: skip
    return render(
        request,
        "topic.html",
        topic=described,
        offsets=offsets,
        replicas=by_partition,
        unasked=unasked,
        configs=configs,
        throughput_key=samples.throughput_key(name),
        metric_series=metric_series,
    )


async def messages(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["topic"]
    mode = request.query.get("mode", NEWEST)
    if mode not in MODES:
        raise web.HTTPBadRequest(text=f"mode must be one of {', '.join(MODES)}")
    shown_as = request.query.get("format", "auto")
    if shown_as not in FORMATS:
        raise web.HTTPBadRequest(text=f"format must be one of {', '.join(FORMATS)}")
    partition = _int(request, "partition")
    limit = _int(request, "limit", 50) or 50
    offset = _int(request, "offset")
    timestamp_text = request.query.get("timestamp", "").strip()
    timestamp = _timestamp(timestamp_text) if timestamp_text else None
    described = (await admin.describe_topics(console.client, [name]))[0]
    result = None
    if mode not in ("offset", "timestamp") or offset is not None or timestamp is not None:
        result = await browse(
            console.client,
            name,
            None if partition is None else [partition],
            mode,
            limit=limit,
            offset=offset,
            timestamp=timestamp,
        )
    rows = []
    for r in result.records if result else []:
        rows.append(
            {
                "partition": r.partition,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": await _show(console, r.key, shown_as),
                "value": await _show(console, r.value, shown_as),
                "headers": [(k, await _show(console, v, shown_as)) for k, v in r.headers],
            }
        )
    return render(
        request,
        "messages.html",
        topic=described,
        rows=rows,
        bounds=result.bounds if result else {},
        mode=mode,
        shown_as=shown_as,
        formats=FORMATS,
        partition=partition,
        limit=limit,
        offset=offset,
        timestamp_text=timestamp_text,
        searched=result is not None,
    )


def _timestamp(text: str) -> int:
    """Epoch milliseconds, or an ISO 8601 date-time (UTC unless it names a zone)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise web.HTTPBadRequest(
            text=f"timestamp must be epoch milliseconds or ISO 8601, not {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


async def _show(console: Console, data: bytes | None, shown_as: str) -> Any:
    if console.registry is not None:
        return await console.registry.show(data, shown_as)
    return show(data, shown_as)


async def groups(request: web.Request) -> web.Response:
    console = console_of(request)
    query = request.query.get("q", "").strip()
    group_type = request.query.get("type", "")
    listed = await ops_groups.list_groups(console.client)
    rows = [
        (g, console.sampler.snapshot.group_lag.get(g.group_id))
        for g in listed
        if (not query or query.lower() in g.group_id.lower())
        and (not group_type or g.group_type == group_type)
    ]
    shown, page, pages = _page(rows, request)
    types = sorted({g.group_type for g in listed})
    return render(
        request,
        "groups.html",
        rows=shown,
        total=len(rows),
        page=page,
        pages=pages,
        query=query,
        group_type=group_type,
        types=types,
    )


async def _group_type(console: Console, group_id: str) -> str:
    for g in await ops_groups.list_groups(console.client):
        if g.group_id == group_id:
            return g.group_type
    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"no group {group_id!r}")


async def group(request: web.Request) -> web.Response:
    console = console_of(request)
    group_id = request.query.get("id", "")
    if not group_id:
        raise web.HTTPBadRequest(text="which group? (?id=...)")
    group_type = await _group_type(console, group_id)
    described = await ops_groups.describe_group(console.client, group_id, group_type)
    if group_type == ops_groups.SHARE:
        committed = {
            tp: (o, "")
            for tp, o in (await ops_groups.share_group_offsets(console.client, group_id)).items()
        }
    else:
        committed = await console.client.committed(group_id)
    owners = ops_groups.owners(described)
    partitions = sorted(set(committed) | set(owners))
    ends = await offsets_at(console.client, partitions, LATEST)
    rows = ops_groups.lag_rows(committed, ends, owners)
    topics_of_group = sorted({r.topic for r in rows})
    return render(
        request,
        "group.html",
        group=described,
        rows=rows,
        total_lag=sum(r.lag or 0 for r in rows),
        lag_key=samples.lag_key(group_id),
        topics_of_group=topics_of_group,
        resettable=group_type in (ops_groups.CLASSIC, ops_groups.CONSUMER),
    )


async def _section(call: Any) -> tuple[Any, str]:
    """A part of a page that may be refused on its own (no authorizer, an older broker)."""
    try:
        return await call, ""
    except KafkaError as exc:
        return None, f"{ErrorCode(exc.code).name}" + (f": {exc.message}" if exc.message else "")
    except admin.OpsError as exc:
        return None, str(exc)


async def transactions_page(request: web.Request) -> web.Response:
    console = console_of(request)
    listed, listed_error = await _section(transactions.list_transactions(console.client, [], []))
    return render(
        request,
        "transactions.html",
        listed=listed or [],
        listed_error=listed_error,
        hanging=console.sampler.snapshot.hanging,
        now_ms=int(time.time() * 1000),
    )


async def access(request: web.Request) -> web.Response:
    console = console_of(request)
    acls, acls_error = await _section(describe_acls(console.client, AclBindingFilter()))
    found_quotas, quotas_error = await _section(quotas.describe_quotas(console.client, []))
    found_users, users_error = await _section(users.describe_users(console.client, None))
    return render(
        request,
        "access.html",
        acls=sorted(acls or [], key=lambda a: (a.resource_type.name, a.name, a.principal)),
        acls_error=acls_error,
        quotas=sorted((found_quotas or {}).items(), key=lambda e: repr(e[0])),
        quotas_error=quotas_error,
        users=sorted((found_users or {}).items()),
        users_error=users_error,
    )


async def settings(request: web.Request) -> web.Response:
    console = console_of(request)
    found_features, features_error = await _section(features.describe_features(console.client))
    names, metrics_error = await _section(client_metrics.list_subscriptions(console.client))
    subscriptions, describe_error = await _section(
        client_metrics.describe_subscriptions(console.client, names or [])
    )
    cluster = await admin.describe_cluster(console.client)
    broker_id = str(cluster.controller if cluster.controller >= 0 else cluster.brokers[0][0])
    broker_configs, broker_error = await _section(
        describe_config_entries(console.client, RESOURCE_BROKER, broker_id)
    )
    return render(
        request,
        "settings.html",
        features=found_features,
        features_error=features_error,
        subscriptions=sorted((subscriptions or {}).items()),
        metrics_error=metrics_error or describe_error,
        broker_id=broker_id,
        broker_configs=[c for c in broker_configs or [] if not c.is_default],
        broker_error=broker_error,
    )


def _rows_of(items: Any) -> tuple[list[str], list[list[Any]]]:
    """Column names and rows of a list of dataclasses (or mappings), whatever their shape."""
    rows = [dataclasses.asdict(i) if dataclasses.is_dataclass(i) else dict(i) for i in items]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    return columns, [[row.get(c) for c in columns] for row in rows]


async def mirror(request: web.Request) -> web.Response:
    """Mirror links and their audit, from ``kbroker.cli.ops.mirror`` when it exists: its
    ``list_links(client)`` and ``audit(client)`` return lists of dataclasses, shown as tables
    column by column. Until that module lands the page says so."""
    console = console_of(request)
    if importlib.util.find_spec(MIRROR_OPS) is None:
        return render(request, "mirror.html", available=False, sections=[])
    module = importlib.import_module(MIRROR_OPS)
    sections = []
    for title, name in (("Mirror links", "list_links"), ("Audit", "audit")):
        call = getattr(module, name, None)
        if call is None:
            continue
        found, error = await _section(call(console.client))
        columns, rows = _rows_of(found or [])
        sections.append((title, columns, rows, error))
    return render(request, "mirror.html", available=True, sections=sections)


async def series(request: web.Request) -> web.Response:
    """Points of one sampled series as JSON, for the charts: ``{"points": [[t, v], ...]}``
    (t in seconds since the epoch)."""
    console = console_of(request)
    key = request.query.get("key", "")
    points = console.store.series(key)
    return web.json_response(
        {"key": key, "interval": console.sampler.interval, "points": points},
        headers={"Cache-Control": "no-store"},
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", overview, name="overview")
    app.router.add_get("/topics", topics, name="topics")
    app.router.add_get("/topics/{topic}", topic, name="topic")
    app.router.add_get("/topics/{topic}/messages", messages, name="messages")
    app.router.add_get("/groups", groups, name="groups")
    app.router.add_get("/group", group, name="group")
    app.router.add_get("/transactions", transactions_page, name="transactions")
    app.router.add_get("/access", access, name="access")
    app.router.add_get("/settings", settings, name="settings")
    app.router.add_get("/mirror", mirror, name="mirror")
    app.router.add_get("/api/series", series, name="series")
