"""Mirror topics over the Kafka protocol: create, list, describe, pause, resume, promote.

A mirror topic's link is a set of ``kbroker.mirror.*`` topic configs
(kbroker/mirror/topic_configs.py), so every operation is a standard admin request:
CreateTopics (the source's partition count, the source configs a mirror copies, and the
link's configs), DescribeConfigs (list), ListOffsets on both clusters (describe's lag), and
IncrementalAlterConfigs of ``kbroker.mirror.state`` (pause, resume, promote). The link's own
record (kbroker/mirror/link_configs.py) is a config resource of kbroker's type
MIRROR_LINK_RESOURCE: ListConfigResources v1 lists the links, DescribeConfigs and
IncrementalAlterConfigs read and change one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kbroker.cli.ops.admin import (
    OpsError,
    _check,
    alter_resource_configs,
    create_topic,
    describe_topics,
    topic_configs,
)
from kbroker.cli.ops.admin import alter_topic_configs as alter_configs
from kbroker.cli.ops.audit import read_audit
from kbroker.client import LATEST, KafkaClient
from kbroker.mirror.link_configs import (
    FETCH_RATE,
    MIRROR_LINK_RESOURCE,
    REPLICATION_FACTOR,
    TOPIC_REGEX,
)
from kbroker.mirror.topic_configs import (
    ACTIVE,
    COPIED_CONFIGS,
    GROUP_FILTER,
    LINK,
    PAUSED,
    PROMOTED,
    SOURCE_BOOTSTRAP,
    SOURCE_CONFIG,
    SOURCE_TOPIC,
    STATE,
    MirrorSpec,
    mirror_spec,
)
from kbroker.regex import Regex
from wire.api_keys import ApiKey
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.list_config_resources_request import ListConfigResourcesRequest


@dataclass(frozen=True, slots=True)
class MirrorTopicInfo:
    topic: str
    link: str
    state: str
    source_bootstrap: str
    source_topic: str
    partitions: int


@dataclass(frozen=True, slots=True)
class MirrorLinkInfo:
    """A link's record: its source and the source topics it follows (None: only those
    named when it was created)."""

    link: str
    source_bootstrap: str
    topic_regex: str | None
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class MirrorPartitionLag:
    topic: str
    partition: int
    state: str
    source_end_offset: int
    mirror_end_offset: int
    lag: int


@dataclass(frozen=True, slots=True)
class AuditWindow:
    """One window of a cluster's ``__audit`` (kbroker/audit/): its latest count."""

    topic: str
    partition: int
    window_start_ms: int
    count: int
    first_offset: int
    last_offset: int


async def source_topics(
    source: KafkaClient, topics: Sequence[str], pattern: str | None
) -> dict[str, int]:
    """The source topics to mirror (named, or matching ``pattern`` as a whole name, as Kafka
    matches its regexes) and their partition counts."""
    if pattern is not None:
        # None matching yet is fine: the link creates them as they appear at the source.
        regex = Regex(pattern)
        found = await source.partitions(None)
        return {name: len(p) for name, p in found.items() if regex.matches(name)}
    found = await source.partitions(list(topics))
    missing = [t for t in topics if not found.get(t)]
    if missing:
        raise OpsError(f"no such topic at the source: {', '.join(missing)}")
    return {t: len(found[t]) for t in topics}


async def create_mirrors(
    client: KafkaClient,
    source: KafkaClient,
    *,
    link: str,
    source_bootstrap: str,
    source_props: Mapping[str, str],
    topics: Sequence[str],
    pattern: str | None,
    replication_factor: int,
    group_filter: str | None = None,
    fetch_rate: int | None = None,
) -> list[MirrorTopicInfo]:
    """Create a mirror topic for each source topic chosen, with the source's partition count
    and copied configs; the brokers leading its partitions start following at once, and
    copy the committed offsets of the source groups ``group_filter`` matches. Then write
    the link's record: with ``pattern``, the cluster creates the source's matching topics
    that appear later (kbroker/mirror/link_follower.py)."""
    existing = await link_records(client, [link])
    if existing and existing[0].source_bootstrap != source_bootstrap:
        raise OpsError(
            f"link {link!r} follows {existing[0].source_bootstrap}: name another link "
            f"(--link) for {source_bootstrap}"
        )
    chosen = await source_topics(source, topics, pattern)
    configs = await topic_configs(source, sorted(chosen))
    created: list[MirrorTopicInfo] = []
    for name, partitions in sorted(chosen.items()):
        wanted = {k: v for k, v in configs.get(name, {}).items() if k in COPIED_CONFIGS}
        wanted.update(
            {LINK: link, SOURCE_BOOTSTRAP: source_bootstrap, SOURCE_TOPIC: name, STATE: ACTIVE}
        )
        wanted.update({SOURCE_CONFIG + k: v for k, v in source_props.items()})
        if group_filter is not None:
            wanted[GROUP_FILTER] = group_filter
        await create_topic(client, name, partitions, replication_factor, wanted)
        created.append(MirrorTopicInfo(name, link, ACTIVE, source_bootstrap, name, partitions))
    record = {SOURCE_BOOTSTRAP: source_bootstrap}
    record.update({SOURCE_CONFIG + k: v for k, v in source_props.items()})
    if pattern is not None:
        record[TOPIC_REGEX] = pattern
    if replication_factor != -1:
        record[REPLICATION_FACTOR] = str(replication_factor)
    if group_filter is not None:
        record[GROUP_FILTER] = group_filter
    if fetch_rate is not None:
        record[FETCH_RATE] = str(fetch_rate)
    await alter_link(client, link, record, [])
    return created


async def alter_link(
    client: KafkaClient, link: str, set_: Mapping[str, str], delete: Sequence[str]
) -> None:
    """Set and remove configs of a link's record (all removed: the link is gone)."""
    await alter_resource_configs(
        client, MIRROR_LINK_RESOURCE, link, set_, delete, f"mirror link {link!r}"
    )


async def delete_link(client: KafkaClient, link: str) -> None:
    """Remove a link's record: the link follows no new source topic; its mirror topics stay
    and keep following (promote or delete them)."""
    found = await link_records(client, [link])
    if not found:
        raise OpsError(f"no mirror link {link!r}")
    await alter_link(client, link, {}, list(found[0].configs))


async def link_records(
    client: KafkaClient, names: Sequence[str] | None = None
) -> list[MirrorLinkInfo]:
    """The records of the links named (all when None); secrets come back empty."""
    connection = await client.any_connection()
    if names is None:
        listed, _ = await connection.request(
            ApiKey.LIST_CONFIG_RESOURCES,
            ListConfigResourcesRequest(resource_types=[MIRROR_LINK_RESOURCE]),
        )
        _check(listed.error_code, None, "mirror links")
        names = sorted(r.resource_name for r in listed.config_resources)
    if not names:
        return []
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=MIRROR_LINK_RESOURCE, resource_name=n, configuration_keys=None
            )
            for n in names
        ]
    )
    response, _ = await connection.request(ApiKey.DESCRIBE_CONFIGS, request)
    found: list[MirrorLinkInfo] = []
    for result in response.results:
        _check(result.error_code, result.error_message, f"mirror link {result.resource_name!r}")
        configs = {c.name: c.value or "" for c in result.configs}
        if configs:
            found.append(
                MirrorLinkInfo(
                    result.resource_name,
                    configs.get(SOURCE_BOOTSTRAP, ""),
                    configs.get(TOPIC_REGEX),
                    configs,
                )
            )
    return found


async def _mirror_specs(client: KafkaClient) -> dict[str, tuple[MirrorSpec, int]]:
    described = await describe_topics(client, None)
    configs = await topic_configs(client, [t.name for t in described])
    found: dict[str, tuple[MirrorSpec, int]] = {}
    for topic in described:
        spec = mirror_spec(topic.name, configs.get(topic.name, {}))
        if spec is not None:
            found[topic.name] = (spec, len(topic.partitions))
    return found


async def list_links(client: KafkaClient) -> list[MirrorTopicInfo]:
    """Every mirror topic of the cluster, promoted ones included, with its link."""
    return [
        MirrorTopicInfo(name, spec.link, spec.state, spec.bootstrap, spec.source_topic, partitions)
        for name, (spec, partitions) in sorted((await _mirror_specs(client)).items())
    ]


async def selected(
    client: KafkaClient, topics: Sequence[str], link: str | None
) -> dict[str, tuple[MirrorSpec, int]]:
    """The mirror topics named, or those of ``link`` (all when neither is given)."""
    specs = await _mirror_specs(client)
    if topics:
        missing = [t for t in topics if t not in specs]
        if missing:
            raise OpsError(f"not a mirror topic: {', '.join(missing)}")
        return {t: specs[t] for t in topics}
    chosen = {n: s for n, s in specs.items() if link is None or s[0].link == link}
    if not chosen:
        raise OpsError(f"no mirror topic in link {link!r}" if link else "no mirror topic")
    return chosen


async def describe_lag(
    client: KafkaClient, sources: Mapping[str, KafkaClient], specs: Mapping[str, MirrorSpec]
) -> list[MirrorPartitionLag]:
    """Per partition: the source's end offset (its high watermark), the mirror's, and the
    difference; ``sources`` maps each source bootstrap to a client of it."""
    rows: list[MirrorPartitionLag] = []
    for name, spec in sorted(specs.items()):
        partitions = (await client.partitions([name])).get(name, [])
        mine = await client.list_offsets([(name, p) for p in partitions], LATEST)
        theirs = await sources[spec.bootstrap].list_offsets(
            [(spec.source_topic, p) for p in partitions], LATEST
        )
        for p in partitions:
            source_end = theirs[(spec.source_topic, p)]
            mirror_end = mine[(name, p)]
            rows.append(
                MirrorPartitionLag(
                    name, p, spec.state, source_end, mirror_end, max(0, source_end - mirror_end)
                )
            )
    return rows


async def set_state(client: KafkaClient, topics: Sequence[str], state: str) -> None:
    """Pause (``paused``), resume (``active``) or promote (``promoted``) mirror topics."""
    assert state in (ACTIVE, PAUSED, PROMOTED)
    for name in topics:
        await alter_configs(client, name, {STATE: state}, [])


async def audit(client: KafkaClient) -> list[AuditWindow]:
    """Every window the cluster's brokers counted (the console's mirror page shows them)."""
    counts, _ = await read_audit(client)
    return [
        AuditWindow(k.topic, k.partition, k.window_start_ms, c.count, c.first_offset, c.last_offset)
        for k, c in sorted(counts.items())
    ]
