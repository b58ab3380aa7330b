"""DescribeTopicPartitions (KIP-966): topics and their partitions, paged by a cursor.

What Kafka 4.3's admin client and ``kafka-topics.sh --describe`` use in place of Metadata
when the broker offers it. Behaviour as Kafka 4.3 answers (checked with the same requests):

- no topics named means every topic the principal may describe; named ones that it may not
  are TOPIC_AUTHORIZATION_FAILED, unknown ones UNKNOWN_TOPIC_OR_PARTITION;
- topics come sorted by name; at most ``response_partition_limit`` partitions (at least 1,
  at most ``max.request.partition.size.limit``) are answered, and ``next_cursor`` names the
  first one left out (the next topic's partition 0 when a topic ended exactly at the limit);
- a cursor starts there: the topics before its topic are left out, and a cursor naming a topic
  that is not among those asked for is INVALID_REQUEST for every topic;
- each topic carries its authorized operations (KIP-430); partitions carry leader, epoch,
  replicas, ISR and offline replicas, checked against the live brokers as Metadata is.
  Eligible leader replicas (KIP-966's other half) are not implemented: those lists are null.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize, authorized_operations
from kbroker.security.acls import AclOperation, ResourceType
from wire.errors import ErrorCode
from wire.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from wire.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker


def _partitions(
    broker: Broker, name: str, live: frozenset[int], first: int, limit: int
) -> list[DescribeTopicPartitionsResponsePartition]:
    topic = broker.metadata.topic(name)
    assert topic is not None
    answer = broker.topic_answers.answer(topic, live)
    return [
        DescribeTopicPartitionsResponsePartition(
            error_code=p.error_code,
            partition_index=p.partition_index,
            leader_id=p.leader_id,
            leader_epoch=p.leader_epoch,
            replica_nodes=p.replica_nodes,
            isr_nodes=p.isr_nodes,
            # KIP-966's eligible leader replicas are not kept: empty lists, never null (the
            # Java admin client's describeTopics fails on null).
            eligible_leader_replicas=[],
            last_known_elr=[],
            offline_replicas=p.offline_replicas,
        )
        for p in answer.partitions[first : first + limit]
    ]


async def handle_describe_topic_partitions(
    broker: Broker, header: RequestHeader, request: DescribeTopicPartitionsRequest, version: int
) -> DescribeTopicPartitionsResponse:
    metadata = broker.metadata
    if request.topics:
        names = sorted({t.name for t in request.topics})
    else:
        names = sorted(
            name
            for name in metadata.topics()
            if authorize(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        )
    cursor = request.cursor
    if cursor is not None:
        if cursor.topic_name not in names:
            return DescribeTopicPartitionsResponse(
                topics=[
                    DescribeTopicPartitionsResponseTopic(
                        error_code=ErrorCode.INVALID_REQUEST, name=name
                    )
                    for name in names
                ]
            )
        names = names[names.index(cursor.topic_name) :]
    cap = broker.config.get("max.request.partition.size.limit")
    room = min(max(request.response_partition_limit, 1), cap)
    live = frozenset(b.broker_id for b in metadata.brokers())
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor = None
    for position, name in enumerate(names):
        if not authorize(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append(
                DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name
                )
            )
            continue
        operations = authorized_operations(broker, ResourceType.TOPIC, name)
        info = metadata.topic(name)
        if info is None:
            topics.append(
                DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    name=name,
                    topic_authorized_operations=operations,
                )
            )
            continue
        first = cursor.partition_index if cursor is not None and position == 0 else 0
        partitions = _partitions(broker, name, live, first, room)
        room -= len(partitions)
        topics.append(
            DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.NONE,
                name=name,
                topic_id=info.topic_id,
                is_internal=info.internal,
                partitions=partitions,
                topic_authorized_operations=operations,
            )
        )
        left = len(info.partitions) - first - len(partitions)
        if room == 0 and left > 0:
            next_cursor = Cursor(topic_name=name, partition_index=first + len(partitions))
            break
        if room == 0 and position + 1 < len(names):
            next_cursor = Cursor(topic_name=names[position + 1], partition_index=0)
            break
    return DescribeTopicPartitionsResponse(topics=topics, next_cursor=next_cursor)
