"""The share-state APIs between brokers (KIP-932): Initialize, Read, Write, Delete and
ReadSummary ShareGroupState, served by the share coordinator (kbroker/share/coordinator.py).

Partition leaders and group coordinators on other brokers send them (kbroker/share/persister.py),
as Kafka's do. Authorization is Kafka's: CLUSTER_ACTION on the cluster, else every partition
answers CLUSTER_AUTHORIZATION_FAILED. A request without topics, with a topic without
partitions, or without a group id gets an empty answer, as Kafka 4.3 gives. Each partition
gets its own answer, from the coordinator of its key: NOT_COORDINATOR when that is not this
broker, COORDINATOR_LOAD_IN_PROGRESS while it loads, or the coordinator's own error
(INVALID_REQUEST, FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION ...)
with Kafka's message.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from kbroker.authorization import authorize
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kbroker.share.persister_api import SharePartitionState, StateBatch
from kbroker.share.state_records import ShareStateKey
from wire.errors import ErrorCode, KafkaError
from wire.messages import (
    delete_share_group_state_response as delete_response,
)
from wire.messages import (
    initialize_share_group_state_response as initialize_response,
)
from wire.messages import (
    read_share_group_state_response as read_response,
)
from wire.messages import (
    read_share_group_state_summary_response as summary_response,
)
from wire.messages import (
    write_share_group_state_response as write_response,
)
from wire.messages.delete_share_group_state_request import DeleteShareGroupStateRequest
from wire.messages.initialize_share_group_state_request import InitializeShareGroupStateRequest
from wire.messages.read_share_group_state_request import ReadShareGroupStateRequest
from wire.messages.read_share_group_state_summary_request import (
    ReadShareGroupStateSummaryRequest,
)
from wire.messages.request_header import RequestHeader
from wire.messages.write_share_group_state_request import WriteShareGroupStateRequest

if TYPE_CHECKING:
    from kbroker.broker import Broker

P = TypeVar("P", bound="_Partition")
R = TypeVar("R")


class _Partition(Protocol):
    partition: int


class _Topic(Protocol[P]):
    topic_id: uuid.UUID
    partitions: list[P]


def _well_formed(group_id: str, topics: Sequence[_Topic[P]]) -> bool:
    return bool(group_id) and bool(topics) and all(t.partitions for t in topics)


async def _each(
    group_id: str,
    topics: Sequence[_Topic[P]],
    allowed: bool,
    call: Callable[[ShareStateKey, P], Awaitable[R]],
) -> list[tuple[uuid.UUID, list[tuple[P, R | KafkaError]]]]:
    """``call`` for every partition, at once; each one's answer or error."""

    async def one(topic_id: uuid.UUID, partition: P) -> R | KafkaError:
        if not allowed:
            return KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        try:
            return await call(ShareStateKey(group_id, topic_id, partition.partition), partition)
        except KafkaError as exc:
            return exc

    flat = [(t.topic_id, p) for t in topics for p in t.partitions]
    answers = iter(await asyncio.gather(*(one(tid, p) for tid, p in flat)))
    return [(t.topic_id, [(p, next(answers)) for p in t.partitions]) for t in topics]


def _may(broker: Broker) -> bool:
    return authorize(broker, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)


def _code(answer: object) -> ErrorCode:
    return answer.code if isinstance(answer, KafkaError) else ErrorCode.NONE


def _message(answer: object) -> str | None:
    return answer.message if isinstance(answer, KafkaError) else None


async def handle_initialize_share_group_state(
    broker: Broker, header: RequestHeader, request: InitializeShareGroupStateRequest, version: int
) -> initialize_response.InitializeShareGroupStateResponse:
    if not _well_formed(request.group_id, request.topics):
        return initialize_response.InitializeShareGroupStateResponse()
    coordinator = broker.share_coordinator
    outcomes = await _each(
        request.group_id,
        request.topics,
        _may(broker),
        lambda key, p: coordinator.initialize(key, p.state_epoch, p.start_offset),
    )
    return initialize_response.InitializeShareGroupStateResponse(
        results=[
            initialize_response.InitializeStateResult(
                topic_id=topic_id,
                partitions=[
                    initialize_response.PartitionResult(
                        partition=p.partition,
                        error_code=_code(answer),
                        error_message=_message(answer),
                    )
                    for p, answer in answers
                ],
            )
            for topic_id, answers in outcomes
        ]
    )


