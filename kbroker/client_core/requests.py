"""Requests both shells build the same way, and their answers read once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kbroker.client_core.metadata import TopicPartition
from wire.errors import ErrorCode, KafkaError
from wire.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from wire.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.messages.list_offsets_response import ListOffsetsResponse
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from wire.messages.offset_commit_response import OffsetCommitResponse
from wire.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestGroup
from wire.messages.offset_fetch_response import OffsetFetchResponse
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.produce_response import ProduceResponse

# ListOffsets special timestamps (protocol guide, ListOffsets).
LATEST = -1
EARLIEST = -2
# Fetch and ListOffsets isolation levels (KIP-98).
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def list_offsets_request(
    partitions: Iterable[TopicPartition],
    timestamp: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> ListOffsetsRequest:
    """Offsets of ``partitions`` by ``timestamp`` (ms, LATEST or EARLIEST), as a consumer;
    LATEST at READ_COMMITTED is the last stable offset (v2+)."""
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(
            # v0 answers a list of offsets; one is all we want.
            ListOffsetsPartition(partition_index=partition, timestamp=timestamp, max_num_offsets=1)
        )
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[ListOffsetsTopic(name=t, partitions=p) for t, p in topics.items()],
    )


def list_offsets_results(
    response: ListOffsetsResponse, version: int
) -> dict[TopicPartition, tuple[ErrorCode, int]]:
    """Per partition: its error and offset (-1 where no record is that recent)."""
    found: dict[TopicPartition, tuple[ErrorCode, int]] = {}
    for topic in response.topics:
        for p in topic.partitions:
            if version == 0:
                offset = p.old_style_offsets[0] if p.old_style_offsets else -1
            else:
                offset = p.offset
            found[(topic.name, p.partition_index)] = (ErrorCode(p.error_code), offset)
    return found


def fetch_request(
    tp: TopicPartition,
    offset: int,
    max_bytes: int,
    max_wait_ms: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> FetchRequest:
    """One partition from ``offset`` on, as a consumer: below the high watermark, or below
    the last stable offset at READ_COMMITTED (v4+)."""
    partition = FetchPartition(partition=tp[1], fetch_offset=offset, partition_max_bytes=max_bytes)
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        topics=[FetchTopic(topic=tp[0], partitions=[partition])],
    )


def produce_request(
    tp: TopicPartition, batch: bytes, timeout_ms: int, transactional_id: str | None = None
) -> ProduceRequest:
    """One batch for one partition, acks=all; a transactional batch names its id."""
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=timeout_ms,
        topic_data=[
            TopicProduceData(
                name=tp[0], partition_data=[PartitionProduceData(index=tp[1], records=batch)]
            )
        ],
    )


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    """A Produce or Fetch answer for one partition: its error, KIP-951's leader hint
    (leader id, epoch; None without one) and the endpoints the response names."""

    error: ErrorCode
    message: str
    hint: tuple[int, int] | None
    endpoints: list[tuple[int, str, int]]


def produce_answer(response: ProduceResponse, tp: TopicPartition) -> tuple[PartitionAnswer, int]:
    """The answer for ``tp`` and the base offset it got. A DUPLICATE_SEQUENCE_NUMBER is a
    batch appended before (KIP-98): the first append stands, so it counts as success."""
    endpoints = [(e.node_id, e.host, e.port) for e in response.node_endpoints]
    for topic in response.responses:
        for p in topic.partition_responses:
            if (topic.name, p.index) != tp:
                continue
            error = ErrorCode(p.error_code)
            if error == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                error = ErrorCode.NONE
            hint = (p.current_leader.leader_id, p.current_leader.leader_epoch)
            answer = PartitionAnswer(error, p.error_message or "", hint, endpoints)
            return answer, p.base_offset
    missing = PartitionAnswer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "", None, endpoints)
    return missing, -1


def offset_fetch_request(group_id: str, version: int) -> OffsetFetchRequest:
    """Every committed offset of a group (topics null: v2+; v8+ batches groups, KIP-709)."""
    if version >= 8:
        return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group_id, topics=None)])
    if version < 2:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "OffsetFetch v2+ is needed for all topics")
    return OffsetFetchRequest(group_id=group_id, topics=None)


def offset_fetch_results(
    response: OffsetFetchResponse, version: int
) -> tuple[ErrorCode, dict[TopicPartition, tuple[ErrorCode, int, str]]]:
    """The group's error, and per partition its error, committed offset (-1: none) and
    metadata."""
    if version >= 8:
        group = response.groups[0]
        error, topics = group.error_code, group.topics
    else:
        error, topics = response.error_code, response.topics
    found = {
        (topic.name, p.partition_index): (
            ErrorCode(p.error_code),
            p.committed_offset,
            p.metadata or "",
        )
        for topic in topics
        for p in topic.partitions
    }
    return ErrorCode(error), found


def offset_commit_request(
    group_id: str, offsets: Mapping[TopicPartition, tuple[int, str]]
) -> OffsetCommitRequest:
    """A commit without group membership (generation -1, as an admin tool does)."""
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), (offset, metadata) in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata
            )
        )
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
    )


def offset_commit_results(response: OffsetCommitResponse) -> dict[TopicPartition, ErrorCode]:
    return {
        (t.name, p.partition_index): ErrorCode(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def create_topics_request(
    topics: Mapping[str, int],
    replication_factor: int,
    configs: Mapping[str, str],
    timeout_ms: int,
) -> CreateTopicsRequest:
    """Each topic with its partition count, the same ``configs`` for all."""
    topic_configs = [CreatableTopicConfig(name=k, value=v) for k, v in configs.items()]
    return CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=count,
                replication_factor=replication_factor,
                configs=topic_configs,
            )
            for name, count in topics.items()
        ],
        timeout_ms=timeout_ms,
    )


def delete_records_request(
    tp: TopicPartition, before: int, timeout_ms: int
) -> DeleteRecordsRequest:
    partition = DeleteRecordsPartition(partition_index=tp[1], offset=before)
    return DeleteRecordsRequest(
        topics=[DeleteRecordsTopic(name=tp[0], partitions=[partition])], timeout_ms=timeout_ms
    )
