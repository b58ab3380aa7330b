"""What a topic holds and where, over the protocol, for the web console and the tools: log
start and end offsets of many partitions at once (ListOffsets, one request per leader), the
size of each replica in each log directory (DescribeLogDirs, KIP-113), and every config of a
resource with where its value comes from (DescribeConfigs v1+ sources, KIP-226).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kbroker.cli.ops.admin import _check
from kbroker.client import EARLIEST, LATEST, KafkaClient, TopicPartition
from kbroker.client_core.requests import list_offsets_request, list_offsets_results
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.describe_log_dirs_request import DescribableLogDirTopic, DescribeLogDirsRequest

# DescribeConfigs' ConfigSource values (KIP-226), by the names Kafka's tools print.
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


async def offsets_at(
    client: KafkaClient, partitions: Iterable[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    """ListOffsets of ``partitions`` at ``timestamp`` (LATEST, EARLIEST or ms), one request per
    leader. Partitions without a leader, on an unreachable leader or answered with an error are
    left out: a view of many partitions shows what it can."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    await client.metadata(sorted({t for t, _ in wanted}))
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in wanted:
        leader = client.cluster.leader(tp)
        if leader is not None:
            by_leader[leader.node_id].append(tp)
    found: dict[TopicPartition, int] = {}
    for leader_id, tps in sorted(by_leader.items()):
        try:
            connection = await client.node(leader_id)
        except (OSError, TimeoutError, KafkaError):
            continue
        request = list_offsets_request(tps, timestamp)
        response, version = await connection.request(ApiKey.LIST_OFFSETS, request)
        for tp, (error, offset) in list_offsets_results(response, version).items():
            if error == ErrorCode.NONE:
                found[tp] = offset
    return found


async def log_offsets(
    client: KafkaClient, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, tuple[int, int]]:
    """(log start offset, log end offset) of each partition that answered."""
    wanted = list(partitions)
    starts = await offsets_at(client, wanted, EARLIEST)
    ends = await offsets_at(client, wanted, LATEST)
    return {tp: (starts[tp], ends[tp]) for tp in wanted if tp in starts and tp in ends}


@dataclass(frozen=True)
class ReplicaLog:
    """One replica of a partition in one log directory of one broker."""

    broker: int
    log_dir: str
    topic: str
    partition: int
    size: int
    offset_lag: int
    future: bool


async def describe_log_dirs(
    client: KafkaClient, topics: Sequence[str] | None
) -> tuple[list[ReplicaLog], list[int]]:
    """The replicas of ``topics`` (None: every topic) on every broker, and the brokers that
    could not be asked (unreachable, or without DescribeLogDirs)."""
    metadata = await client.metadata(list(topics) if topics is not None else None)
    request_topics = None
    if topics is not None:
        request_topics = [
            DescribableLogDirTopic(
                topic=t.name or "", partitions=sorted(p.partition_index for p in t.partitions)
            )
            for t in metadata.topics
            if t.error_code == ErrorCode.NONE
        ]
        if not request_topics:
            return [], []
    found: list[ReplicaLog] = []
    unasked: list[int] = []
    for broker in sorted(b.node_id for b in metadata.brokers):
        try:
            connection = await client.node(broker)
        except (OSError, TimeoutError, KafkaError):
            unasked.append(broker)
            continue
        if ApiKey.DESCRIBE_LOG_DIRS not in connection.versions:
            unasked.append(broker)
            continue
        response, _ = await connection.request(
            ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=request_topics)
        )
        _check(response.error_code, None, f"log dirs of broker {broker}")
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                continue
            found += [
                ReplicaLog(
                    broker,
                    result.log_dir,
                    t.name,
                    p.partition_index,
                    p.partition_size,
                    p.offset_lag,
                    p.is_future_key,
                )
                for t in result.topics
                for p in t.partitions
            ]
    return found, unasked


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None  # None for a sensitive value the broker does not disclose
    source: str
    read_only: bool
    sensitive: bool

    @property
    def is_default(self) -> bool:
        return self.source in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")


async def describe_config_entries(
    client: KafkaClient, resource_type: int, name: str
) -> list[ConfigEntry]:
    """Every config of one resource (a topic, a broker), sorted by name, with its source."""
    connection = await client.any_connection()
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            )
        ]
    )
    response, version = await connection.request(ApiKey.DESCRIBE_CONFIGS, request)
    result = response.results[0]
    _check(result.error_code, result.error_message, f"configs of {name!r}")
    entries = []
    for c in result.configs:
        if version >= 1:
            source = CONFIG_SOURCES.get(c.config_source, "UNKNOWN")
        else:
            source = "DEFAULT_CONFIG" if c.is_default else "DYNAMIC_TOPIC_CONFIG"
        entries.append(ConfigEntry(c.name, c.value, source, c.read_only, c.is_sensitive))
    return sorted(entries, key=lambda e: e.name)
