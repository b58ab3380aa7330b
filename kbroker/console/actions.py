"""The console's actions (POST handlers). The middleware (kbroker.console.app) lets them run
only when the console was started with ``--allow-writes`` (403 otherwise, and the pages show
no forms) and the form carries the session's CSRF token. On a secured cluster the
broker's ACLs decide for the console's principal, and a refusal is shown as the broker's
error.

A group's offset reset is shown as a plan first (a dry run: nothing committed); the plan's
page posts the same choice again with ``execute`` to apply it.
"""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from kbroker.cli.ops import admin
from kbroker.cli.ops import groups as ops_groups
from kbroker.cli.ops.admin import OpsError
from kbroker.client_core.partitioner import partition_for_key
from kbroker.console.context import console_of, render

RESET_KINDS = ("earliest", "latest", "offset", "timestamp")


def _text(form: Any, name: str, *, required: bool = True) -> str:
    value = form.get(name, "")
    value = value.strip() if isinstance(value, str) else ""
    if required and not value:
        raise web.HTTPBadRequest(text=f"{name} is required")
    return value


def _number(form: Any, name: str, default: int | None = None) -> int:
    text = _text(form, name, required=default is None)
    if not text and default is not None:
        return default
    try:
        return int(text)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be a whole number, not {text!r}") from None


def parse_pairs(text: str) -> dict[str, str]:
    """``key=value`` per line (blank lines skipped)."""
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise web.HTTPBadRequest(text=f"expected key=value, got {line!r}")
        pairs[key.strip()] = value.strip()
    return pairs


async def create_topic(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    name = _text(form, "name")
    partitions = _number(form, "partitions", -1)
    replication = _number(form, "replication_factor", -1)
    configs = parse_pairs(_text(form, "configs", required=False))
    client = console_of(request).client
    await admin.create_topic(client, name, partitions, replication, configs)
    await admin.wait_for_topic(client, name, present=True, timeout=30.0)
    raise web.HTTPSeeOther(f"/topics/{quote(name)}")


async def delete_topic(request: web.Request) -> web.StreamResponse:
    name = request.match_info["topic"]
    form = await request.post()
    if _text(form, "confirm", required=False) != name:
        raise web.HTTPBadRequest(text="type the topic's name to confirm its deletion")
    await admin.delete_topic(console_of(request).client, name)
    raise web.HTTPSeeOther("/topics")


async def alter_configs(request: web.Request) -> web.StreamResponse:
    name = request.match_info["topic"]
    form = await request.post()
    to_set = parse_pairs(_text(form, "set", required=False))
    to_delete = [k.strip() for k in _text(form, "delete", required=False).split(",") if k.strip()]
    if not to_set and not to_delete:
        raise web.HTTPBadRequest(text="nothing to change")
    await admin.alter_topic_configs(console_of(request).client, name, to_set, to_delete)
    raise web.HTTPSeeOther(f"/topics/{quote(name)}#configs")


async def produce(request: web.Request) -> web.StreamResponse:
    name = request.match_info["topic"]
    form = await request.post()
    client = console_of(request).client
    leaders = await admin.leaders(client, name)
    key_text = form.get("key", "")
    key = key_text.encode() if isinstance(key_text, str) and key_text else None
    value_text = form.get("value", "")
    value = value_text.encode() if isinstance(value_text, str) else b""
    headers = [
        (k, v.encode()) for k, v in parse_pairs(_text(form, "headers", required=False)).items()
    ]
    partition_text = _text(form, "partition", required=False)
    if partition_text:
        partition = _number(form, "partition")
    elif key is not None:
        partition = partition_for_key(key, len(leaders))
    else:
        partition = random.choice(sorted(leaders))
    if partition not in leaders:
        raise OpsError(f"topic {name!r} has no partition {partition}")
    offset = await admin.produce(
        client, name, partition, leaders[partition], [(key, value, headers)], acks=-1
    )
    query = urlencode({"mode": "offset", "partition": partition, "offset": offset})
    raise web.HTTPSeeOther(f"/topics/{quote(name)}/messages?{query}")


async def reset_offsets(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    group_id = _text(form, "id")
    kind = _text(form, "target")
    if kind not in RESET_KINDS:
        raise web.HTTPBadRequest(text=f"target must be one of {', '.join(RESET_KINDS)}")
    value = _number(form, "value") if kind in ("offset", "timestamp") else None
    topic = _text(form, "topic", required=False)
    client = console_of(request).client
    listed = {g.group_id: g for g in await ops_groups.list_groups(client)}
    group_type = listed[group_id].group_type if group_id in listed else ops_groups.CLASSIC
    committed = await client.committed(group_id)
    partitions = await ops_groups.group_partitions(
        client, committed, [(topic, None)] if topic else None
    )
    target = ops_groups.ResetTarget(kind, value)
    plan = await ops_groups.plan_reset(client, group_id, partitions, target)
    if _text(form, "execute", required=False) == "1":
        await ops_groups.commit_offsets(
            client, group_id, {(p.topic, p.partition): p.new for p in plan}, group_type
        )
        raise web.HTTPSeeOther(f"/group?{urlencode({'id': group_id})}")
    return render(
        request,
        "reset.html",
        group_id=group_id,
        plan=plan,
        target=kind,
        value="" if value is None else value,
        topic=topic,
    )


def add_routes(app: web.Application) -> None:
    app.router.add_post("/topics", create_topic, name="create_topic")
    app.router.add_post("/topics/{topic}/delete", delete_topic, name="delete_topic")
    app.router.add_post("/topics/{topic}/configs", alter_configs, name="alter_configs")
    app.router.add_post("/topics/{topic}/produce", produce, name="produce")
    app.router.add_post("/group/reset", reset_offsets, name="reset_offsets")
