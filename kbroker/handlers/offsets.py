"""Committed-offset APIs: OffsetCommit, OffsetFetch, OffsetDelete, every version.

Version differences handled here: OffsetCommit v0 has no generation or member (a "simple"
commit), v1 carries a commit timestamp per partition, v2-v4 a retention time that sets an
explicit expiry, v6+ the committed leader epoch. OffsetFetch v0-v1 report group errors per
partition, v2-v7 in a top-level error, v8+ per group (several groups in one request); v2+ may ask
for all of a group's offsets with a null topic list. Both name topics by id from v10: an id the
broker does not know is answered UNKNOWN_TOPIC_ID for its partitions, and offsets kept for a
topic that no longer exists are left out of a v10 answer for all of a group's offsets.

Authorization (kbroker/authorization.py), as Kafka's: committing needs READ on the group
(else every partition is GROUP_AUTHORIZATION_FAILED) and on each topic (else its
partitions are TOPIC_AUTHORIZATION_FAILED), in a transaction also WRITE on the
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); fetching needs DESCRIBE on the
group and on each topic (a fetch of all offsets leaves the other topics out); deleting
needs DELETE on the group and READ on each topic.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.features import TRANSACTION_VERSION
from kbroker.group.coordinator import TxnOffsetVerification
from kbroker.group.events import TopicPartition
from kbroker.group.offsets_store import NO_TIMESTAMP, OffsetValue
from kbroker.handlers.common import topic_name
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.txn.log_records import TV_2
from wire.errors import ErrorCode
from wire.messages.offset_commit_request import OffsetCommitRequest
from wire.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from wire.messages.offset_delete_request import OffsetDeleteRequest
from wire.messages.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from wire.messages.offset_fetch_request import OffsetFetchRequest
from wire.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from wire.messages.request_header import RequestHeader
from wire.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from wire.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from wire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kbroker.broker import Broker

NO_OFFSET = -1
NO_METADATA = ""
RETENTION_VERSIONS = range(2, 5)
COMMIT_TIMESTAMP_VERSION = 1
FIRST_TOP_LEVEL_FETCH_ERROR_VERSION = 2
FIRST_MULTI_GROUP_FETCH_VERSION = 8
# OffsetCommit and OffsetFetch v10 name topics by id (KIP-848's topic ids).
FIRST_TOPIC_ID_VERSION = 10
# TxnOffsetCommit v4 knows TRANSACTION_ABORTABLE; with v5 and transaction version 2 the
# offsets partition joins the transaction without AddOffsetsToTxn (KIP-890).
FIRST_ABORTABLE_TXN_COMMIT_VERSION = 4
FIRST_IMPLICIT_ADD_OFFSETS_VERSION = 5


def _group_partitions(pairs: list[tuple[str, list[int]]]) -> list[TopicPartition]:
    return [(topic, p) for topic, partitions in pairs for p in partitions]


def _may_group(broker: Broker, operation: AclOperation, group_id: str) -> bool:
    return authorize(broker, operation, ResourceType.GROUP, group_id)


def _refused_topics(
    broker: Broker, operation: AclOperation, topics: set[str] | list[str]
) -> set[str]:
    return {t for t in topics if not authorize(broker, operation, ResourceType.TOPIC, t)}


def _split_refused(
    broker: Broker, offsets: dict[TopicPartition, OffsetValue], group_op: AclOperation, group: str
) -> tuple[dict[TopicPartition, OffsetValue], dict[TopicPartition, ErrorCode]]:
    """(offsets that may be committed, the refused partitions with their error)."""
    if not _may_group(broker, group_op, group):
        return {}, dict.fromkeys(offsets, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = _refused_topics(broker, AclOperation.READ, {t for t, _ in offsets})
    return (
        {tp: v for tp, v in offsets.items() if tp[0] not in refused},
        {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in offsets if tp[0] in refused},
    )


def _by_topic(results: dict[TopicPartition, ErrorCode]) -> dict[str, list[tuple[int, ErrorCode]]]:
    topics: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (topic, partition), error in results.items():
        topics.setdefault(topic, []).append((partition, error))
    return topics


async def handle_offset_commit(
    broker: Broker, header: RequestHeader, request: OffsetCommitRequest, version: int
) -> OffsetCommitResponse:
    now = int(broker.clock() * 1000)
    by_id = version >= FIRST_TOPIC_ID_VERSION
    offsets: dict[TopicPartition, OffsetValue] = {}
    unknown_ids: list[OffsetCommitResponseTopic] = []
    ids: dict[str, uuid.UUID] = {}
    for topic in request.topics:
        name = topic_name(broker, topic.name, topic.topic_id, by_id)
        if name is None:
            unknown_ids.append(
                OffsetCommitResponseTopic(
                    topic_id=topic.topic_id,
                    partitions=[
                        OffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                        )
                        for p in topic.partitions
                    ],
                )
            )
            continue
        ids[name] = topic.topic_id
        for p in topic.partitions:
            commit_ts = now
            if version == COMMIT_TIMESTAMP_VERSION and p.commit_timestamp != NO_TIMESTAMP:
                commit_ts = p.commit_timestamp
            expire_ts = NO_TIMESTAMP
            if version in RETENTION_VERSIONS and request.retention_time_ms != -1:
                expire_ts = commit_ts + request.retention_time_ms
            offsets[(name, p.partition_index)] = OffsetValue(
                offset=p.committed_offset,
                metadata=p.committed_metadata if p.committed_metadata is not None else NO_METADATA,
                commit_timestamp=commit_ts,
                leader_epoch=p.committed_leader_epoch,
                expire_timestamp=expire_ts,
            )
    offsets, refused = _split_refused(broker, offsets, AclOperation.READ, request.group_id)
    errors: dict[TopicPartition, ErrorCode] = {}
    if offsets or not refused:
        errors = await broker.group_coordinator.commit_offsets(
            request.group_id,
            request.member_id,
            request.group_instance_id,
            request.generation_id_or_member_epoch,
            version,
            offsets,
        )
    errors = {**errors, **refused}
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=name,
                topic_id=ids.get(name, ZERO_UUID),
                partitions=[
                    OffsetCommitResponsePartition(partition_index=p, error_code=e)
                    for p, e in partitions
                ],
            )
            for name, partitions in _by_topic(errors).items()
        ]
        + unknown_ids
    )


def _fetch_offsets(
    broker: Broker,
    group_id: str,
    wanted: list[TopicPartition] | None,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, dict[TopicPartition, OffsetValue | None], dict[TopicPartition, ErrorCode]]:
    """(group error, offsets, refused partitions) for the principal of the request; ``member``
    is the (member id, epoch) an OffsetFetch v9+ names."""
    if not _may_group(broker, AclOperation.DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}, {}
    coordinator = broker.group_coordinator
    if wanted is None:
        error, offsets = coordinator.fetch_offsets(group_id, None, member)
        hidden = _refused_topics(broker, AclOperation.DESCRIBE, {t for t, _ in offsets})
        return error, {tp: v for tp, v in offsets.items() if tp[0] not in hidden}, {}
    refused = _refused_topics(broker, AclOperation.DESCRIBE, {t for t, _ in wanted})
    if not refused:
        return (*coordinator.fetch_offsets(group_id, wanted, member), {})
    error, offsets = coordinator.fetch_offsets(
        group_id, [tp for tp in wanted if tp[0] not in refused], member
    )
    offsets = {**offsets, **dict.fromkeys(tp for tp in wanted if tp[0] in refused)}
    return (
        error,
        offsets,
        {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in offsets if tp[0] in refused},
    )


async def handle_offset_fetch(
    broker: Broker, header: RequestHeader, request: OffsetFetchRequest, version: int
) -> OffsetFetchResponse:
    if version >= FIRST_MULTI_GROUP_FETCH_VERSION:
        by_id = version >= FIRST_TOPIC_ID_VERSION
        groups = []
        for group in request.groups:
            wanted = None
            unknown_ids: list[OffsetFetchResponseTopics] = []
            if group.topics is not None:
                named = []
                for t in group.topics:
                    name = topic_name(broker, t.name, t.topic_id, by_id)
                    if name is None:
                        unknown_ids.append(_unknown_topic_id(t.topic_id, t.partition_indexes))
                    else:
                        named.append((name, t.partition_indexes))
                wanted = _group_partitions(named)
            error, offsets, refused = _fetch_offsets(
                broker, group.group_id, wanted, (group.member_id, group.member_epoch)
            )
            if by_id:
                # Offsets of a topic that no longer exists cannot be named by id.
                offsets = {
                    tp: v for tp, v in offsets.items() if _topic_id(broker, tp[0]) != ZERO_UUID
                }
            unstable = _unstable(broker, group.group_id, offsets, request.require_stable)
            topics: dict[str, list[OffsetFetchResponsePartitions]] = {}
            for (topic, partition), value in offsets.items():
                if (topic, partition) in unstable:
                    value = None
                topics.setdefault(topic, []).append(
                    OffsetFetchResponsePartitions(
                        partition_index=partition,
                        committed_offset=NO_OFFSET if value is None else value.offset,
                        committed_leader_epoch=-1 if value is None else value.leader_epoch,
                        metadata=NO_METADATA if value is None else value.metadata,
                        error_code=_partition_error(
                            refused.get((topic, partition), ErrorCode.NONE),
                            (topic, partition),
                            unstable,
                        ),
                    )
                )
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    error_code=error,
                    topics=[
                        OffsetFetchResponseTopics(
                            name=name,
                            topic_id=_topic_id(broker, name) if by_id else ZERO_UUID,
                            partitions=parts,
                        )
                        for name, parts in topics.items()
                    ]
                    + unknown_ids,
                )
            )
        return OffsetFetchResponse(groups=groups)

    requested = (
        None
        if request.topics is None
        else _group_partitions([(t.name, t.partition_indexes) for t in request.topics])
    )
    error, offsets, refused = _fetch_offsets(broker, request.group_id, requested)
    per_partition_error = ErrorCode.NONE
    if error != ErrorCode.NONE:
        if version >= FIRST_TOP_LEVEL_FETCH_ERROR_VERSION:
            return OffsetFetchResponse(error_code=error)
        # v0-v1 have no top-level error: every requested partition carries it.
        per_partition_error = error
        offsets = dict.fromkeys(requested or [])
        refused = {}
    unstable = _unstable(broker, request.group_id, offsets, request.require_stable)
    single: dict[str, list[OffsetFetchResponsePartition]] = {}
    for (topic, partition), value in offsets.items():
        if (topic, partition) in unstable:
            value = None
        single.setdefault(topic, []).append(
            OffsetFetchResponsePartition(
                partition_index=partition,
                committed_offset=NO_OFFSET if value is None else value.offset,
                committed_leader_epoch=-1 if value is None else value.leader_epoch,
                metadata=NO_METADATA if value is None else value.metadata,
                error_code=_partition_error(
                    refused.get((topic, partition), per_partition_error),
                    (topic, partition),
                    unstable,
                ),
            )
        )
    return OffsetFetchResponse(
        topics=[
            OffsetFetchResponseTopic(name=name, partitions=parts) for name, parts in single.items()
        ]
    )


def _topic_id(broker: Broker, name: str) -> uuid.UUID:
    """The id of a topic, the zero UUID when it does not exist."""
    info = broker.metadata.topic(name)
    return info.topic_id if info is not None else ZERO_UUID


def _unknown_topic_id(topic_id: uuid.UUID, partitions: list[int]) -> OffsetFetchResponseTopics:
    return OffsetFetchResponseTopics(
        topic_id=topic_id,
        partitions=[
            OffsetFetchResponsePartitions(
                partition_index=p,
                committed_offset=NO_OFFSET,
                metadata=NO_METADATA,
                error_code=ErrorCode.UNKNOWN_TOPIC_ID,
            )
            for p in partitions
        ],
    )


def _unstable(
    broker: Broker,
    group_id: str,
    offsets: dict[TopicPartition, OffsetValue | None],
    require_stable: bool,
) -> set[TopicPartition]:
    """With require_stable (OffsetFetch v7+, KIP-447): the partitions whose offset awaits a
    transaction marker."""
    if not require_stable:
        return set()
    return broker.group_coordinator.unstable_offsets(group_id, offsets)


def _partition_error(
    error: ErrorCode, tp: TopicPartition, unstable: set[TopicPartition]
) -> ErrorCode:
    return ErrorCode.UNSTABLE_OFFSET_COMMIT if tp in unstable else error


async def handle_txn_offset_commit(
    broker: Broker, header: RequestHeader, request: TxnOffsetCommitRequest, version: int
) -> TxnOffsetCommitResponse:
    """Offsets written in the producer's transaction (KIP-98, KIP-447 for the member fields of
    v3+), visible once the transaction commits; verified with the transaction coordinator
    first when they open the transaction on the group's offsets partition (KIP-890)."""
    now = int(broker.clock() * 1000)
    offsets = {
        (topic.name, p.partition_index): OffsetValue(
            offset=p.committed_offset,
            metadata=p.committed_metadata if p.committed_metadata is not None else NO_METADATA,
            commit_timestamp=now,
            leader_epoch=p.committed_leader_epoch,
        )
        for topic in request.topics
        for p in topic.partitions
    }
    if not authorize(
        broker, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        offsets, refused = (
            {},
            dict.fromkeys(offsets, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        )
    else:
        offsets, refused = _split_refused(broker, offsets, AclOperation.READ, request.group_id)
    errors: dict[TopicPartition, ErrorCode] = {}
    if offsets or not refused:
        verification = None
        if broker.config.get("transaction.partition.verification.enable"):
            verification = TxnOffsetVerification(
                request.transactional_id,
                add=version >= FIRST_IMPLICIT_ADD_OFFSETS_VERSION
                and broker.features.level(TRANSACTION_VERSION) >= TV_2,
                abortable_known=version >= FIRST_ABORTABLE_TXN_COMMIT_VERSION,
            )
        errors = await broker.group_coordinator.commit_txn_offsets(
            request.group_id,
            request.producer_id,
            request.producer_epoch,
            request.member_id,
            request.group_instance_id,
            request.generation_id,
            offsets,
            verification,
        )
    errors = {**errors, **refused}
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                name=name,
                partitions=[
                    TxnOffsetCommitResponsePartition(partition_index=p, error_code=e)
                    for p, e in partitions
                ],
            )
            for name, partitions in _by_topic(errors).items()
        ]
    )


async def handle_offset_delete(
    broker: Broker, header: RequestHeader, request: OffsetDeleteRequest, version: int
) -> OffsetDeleteResponse:
    if not _may_group(broker, AclOperation.DELETE, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = _refused_topics(broker, AclOperation.READ, [t.name for t in request.topics])
    unknown: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    for topic in request.topics:
        info = broker.metadata.topic(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name in refused:
                unknown[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < len(info.partitions):
                unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(tp)
    error, errors = broker.group_coordinator.delete_offsets(request.group_id, known)
    if error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=error)
    results = {**errors, **unknown}
    return OffsetDeleteResponse(
        topics=[
            OffsetDeleteResponseTopic(
                name=name,
                partitions=[
                    OffsetDeleteResponsePartition(partition_index=p, error_code=e)
                    for p, e in partitions
                ],
            )
            for name, partitions in _by_topic(results).items()
        ]
    )
