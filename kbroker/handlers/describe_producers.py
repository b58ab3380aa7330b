"""DescribeProducers (KIP-664): the producers a partition leader tracks, with their open
transactions, so operators (kafka-transactions.sh find-hanging, `kbroker cluster describe`)
can find transactions left open.

For each partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, or every producer
of the partition's producer state (kbroker/producer_state.py) with its epoch, last sequence
(-1 without a batch in its epoch), last timestamp, coordinator epoch of its last marker and
the first offset of its open transaction (-1 when none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.handlers.common import leader_partition
from kbroker.security.acls import AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.messages.describe_producers_request import DescribeProducersRequest
from wire.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker


def _describe(broker: Broker, topic: str, index: int) -> PartitionResponse:
    try:
        # READ on the topic, as Kafka asks (kbroker/authorization.py).
        if not authorize(broker, AclOperation.READ, ResourceType.TOPIC, topic):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        partition = leader_partition(broker, topic, index)
    except KafkaError as exc:
        return PartitionResponse(partition_index=index, error_code=exc.code)
    return PartitionResponse(
        partition_index=index,
        error_code=ErrorCode.NONE,
        active_producers=[
            ProducerState(
                producer_id=pid,
                producer_epoch=entry.epoch,
                last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=entry.current_txn_first_offset,
            )
            for pid, entry in sorted(partition.log.producers.entries().items())
        ],
    )


async def handle_describe_producers(
    broker: Broker, header: RequestHeader, request: DescribeProducersRequest, version: int
) -> DescribeProducersResponse:
    return DescribeProducersResponse(
        topics=[
            TopicResponse(
                name=topic.name,
                partitions=[_describe(broker, topic.name, i) for i in topic.partition_indexes],
            )
            for topic in request.topics
        ]
    )
