"""``kbroker mirrors create|list|describe|pause|resume|promote|throttle|delete-link``: mirror
topics that follow the topics of another Kafka-compatible cluster, at the same offsets
(kbroker/mirror/). A link created with ``--topic-regex`` also mirrors the matching source
topics created later; ``throttle`` caps a link's fetch rate; ``delete-link`` forgets a link
(its mirror topics stay).

``--bootstrap-server`` and ``--command-config`` name the destination cluster (the one that
mirrors); ``--source-bootstrap`` and ``--source-config`` the source. ``promote`` is the
failover step: the topic stops following at once (whatever it has not copied yet stays at
the source) and becomes writable. Options every command takes, exit statuses: see
kbroker.cli.ops.output.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from kbroker.cli.ops.admin import parse_bootstrap
from kbroker.cli.ops.mirror import (
    alter_link,
    create_mirrors,
    delete_link,
    describe_lag,
    link_records,
    list_links,
    selected,
    set_state,
)
from kbroker.cli.ops.output import EXIT_OK, add_common_options, emit_json, run_command, table
from kbroker.client import KafkaClient
from kbroker.client_core.security import security_config
from kbroker.config import load_properties
from kbroker.mirror.link_configs import FETCH_RATE
from kbroker.mirror.topic_configs import ACTIVE, DEFAULT_LINK, PAUSED, PROMOTED


def _source_client(bootstrap: str, props: dict[str, str], timeout: float) -> KafkaClient:
    return KafkaClient(
        parse_bootstrap(bootstrap),
        client_id=props.get("client.id", "kbroker-mirrors"),
        timeout=timeout,
        security=security_config(props),
    )


def _source_props(args: argparse.Namespace) -> dict[str, str]:
    return load_properties(args.source_config) if args.source_config else {}


async def _create(args: argparse.Namespace, client: KafkaClient) -> int:
    props = _source_props(args)
    async with _source_client(args.source_bootstrap, props, args.timeout) as source:
        created = await create_mirrors(
            client,
            source,
            link=args.link,
            source_bootstrap=args.source_bootstrap,
            source_props=props,
            topics=args.topic,
            pattern=args.topic_regex,
            replication_factor=args.replication_factor,
            group_filter=args.group_filter,
            fetch_rate=args.fetch_max_bytes_per_second,
        )
    if args.json:
        emit_json([dataclasses.asdict(c) for c in created])
    else:
        for c in created:
            print(f"created mirror topic {c.topic} ({c.partitions} partitions, link {c.link})")
    return EXIT_OK


async def _list(args: argparse.Namespace, client: KafkaClient) -> int:
    found = await list_links(client)
    links = await link_records(client)
    if args.json:
        emit_json(
            {
                "links": [dataclasses.asdict(link) for link in links],
                "topics": [dataclasses.asdict(f) for f in found],
            }
        )
        return EXIT_OK
    link_rows = [
        (
            k.link,
            k.source_bootstrap,
            k.topic_regex or "(named topics)",
            k.configs.get(FETCH_RATE, "none"),
        )
        for k in links
    ]
    print(table(("LINK", "SOURCE", "FOLLOWS", "FETCH CAP (B/s)"), link_rows))
    print()
    rows = [
        (f.topic, f.link, f.state, f.source_bootstrap, f.source_topic, f.partitions) for f in found
    ]
    print(table(("TOPIC", "LINK", "STATE", "SOURCE", "SOURCE TOPIC", "PARTITIONS"), rows))
    return EXIT_OK


async def _throttle(args: argparse.Namespace, client: KafkaClient) -> int:
    rate = args.fetch_max_bytes_per_second
    if rate > 0:
        await alter_link(client, args.link, {FETCH_RATE: str(rate)}, [])
    else:
        await alter_link(client, args.link, {}, [FETCH_RATE])
    if args.json:
        emit_json({"link": args.link, FETCH_RATE: rate or None})
    else:
        print(f"{args.link}: " + (f"fetches capped at {rate} B/s" if rate else "no fetch cap"))
    return EXIT_OK


async def _delete_link(args: argparse.Namespace, client: KafkaClient) -> int:
    await delete_link(client, args.link)
    if args.json:
        emit_json({"deleted": args.link})
    else:
        print(f"deleted mirror link {args.link} (its mirror topics stay)")
    return EXIT_OK


async def _describe(args: argparse.Namespace, client: KafkaClient) -> int:
    specs = {n: s for n, (s, _) in (await selected(client, args.topic, args.link)).items()}
    props = _source_props(args)
    sources: dict[str, KafkaClient] = {}
    try:
        for spec in specs.values():
            if spec.bootstrap not in sources:
                # The stored link's client properties, secrets excepted (DescribeConfigs
                # masks them): --source-config supplies those.
                merged = {**spec.client_props, **props}
                sources[spec.bootstrap] = _source_client(spec.bootstrap, merged, args.timeout)
        rows = await describe_lag(client, sources, specs)
    finally:
        for source in sources.values():
            await source.close()
    if args.json:
        emit_json([dataclasses.asdict(r) for r in rows])
        return EXIT_OK
    print(
        table(
            ("TOPIC", "PARTITION", "STATE", "SOURCE END", "MIRROR END", "LAG"),
            [
                (r.topic, r.partition, r.state, r.source_end_offset, r.mirror_end_offset, r.lag)
                for r in rows
            ],
        )
    )
    return EXIT_OK


def _set_state(state: str) -> Any:
    async def command(args: argparse.Namespace, client: KafkaClient) -> int:
        topics = sorted(await selected(client, args.topic, args.link))
        await set_state(client, topics, state)
        if args.json:
            emit_json({"topics": topics, "state": state})
        else:
            for topic in topics:
                print(f"{topic}: {state}")
        return EXIT_OK

    return command


def _add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", action="append", default=[], help="a mirror topic (repeatable)")
    parser.add_argument("--link", help="every mirror topic of this link")


def register(sub: Any) -> None:
    """``kbroker mirrors ...``."""
    mirrors = sub.add_parser("mirrors", help="mirror topics following another cluster")
    actions = mirrors.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="mirror topics of a source cluster")
    add_common_options(create)
    create.add_argument("--source-bootstrap", required=True, metavar="HOST:PORT[,...]")
    create.add_argument(
        "--source-config", metavar="FILE", help="client properties for the source connection"
    )
    which = create.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", action="append", default=[], help="a source topic (repeatable)")
    which.add_argument(
        "--topic-regex",
        metavar="REGEX",
        help="every source topic it matches (whole names), now and created later",
    )
    create.add_argument("--link", default=DEFAULT_LINK, help=f"link name (default {DEFAULT_LINK})")
    create.add_argument(
        "--replication-factor", type=int, default=-1, help="default: the broker's default"
    )
    create.add_argument(
        "--group-filter",
        metavar="REGEX",
        help="copy the committed offsets of the source's groups this matches (whole ids)",
    )
    create.add_argument(
        "--fetch-max-bytes-per-second",
        type=int,
        metavar="N",
        help="cap the link's fetch rate on each broker (default: no cap)",
    )
    create.set_defaults(func=run_command(_create))

    listing = actions.add_parser("list", help="mirror topics, their links and states")
    add_common_options(listing)
    listing.set_defaults(func=run_command(_list))

    describe = actions.add_parser("describe", help="end offsets and lag per partition")
    add_common_options(describe)
    _add_selection(describe)
    describe.add_argument(
        "--source-config", metavar="FILE", help="client properties for the source connection"
    )
    describe.set_defaults(func=run_command(_describe))

    throttle = actions.add_parser(
        "throttle", help="cap a link's fetch rate on each broker (0: no cap); applies at once"
    )
    add_common_options(throttle)
    throttle.add_argument("--link", required=True)
    throttle.add_argument("--fetch-max-bytes-per-second", type=int, required=True, metavar="N")
    throttle.set_defaults(func=run_command(_throttle))

    deleting = actions.add_parser(
        "delete-link", help="forget a link: no new source topic is mirrored, its topics stay"
    )
    add_common_options(deleting)
    deleting.add_argument("--link", required=True)
    deleting.set_defaults(func=run_command(_delete_link))

    for action, state, text in (
        ("pause", PAUSED, "stop following (the topic stays read-only)"),
        ("resume", ACTIVE, "follow again from the mirror's log end"),
        ("promote", PROMOTED, "stop following for good: the topic becomes writable"),
    ):
        parser = actions.add_parser(action, help=text)
        add_common_options(parser)
        _add_selection(parser)
        parser.set_defaults(func=run_command(_set_state(state)))
