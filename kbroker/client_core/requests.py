"""Requests both shells build the same way, and their answers read once."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kbroker.client_core.metadata import TopicPartition
from wire.errors import ErrorCode
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.messages.list_offsets_response import ListOffsetsResponse
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.produce_response import ProduceResponse

# ListOffsets special timestamps (protocol guide, ListOffsets).
LATEST = -1
EARLIEST = -2


def list_offsets_request(
    partitions: Iterable[TopicPartition], timestamp: int
) -> ListOffsetsRequest:
    """Offsets of ``partitions`` by ``timestamp`` (ms, LATEST or EARLIEST), as a consumer."""
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(
            # v0 answers a list of offsets; one is all we want.
            ListOffsetsPartition(partition_index=partition, timestamp=timestamp, max_num_offsets=1)
        )
    return ListOffsetsRequest(
        replica_id=-1, topics=[ListOffsetsTopic(name=t, partitions=p) for t, p in topics.items()]
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
    tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int
) -> FetchRequest:
    """One partition from ``offset`` on, as a read_uncommitted consumer."""
    partition = FetchPartition(partition=tp[1], fetch_offset=offset, partition_max_bytes=max_bytes)
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        topics=[FetchTopic(topic=tp[0], partitions=[partition])],
    )


def produce_request(tp: TopicPartition, batch: bytes, timeout_ms: int) -> ProduceRequest:
    """One batch for one partition, acks=all."""
    return ProduceRequest(
        transactional_id=None,
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
