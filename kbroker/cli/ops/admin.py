"""Admin, produce and fetch operations over the Kafka protocol, on top of kbroker.client.

Everything here speaks the protocol only, so the tools work against any Kafka-compatible
broker. Failures are raised as ``OpsError`` with a message meant for an operator (the Kafka
error name plus the broker's message, when it sent one).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kbroker.client import Address, BrokerConnection, KafkaClient
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from wire.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from wire.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from wire.messages.describe_cluster_request import DescribeClusterRequest
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.records.batch import read_header
from wire.records.record import Record, build_batch, decode_records, iter_entries

TopicPartition = tuple[str, int]

RESOURCE_TOPIC = 2
OP_SET = 0
OP_DELETE = 1
# DescribeConfigs sources that are an explicit setting rather than a default.
SOURCE_TOPIC_OVERRIDE = 1
# Fetch v13 replaced topic names by topic ids; the tools address topics by name.
FETCH_MAX_VERSION = 12
# Produce v3 is the first to carry v2 record batches.
PRODUCE_MIN_VERSION = 3
# How long the console producer waits for an auto-created topic's leaders to be elected.
LEADER_WAIT_SECONDS = 10.0
ADMIN_TIMEOUT_MS = 30_000


class OpsError(Exception):
    """An operation failed; the message says why, for an operator. ``code`` is the Kafka
    error behind it, if any."""

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.code = code

    @property
    def retriable(self) -> bool:
        return self.code is not None and self.code.retriable


def _error_text(code: int, message: str | None, subject: str) -> str:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{subject}: {name}" + (f" ({message})" if message else "")


def _check(code: int, message: str | None, subject: str) -> None:
    if code != ErrorCode.NONE:
        try:
            known: ErrorCode | None = ErrorCode(code)
        except ValueError:
            known = None
        raise OpsError(_error_text(code, message, subject), known)


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionDescription, ...]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller: int
    brokers: tuple[tuple[int, str, int, str | None], ...]
    topics: int
    partitions: int
    under_replicated: tuple[TopicPartition, ...]
    offline: tuple[TopicPartition, ...]


async def _controller(client: KafkaClient) -> BrokerConnection:
    """Topic admin requests go to the controller (any broker forwards since KIP-590, but
    older brokers answer NOT_CONTROLLER elsewhere)."""
    response = await client.metadata([])
    if response.controller_id >= 0 and response.controller_id in client.brokers:
        return await client.node(response.controller_id)
    return await client.any_connection()


async def describe_topics(
    client: KafkaClient, names: Sequence[str] | None, *, include_internal: bool = False
) -> list[TopicDescription]:
    """Partitions, leaders, replicas and ISR of ``names`` (None: every topic)."""
    response = await client.metadata(list(names) if names else None)
    found: list[TopicDescription] = []
    for topic in response.topics:
        name = topic.name or ""
        _check(topic.error_code, None, f"topic {name!r}")
        if names is None and topic.is_internal and not include_internal:
            continue
        partitions = tuple(
            PartitionDescription(
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                tuple(p.replica_nodes),
                tuple(p.isr_nodes),
                tuple(p.offline_replicas),
            )
            for p in sorted(topic.partitions, key=lambda p: p.partition_index)
        )
        found.append(TopicDescription(name, str(topic.topic_id), topic.is_internal, partitions))
    return sorted(found, key=lambda t: t.name)


async def topic_configs(client: KafkaClient, names: Sequence[str]) -> dict[str, dict[str, str]]:
    """The explicitly set (non-default) configs of each topic."""
    if not names:
        return {}
    connection = await client.any_connection()
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=RESOURCE_TOPIC, resource_name=n, configuration_keys=None
            )
            for n in names
        ]
    )
    response, version = await connection.request(ApiKey.DESCRIBE_CONFIGS, request)
    found: dict[str, dict[str, str]] = {}
    for result in response.results:
        _check(result.error_code, result.error_message, f"configs of {result.resource_name!r}")
        found[result.resource_name] = {
            c.name: c.value or ""
            for c in result.configs
            if (c.config_source == SOURCE_TOPIC_OVERRIDE if version >= 1 else not c.is_default)
        }
    return found


async def wait_for_topic(client: KafkaClient, name: str, *, present: bool, timeout: float) -> None:
    """Poll Metadata until ``name`` exists with a leader for every partition (or is gone)."""
    deadline = time.monotonic() + timeout
    while True:
        response = await client.metadata([name])
        topic = response.topics[0] if response.topics else None
        exists = topic is not None and topic.error_code == ErrorCode.NONE
        if present and exists and topic is not None:
            if all(p.leader_id >= 0 for p in topic.partitions):
                return
        elif not present and not exists:
            return
        if time.monotonic() > deadline:
            state = "ready" if present else "deleted"
            raise OpsError(f"topic {name!r} not {state} after {timeout:.0f}s")
        await asyncio.sleep(0.2)


async def create_topic(
    client: KafkaClient,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
    *,
    validate_only: bool = False,
) -> tuple[int, int]:
    """Create a topic; returns (partitions, replication factor) as the broker reports them
    (-1 where the broker's response version does not carry them)."""
    connection = await _controller(client)
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication_factor,
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        timeout_ms=ADMIN_TIMEOUT_MS,
        validate_only=validate_only,
    )
    response, _ = await connection.request(ApiKey.CREATE_TOPICS, request)
    result = response.topics[0]
    _check(result.error_code, result.error_message, f"create topic {name!r}")
    return result.num_partitions, result.replication_factor


async def delete_topic(client: KafkaClient, name: str) -> None:
    connection = await _controller(client)
    version = connection.version(ApiKey.DELETE_TOPICS)
    if version >= 6:
        request = DeleteTopicsRequest(
            topics=[DeleteTopicState(name=name)], timeout_ms=ADMIN_TIMEOUT_MS
        )
    else:
        request = DeleteTopicsRequest(topic_names=[name], timeout_ms=ADMIN_TIMEOUT_MS)
    response = await connection.call(ApiKey.DELETE_TOPICS, version, request)
    result = response.responses[0]
    _check(result.error_code, result.error_message, f"delete topic {name!r}")


async def create_partitions(client: KafkaClient, name: str, total: int) -> None:
    connection = await _controller(client)
    request = CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name=name, count=total, assignments=None)],
        timeout_ms=ADMIN_TIMEOUT_MS,
    )
    response, _ = await connection.request(ApiKey.CREATE_PARTITIONS, request)
    result = response.results[0]
    _check(result.error_code, result.error_message, f"partitions of {name!r}")


async def alter_topic_configs(
    client: KafkaClient, name: str, set_: Mapping[str, str], delete: Iterable[str]
) -> None:
    """Set and remove topic config overrides, leaving the others (KIP-339)."""
    await alter_resource_configs(client, RESOURCE_TOPIC, name, set_, delete, f"configs of {name!r}")


async def alter_resource_configs(
    client: KafkaClient,
    resource_type: int,
    name: str,
    set_: Mapping[str, str],
    delete: Iterable[str],
    what: str,
) -> None:
    """Set and remove configs of one resource with IncrementalAlterConfigs (KIP-339), sent
    to the controller; `what` names the resource in the error."""
    configs = [AlterableConfig(name=k, config_operation=OP_SET, value=v) for k, v in set_.items()]
    configs += [AlterableConfig(name=k, config_operation=OP_DELETE, value=None) for k in delete]
    connection = await _controller(client)
    request = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=configs)
        ]
    )
    response, _ = await connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
    result = response.responses[0]
    _check(result.error_code, result.error_message, what)


async def describe_cluster(client: KafkaClient) -> ClusterDescription:
    """Brokers and controller (DescribeCluster when the broker has it, else Metadata), and the
    partitions that are under-replicated or have no leader."""
    metadata = await client.metadata(None)
    cluster_id = metadata.cluster_id or ""
    controller = metadata.controller_id
    brokers = tuple(sorted((b.node_id, b.host, b.port, b.rack) for b in metadata.brokers))
    connection = await client.any_connection()
    if ApiKey.DESCRIBE_CLUSTER in connection.versions:
        response, _ = await connection.request(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest())
        _check(response.error_code, response.error_message, "describe cluster")
        cluster_id, controller = response.cluster_id, response.controller_id
        brokers = tuple(sorted((b.broker_id, b.host, b.port, b.rack) for b in response.brokers))
    under: list[TopicPartition] = []
    offline: list[TopicPartition] = []
    count = 0
    for topic in metadata.topics:
        for p in topic.partitions:
            count += 1
            tp = (topic.name or "", p.partition_index)
            if p.leader_id < 0:
                offline.append(tp)
            elif len(p.isr_nodes) < len(p.replica_nodes):
                under.append(tp)
    return ClusterDescription(
        cluster_id,
        controller,
        brokers,
        len(metadata.topics),
        count,
        tuple(sorted(under)),
        tuple(sorted(offline)),
    )


async def leaders(client: KafkaClient, topic: str, *, create: bool = False) -> dict[int, int]:
    """Partition -> leader broker id of ``topic``.

    With ``create`` a missing topic is created by the broker's auto-creation (Metadata with
    allow_auto_topic_creation, as Kafka's console producer and kcat ask), and the leaders,
    elected after the creation, are waited for up to LEADER_WAIT_SECONDS."""
    deadline = time.monotonic() + LEADER_WAIT_SECONDS
    while True:
        response = await client.metadata([topic], allow_auto_topic_creation=create)
        if not response.topics:
            raise OpsError(f"topic {topic!r}: no metadata")
        entry = response.topics[0]
        electing = entry.error_code == ErrorCode.LEADER_NOT_AVAILABLE or (
            entry.error_code == ErrorCode.NONE and any(p.leader_id < 0 for p in entry.partitions)
        )
        if not (create and electing and time.monotonic() < deadline):
            break
        await asyncio.sleep(0.2)
    _check(entry.error_code, None, f"topic {topic!r}")
    return {p.partition_index: p.leader_id for p in entry.partitions}


async def _leader_connection(
    client: KafkaClient, leader: int, tp: TopicPartition
) -> BrokerConnection:
    if leader < 0:
        raise OpsError(f"{tp[0]}-{tp[1]}: no leader", ErrorCode.LEADER_NOT_AVAILABLE)
    return await client.node(leader)


async def produce(
    client: KafkaClient,
    topic: str,
    partition: int,
    leader: int,
    records: Sequence[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    *,
    acks: int,
) -> int:
    """Send ``records`` (key, value, headers) as one batch; returns the base offset."""
    if acks == 0:
        # A broker sends no answer to acks=0, and the client pairs every request with one.
        raise OpsError("acks=0 is not supported by the console tools; use 1 or -1")
    now = int(time.time() * 1000)
    batch = build_batch(
        [Record(i, now, key, value, headers) for i, (key, value, headers) in enumerate(records)]
    )
    connection = await _leader_connection(client, leader, (topic, partition))
    version = connection.version(ApiKey.PRODUCE)
    if version < PRODUCE_MIN_VERSION:
        raise OpsError("the broker does not support Produce v3 (record batches v2)")
    request = ProduceRequest(
        acks=acks,
        timeout_ms=ADMIN_TIMEOUT_MS,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)]
            )
        ],
    )
    response = await connection.call(ApiKey.PRODUCE, version, request)
    result = response.responses[0].partition_responses[0]
    _check(result.error_code, result.error_message, f"produce to {topic}-{partition}")
    return result.base_offset


@dataclass(frozen=True)
class FetchResult:
    records: list[Record]
    high_watermark: int
    log_start_offset: int


async def fetch(
    client: KafkaClient,
    topic: str,
    leader: int,
    offsets: Mapping[int, int],
    *,
    max_wait_ms: int,
    max_bytes: int = 1 << 20,
) -> dict[int, FetchResult]:
    """One fetch from ``leader`` of partition -> offset; records before each requested offset
    (the head of the batch that holds it) are dropped."""
    connection = await _leader_connection(client, leader, (topic, min(offsets, default=-1)))
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                    )
                    for partition, offset in sorted(offsets.items())
                ],
            )
        ],
    )
    response, _ = await connection.request(ApiKey.FETCH, request, highest=FETCH_MAX_VERSION)
    _check(response.error_code, None, "fetch")
    results: dict[int, FetchResult] = {}
    for entry in response.responses:
        for data in entry.partitions:
            partition = data.partition_index
            offset = offsets[partition]
            _check(data.error_code, None, f"fetch {topic}-{partition} at {offset}")
            records = [r for r in user_records(data.records) if r.offset >= offset]
            results[partition] = FetchResult(records, data.high_watermark, data.log_start_offset)
    return results


def user_records(raw: bytes | memoryview | None) -> list[Record]:
    """The records of a fetched buffer, without control batches (transaction markers, which
    consumers never show); a trailing partial batch is left out."""
    if not raw:
        return []
    found: list[Record] = []
    for pos, size, magic in iter_entries(raw):
        if magic == 2 and read_header(raw, pos).is_control:
            continue
        found.extend(decode_records(memoryview(raw)[pos : pos + size]))
    return found


async def health(client: KafkaClient) -> tuple[str, int, int]:
    """ApiVersions (on connect) and Metadata answered: (cluster id, brokers, controller)."""
    response = await client.metadata([])
    return response.cluster_id or "", len(response.brokers), response.controller_id


def parse_bootstrap(text: str) -> list[Address]:
    """``host:port[,host:port...]``; raises OpsError on a malformed entry."""
    addresses: list[Address] = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OpsError(f"bad --bootstrap-server entry {item!r}: expected HOST:PORT")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def describe_kafka_error(exc: KafkaError) -> str:
    return _error_text(exc.code, exc.message, "request failed")
