"""OffsetForLeaderEpoch: where a leader epoch ended in this log (KIP-101, KIP-279).

Followers use the answer to find where their log diverged from the leader's;
consumers use it to detect truncation after a leader change (KIP-320).

Authorization (kbroker/authorization.py), as Kafka's: CLUSTER_ACTION on the cluster (the
brokers) allows every topic, else DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.handlers.common import check_leader_epoch, leader_partition
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from wire.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker


def _answer(
    broker: Broker, topic: str, wanted: OffsetForLeaderPartition, allowed: bool
) -> EpochEndOffset:
    try:
        if not allowed:
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        partition = leader_partition(broker, topic, wanted.partition)
        check_leader_epoch(partition, wanted.current_leader_epoch)
        epoch, end_offset = partition.log.end_offset_for_epoch(wanted.leader_epoch)
    except KafkaError as exc:
        return EpochEndOffset(error_code=exc.code, partition=wanted.partition)
    return EpochEndOffset(
        error_code=ErrorCode.NONE,
        partition=wanted.partition,
        leader_epoch=epoch,
        end_offset=end_offset,
    )


async def handle_offset_for_leader_epoch(
    broker: Broker, header: RequestHeader, request: OffsetForLeaderEpochRequest, version: int
) -> OffsetForLeaderEpochResponse:
    cluster = authorize(broker, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    results = []
    for topic in request.topics:
        allowed = cluster or authorize(
            broker, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic
        )
        results.append(
            OffsetForLeaderTopicResult(
                topic=topic.topic,
                partitions=[_answer(broker, topic.topic, p, allowed) for p in topic.partitions],
            )
        )
    return OffsetForLeaderEpochResponse(topics=results)
