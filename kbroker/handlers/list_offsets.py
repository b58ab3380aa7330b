"""ListOffsets: earliest, latest, by timestamp and max timestamp, every version.

v10 adds a timeout for offsets looked up in remote storage (KIP-1075) and v11 the earliest
offset pending upload (KIP-1023): kbroker has no tiered storage, so the first is never
needed and the tiered special values answer no offset, as Kafka does without remote storage.

"Latest" is the high watermark, or the last stable offset for isolation level
1 (read_committed, v2+, KIP-98): the offset the next visible record will get,
however the log was written. Spark's Kafka source reads exactly up to it
(COMPAT-NOTES). By timestamp answers the first offset whose timestamp is at or
after the target, through the time index, or -1 when there is none below that
same bound.

Authorization (kbroker/authorization.py): DESCRIBE on each topic, as Kafka asks; the
partitions of a topic refused are TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.handlers.common import READ_COMMITTED, check_leader_epoch, leader_partition
from kbroker.security.acls import AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest
from wire.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.partition import Partition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3  # KIP-734, v7+
EARLIEST_LOCAL = -4  # KIP-405, v8+: no tiered storage, so the log start
# Nothing is ever tiered: no offset, as Kafka answers for a topic without remote storage.
LATEST_TIERED = -5  # KIP-1005, v9+
EARLIEST_PENDING_UPLOAD = -6  # KIP-1023, v11+
NOT_TIERED = (LATEST_TIERED, EARLIEST_PENDING_UPLOAD)
NO_OFFSET = (-1, -1)


def _lookup(partition: Partition, timestamp: int, read_committed: bool) -> tuple[int, int]:
    """(timestamp, offset) answered for a target timestamp or a special value."""
    visible_end = partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == LATEST:
        return -1, visible_end
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, partition.log.log_start_offset
    if timestamp in NOT_TIERED:
        return NO_OFFSET
    if timestamp == MAX_TIMESTAMP:
        if partition.high_watermark == partition.log.log_start_offset:
            return NO_OFFSET
        return partition.log.max_timestamp()
    if timestamp < 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"timestamp {timestamp}")
    found = partition.log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= visible_end:
        return NO_OFFSET
    offset, found_timestamp = found
    return found_timestamp, offset


def _answer(
    broker: Broker, topic: str, wanted: ListOffsetsPartition, version: int, isolation_level: int
) -> ListOffsetsPartitionResponse:
    response = ListOffsetsPartitionResponse(partition_index=wanted.partition_index)
    try:
        if not authorize(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        partition = leader_partition(broker, topic, wanted.partition_index)
        check_leader_epoch(partition, wanted.current_leader_epoch)
        if wanted.timestamp == MAX_TIMESTAMP and version < 7:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
        timestamp, offset = _lookup(
            partition, wanted.timestamp, read_committed=isolation_level == READ_COMMITTED
        )
    except KafkaError as exc:
        response.error_code = exc.code
        return response
    if version == 0:
        # v0 answers a list of offsets; one is what any client asks for.
        response.old_style_offsets = [offset] if offset >= 0 and wanted.max_num_offsets > 0 else []
    else:
        response.timestamp = timestamp
        response.offset = offset
        if version >= 4 and offset >= 0:
            response.leader_epoch = partition.leader_epoch
    return response


async def handle_list_offsets(
    broker: Broker, header: RequestHeader, request: ListOffsetsRequest, version: int
) -> ListOffsetsResponse:
    isolation_level = request.isolation_level if version >= 2 else 0
    return ListOffsetsResponse(
        topics=[
            ListOffsetsTopicResponse(
                name=topic.name,
                partitions=[
                    _answer(broker, topic.name, p, version, isolation_level)
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )
