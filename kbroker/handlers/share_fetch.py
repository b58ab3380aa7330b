"""ShareFetch and ShareAcknowledge (KIP-932), every version: translate between the wire and the
share partition manager (kbroker/share/manager.py).

A ShareFetch first moves the member's share session on (kbroker/share/sessions.py), then
applies the acknowledgements it carries, then acquires records of the session's partitions
(none with ShareSessionEpoch -1, which closes the session). An opening fetch (epoch 0) answers
every partition it names; later ones only the partitions with records, errors or
acknowledgement results, as Kafka does. A session closed or replaced releases the records its
member held. ``AcquisitionLockTimeoutMs`` is the group's record lock duration.

Authorization, as Kafka's: READ on the group (GROUP_AUTHORIZATION_FAILED for the whole
request) and READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.handlers.common import LEADER_MOVED, broker_endpoints, current_leader
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.server.connection import CONNECTION_ID
from kbroker.share.manager import FetchedPartition
from kbroker.share.sessions import CLOSE_EPOCH, OPEN_EPOCH, SharePartitionKey
from kbroker.share.share_partition import AckBatch, AcquireMode
from wire.errors import ErrorCode, KafkaError
from wire.messages.request_header import RequestHeader
from wire.messages.share_acknowledge_request import (
    AcknowledgementBatch,
    ShareAcknowledgeRequest,
)
from wire.messages.share_acknowledge_response import LeaderIdAndEpoch as AckLeader
from wire.messages.share_acknowledge_response import NodeEndpoint as AckEndpoint
from wire.messages.share_acknowledge_response import PartitionData as AckPartitionData
from wire.messages.share_acknowledge_response import (
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from wire.messages.share_fetch_request import AcknowledgementBatch as FetchAckBatch
from wire.messages.share_fetch_request import ShareFetchRequest
from wire.messages.share_fetch_response import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchResponse,
)

if TYPE_CHECKING:
    from kbroker.broker import Broker

# The Java client's max.poll.records, for a request that sets no MaxRecords.
DEFAULT_MAX_RECORDS = 500

Acks = dict[SharePartitionKey, list[AckBatch]]


def _topic_name(broker: Broker, topic_id: uuid.UUID) -> str | None:
    info = broker.metadata.topic_by_id(topic_id)
    return info.name if info is not None else None


def _denied(
    broker: Broker, keys: Iterable[SharePartitionKey]
) -> dict[SharePartitionKey, ErrorCode]:
    """The partitions this request may not read, with why."""
    out: dict[SharePartitionKey, ErrorCode] = {}
    for key in keys:
        name = _topic_name(broker, key[0])
        if name is None:
            out[key] = ErrorCode.UNKNOWN_TOPIC_ID
        elif not authorize(broker, AclOperation.READ, ResourceType.TOPIC, name):
            out[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return out


def _ack_batches(batches: Iterable[FetchAckBatch | AcknowledgementBatch]) -> list[AckBatch]:
    return [AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in batches]


async def _use_session(
    broker: Broker,
    group_id: str,
    member_id: str,
    epoch: int,
    added: list[SharePartitionKey],
    forgotten: list[SharePartitionKey],
) -> tuple[list[SharePartitionKey], set[SharePartitionKey]]:
    """Move the session on: the partitions it now has (none once closed), and those of the
    session this request closes, whose member's records the caller releases after this
    request's acknowledgements. A session replaced by a new one gives its member's records
    back at once."""
    manager = broker.share_partitions
    use = manager.sessions.use(group_id, member_id, epoch, added, forgotten, CONNECTION_ID.get())
    if use.ended is not None and epoch == OPEN_EPOCH:
        await manager.release(group_id, member_id, use.ended.partitions)
    if use.session is None:
        return [], set(use.ended.partitions) if use.ended is not None else set()
    return sorted(use.session.partitions, key=lambda k: (k[0].bytes, k[1])), set()


async def handle_share_fetch(
    broker: Broker, header: RequestHeader, request: ShareFetchRequest, version: int
) -> ShareFetchResponse:
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    if not authorize(broker, AclOperation.READ, ResourceType.GROUP, group_id):
        return ShareFetchResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id or not member_id:
        return ShareFetchResponse(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message="GroupId and MemberId must be set.",
        )
    manager = broker.share_partitions
    named = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    acks: Acks = {
        (t.topic_id, p.partition_index): _ack_batches(p.acknowledgement_batches)
        for t in request.topics
        for p in t.partitions
        if p.acknowledgement_batches
    }
    try:
        keys, closed = await _use_session(
            broker, group_id, member_id, request.share_session_epoch, named, forgotten
        )
    except KafkaError as exc:
        return ShareFetchResponse(error_code=exc.code, error_message=exc.message)
    denied = _denied(broker, {*named, *keys})
    answers: dict[SharePartitionKey, FetchedPartition] = {
        key: FetchedPartition(*key, error=error) for key, error in denied.items()
    }
    results = await manager.acknowledge(
        group_id,
        member_id,
        {k: v for k, v in acks.items() if k not in denied},
        request.is_renew_ack,
    )
    if request.share_session_epoch == CLOSE_EPOCH:
        await manager.release(group_id, member_id, closed)
    else:
        fetched = await manager.fetch(
            group_id,
            member_id,
            [k for k in keys if k not in denied],
            max_wait_ms=request.max_wait_ms,
            max_bytes=request.max_bytes,
            max_records=request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS,
            mode=AcquireMode(request.share_acquire_mode)
            if request.share_acquire_mode in (0, 1)
            else AcquireMode.BATCH_OPTIMIZED,
        )
        answers.update(fetched)
    for key, (error, message) in results.items():
        answer = answers.setdefault(key, FetchedPartition(*key))
        answer.ack_error, answer.ack_message = error, message
    full = request.share_session_epoch == OPEN_EPOCH
    shown = [
        a
        for key, a in sorted(answers.items(), key=lambda item: (item[0][0].bytes, item[0][1]))
        if full and key in named or a.acquired or a.error != ErrorCode.NONE or key in results
    ]
    return _fetch_response(broker, version, group_id, shown)


def _fetch_response(
    broker: Broker, version: int, group_id: str, shown: list[FetchedPartition]
) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[PartitionData]] = {}
    leaders: set[int] = set()
    for a in shown:
        data = PartitionData(
            partition_index=a.partition,
            error_code=a.error,
            error_message=a.message,
            acknowledge_error_code=a.ack_error,
            acknowledge_error_message=a.ack_message,
            records=a.records,
            acquired_records=[
                AcquiredRecords(
                    first_offset=r.first_offset,
                    last_offset=r.last_offset,
                    delivery_count=r.delivery_count,
                )
                for r in a.acquired
            ],
        )
        leader = _leader(broker, a.topic_id, a.partition, a.error)
        if leader is not None:
            data.current_leader = LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
            if leader[0] >= 0:
                leaders.add(leader[0])
        by_topic.setdefault(a.topic_id, []).append(data)
    return ShareFetchResponse(
        acquisition_lock_timeout_ms=broker.share_partitions.lock_duration_ms(group_id),
        responses=[
            ShareFetchableTopicResponse(topic_id=t, partitions=parts)
            for t, parts in by_topic.items()
        ],
        node_endpoints=[
            NodeEndpoint(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
            for b in broker_endpoints(broker, leaders)
        ],
    )


def _leader(
    broker: Broker, topic_id: uuid.UUID, partition: int, error: ErrorCode
) -> tuple[int, int] | None:
    """The current leader to tell a client that asked the wrong broker (KIP-951)."""
    if error not in LEADER_MOVED:
        return None
    name = _topic_name(broker, topic_id)
    return None if name is None else current_leader(broker, name, partition)


async def handle_share_acknowledge(
    broker: Broker, header: RequestHeader, request: ShareAcknowledgeRequest, version: int
) -> ShareAcknowledgeResponse:
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    if not authorize(broker, AclOperation.READ, ResourceType.GROUP, group_id):
        return ShareAcknowledgeResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id or not member_id:
        return ShareAcknowledgeResponse(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message="GroupId and MemberId must be set.",
        )
    manager = broker.share_partitions
    acks: Acks = {
        (t.topic_id, p.partition_index): _ack_batches(p.acknowledgement_batches)
        for t in request.topics
        for p in t.partitions
    }
    try:
        _, closed = await _use_session(
            broker, group_id, member_id, request.share_session_epoch, [], []
        )
    except KafkaError as exc:
        return ShareAcknowledgeResponse(error_code=exc.code, error_message=exc.message)
    denied = _denied(broker, acks)
    results: dict[SharePartitionKey, tuple[ErrorCode, str | None]] = {
        key: (error, None) for key, error in denied.items()
    }
    results.update(
        await manager.acknowledge(
            group_id,
            member_id,
            {k: v for k, v in acks.items() if k not in denied},
            request.is_renew_ack,
        )
    )
    if request.share_session_epoch == CLOSE_EPOCH:
        await manager.release(group_id, member_id, closed)
    by_topic: dict[uuid.UUID, list[AckPartitionData]] = {}
    leaders: set[int] = set()
    for key, (error, message) in sorted(results.items(), key=lambda i: (i[0][0].bytes, i[0][1])):
        data = AckPartitionData(partition_index=key[1], error_code=error, error_message=message)
        leader = _leader(broker, key[0], key[1], error)
        if leader is not None:
            data.current_leader = AckLeader(leader_id=leader[0], leader_epoch=leader[1])
            if leader[0] >= 0:
                leaders.add(leader[0])
        by_topic.setdefault(key[0], []).append(data)
    return ShareAcknowledgeResponse(
        acquisition_lock_timeout_ms=manager.lock_duration_ms(group_id),
        responses=[
            ShareAcknowledgeTopicResponse(topic_id=t, partitions=parts)
            for t, parts in by_topic.items()
        ],
        node_endpoints=[
            AckEndpoint(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
            for b in broker_endpoints(broker, leaders)
        ],
    )
