"""DeleteRecords: move a partition's log start offset forward (KIP-107).

Offset -1 means the high watermark. An offset past the high watermark is
OFFSET_OUT_OF_RANGE; records before the new start are no longer served, and
whole segments below it are removed by the log. It needs DELETE on the topic
(TOPIC_AUTHORIZATION_FAILED, kbroker/authorization.py), as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.handlers.common import leader_partition
from kbroker.security.acls import AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.messages.delete_records_request import DeleteRecordsPartition, DeleteRecordsRequest
from wire.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

HIGH_WATERMARK = -1


def _delete(
    broker: Broker, topic: str, wanted: DeleteRecordsPartition
) -> DeleteRecordsPartitionResult:
    try:
        if not authorize(broker, AclOperation.DELETE, ResourceType.TOPIC, topic):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        partition = leader_partition(broker, topic, wanted.partition_index)
        offset = partition.high_watermark if wanted.offset == HIGH_WATERMARK else wanted.offset
        if not 0 <= offset <= partition.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
        low_watermark = partition.delete_records_before(offset)
    except KafkaError as exc:
        return DeleteRecordsPartitionResult(
            partition_index=wanted.partition_index, low_watermark=-1, error_code=exc.code
        )
    return DeleteRecordsPartitionResult(
        partition_index=wanted.partition_index,
        low_watermark=low_watermark,
        error_code=ErrorCode.NONE,
    )


async def handle_delete_records(
    broker: Broker, header: RequestHeader, request: DeleteRecordsRequest, version: int
) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(
        topics=[
            DeleteRecordsTopicResult(
                name=topic.name,
                partitions=[_delete(broker, topic.name, p) for p in topic.partitions],
            )
            for topic in request.topics
        ]
    )