def _read_result(partition: int, answer: object) -> read_response.PartitionResult:
    if not isinstance(answer, SharePartitionState):
        return read_response.PartitionResult(
            partition=partition, error_code=_code(answer), error_message=_message(answer)
        )
    return read_response.PartitionResult(
        partition=partition,
        state_epoch=answer.state_epoch,
        start_offset=answer.start_offset,
        state_batches=[
            read_response.StateBatch(
                first_offset=b.first_offset,
                last_offset=b.last_offset,
                delivery_state=b.delivery_state,
                delivery_count=b.delivery_count,
            )
            for b in answer.batches
        ],
    )


async def handle_read_share_group_state(
    broker: Broker, header: RequestHeader, request: ReadShareGroupStateRequest, version: int
) -> read_response.ReadShareGroupStateResponse:
    if not _well_formed(request.group_id, request.topics):
        return read_response.ReadShareGroupStateResponse()
    coordinator = broker.share_coordinator
    outcomes = await _each(
        request.group_id,
        request.topics,
        _may(broker),
        lambda key, p: coordinator.read(key, p.leader_epoch),
    )
    return read_response.ReadShareGroupStateResponse(
        results=[
            read_response.ReadStateResult(
                topic_id=topic_id,
                partitions=[_read_result(p.partition, answer) for p, answer in answers],
            )
            for topic_id, answers in outcomes
        ]
    )


async def handle_write_share_group_state(
    broker: Broker, header: RequestHeader, request: WriteShareGroupStateRequest, version: int
) -> write_response.WriteShareGroupStateResponse:
    if not _well_formed(request.group_id, request.topics):
        return write_response.WriteShareGroupStateResponse()
    coordinator = broker.share_coordinator
    outcomes = await _each(
        request.group_id,
        request.topics,
        _may(broker),
        lambda key, p: coordinator.write(
            key,
            SharePartitionState(
                state_epoch=p.state_epoch,
                start_offset=p.start_offset,
                batches=tuple(
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in p.state_batches
                ),
                leader_epoch=p.leader_epoch,
                delivery_complete_count=p.delivery_complete_count,
            ),
        ),
    )
    return write_response.WriteShareGroupStateResponse(
        results=[
            write_response.WriteStateResult(
                topic_id=topic_id,
                partitions=[
                    write_response.PartitionResult(
                        partition=p.partition,
                        error_code=_code(answer),
                        error_message=_message(answer),
                    )
                    for p, answer in answers
                ],
            )
            for topic_id, answers in outcomes
        ]
    )


async def handle_delete_share_group_state(
    broker: Broker, header: RequestHeader, request: DeleteShareGroupStateRequest, version: int
) -> delete_response.DeleteShareGroupStateResponse:
    if not _well_formed(request.group_id, request.topics):
        return delete_response.DeleteShareGroupStateResponse()
    coordinator = broker.share_coordinator
    outcomes = await _each(
        request.group_id, request.topics, _may(broker), lambda key, p: coordinator.delete(key)
    )
    return delete_response.DeleteShareGroupStateResponse(
        results=[
            delete_response.DeleteStateResult(
                topic_id=topic_id,
                partitions=[
                    delete_response.PartitionResult(
                        partition=p.partition,
                        error_code=_code(answer),
                        error_message=_message(answer),
                    )
                    for p, answer in answers
                ],
            )
            for topic_id, answers in outcomes
        ]
    )


def _summary_result(partition: int, answer: object) -> summary_response.PartitionResult:
    if not isinstance(answer, SharePartitionState):
        return summary_response.PartitionResult(
            partition=partition, error_code=_code(answer), error_message=_message(answer)
        )
    return summary_response.PartitionResult(
        partition=partition,
        state_epoch=answer.state_epoch,
        leader_epoch=answer.leader_epoch,
        start_offset=answer.start_offset,
        delivery_complete_count=answer.delivery_complete_count,
    )


async def handle_read_share_group_state_summary(
    broker: Broker,
    header: RequestHeader,
    request: ReadShareGroupStateSummaryRequest,
    version: int,
) -> summary_response.ReadShareGroupStateSummaryResponse:
    if not _well_formed(request.group_id, request.topics):
        return summary_response.ReadShareGroupStateSummaryResponse()
    coordinator = broker.share_coordinator
    outcomes = await _each(
        request.group_id,
        request.topics,
        _may(broker),
        lambda key, p: coordinator.read_summary(key),
    )
    return summary_response.ReadShareGroupStateSummaryResponse(
        results=[
            summary_response.ReadStateSummaryResult(
                topic_id=topic_id,
                partitions=[_summary_result(p.partition, answer) for p, answer in answers],
            )
            for topic_id, answers in outcomes
        ]
    )
