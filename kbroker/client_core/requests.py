"""Requests both shells build the same way, and their answers read once."""

from __future__ import annotations

from collections.abc import Iterable

from kbroker.client_core.metadata import TopicPartition
from wire.errors import ErrorCode
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.messages.list_offsets_response import ListOffsetsResponse

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
