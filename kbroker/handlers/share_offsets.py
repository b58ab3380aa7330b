"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932),
every version: the wire side of kbroker/share/offsets.py.

Authorization, as Kafka's: describing needs DESCRIBE on the group and on each topic, altering
READ on the group and on each topic, deleting DELETE on the group and READ on each topic
(GROUP_AUTHORIZATION_FAILED for the request, TOPIC_AUTHORIZATION_FAILED for a topic).
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.share.offsets import ShareOffset
from wire.errors import ErrorCode
from wire.messages.alter_share_group_offsets_request import AlterShareGroupOffsetsRequest
from wire.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from wire.messages.delete_share_group_offsets_request import DeleteShareGroupOffsetsRequest
from wire.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from wire.messages.describe_share_group_offsets_request import DescribeShareGroupOffsetsRequest
from wire.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

AUTHORIZATION_FAILED = "Authorization failed."


async def handle_describe_share_group_offsets(
    broker: Broker, header: RequestHeader, request: DescribeShareGroupOffsetsRequest, version: int
) -> DescribeShareGroupOffsetsResponse:
    groups = []
    for wanted in request.groups:
        answer = DescribeShareGroupOffsetsResponseGroup(group_id=wanted.group_id)
        groups.append(answer)
        if not authorize(broker, AclOperation.DESCRIBE, ResourceType.GROUP, wanted.group_id):
            answer.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            answer.error_message = AUTHORIZATION_FAILED
            continue
        topics = (
            None
            if wanted.topics is None
            else [(t.topic_name, list(t.partitions)) for t in wanted.topics]
        )
        refusal, rows = await broker.share_offsets.describe(wanted.group_id, topics)
        if refusal is not None:
            answer.error_code, answer.error_message = refusal.error, refusal.message
            continue
        for topic, topic_rows in _grouped(rows):
            denied = not authorize(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
            answer.topics.append(
                DescribeShareGroupOffsetsResponseTopic(
                    topic_name=topic,
                    topic_id=topic_rows[0].topic_id,
                    partitions=[
                        DescribeShareGroupOffsetsResponsePartition(
                            partition_index=r.partition,
                            start_offset=r.start_offset,
                            leader_epoch=r.leader_epoch,
                            lag=r.lag,
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED if denied else r.error,
                            error_message=AUTHORIZATION_FAILED if denied else r.message,
                        )
                        for r in topic_rows
                    ],
                )
            )
    return DescribeShareGroupOffsetsResponse(groups=groups)


def _grouped(rows: list[ShareOffset]) -> list[tuple[str, list[ShareOffset]]]:
    """Rows by topic, in their order."""
    return [(topic, list(group)) for topic, group in groupby(rows, key=lambda r: r.topic)]


async def handle_alter_share_group_offsets(
    broker: Broker, header: RequestHeader, request: AlterShareGroupOffsetsRequest, version: int
) -> AlterShareGroupOffsetsResponse:
    if not authorize(broker, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AlterShareGroupOffsetsResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=AUTHORIZATION_FAILED
        )
    denied = {
        t.topic_name
        for t in request.topics
        if not authorize(broker, AclOperation.READ, ResourceType.TOPIC, t.topic_name)
    }
    wanted = [
        (t.topic_name, p.partition_index, p.start_offset)
        for t in request.topics
        if t.topic_name not in denied
        for p in t.partitions
    ]
    refusal, rows = await broker.share_offsets.alter(request.group_id, wanted)
    if refusal is not None:
        return AlterShareGroupOffsetsResponse(
            error_code=refusal.error, error_message=refusal.message
        )
    responses = [
        AlterShareGroupOffsetsResponseTopic(
            topic_name=topic,
            topic_id=topic_rows[0].topic_id,
            partitions=[
                AlterShareGroupOffsetsResponsePartition(
                    partition_index=r.partition, error_code=r.error, error_message=r.message
                )
                for r in topic_rows
            ],
        )
        for topic, topic_rows in _grouped(rows)
    ]
    for t in request.topics:
        if t.topic_name in denied:
            responses.append(
                AlterShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name,
                    partitions=[
                        AlterShareGroupOffsetsResponsePartition(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            error_message=AUTHORIZATION_FAILED,
                        )
                        for p in t.partitions
                    ],
                )
            )
    return AlterShareGroupOffsetsResponse(responses=responses)


async def handle_delete_share_group_offsets(
    broker: Broker, header: RequestHeader, request: DeleteShareGroupOffsetsRequest, version: int
) -> DeleteShareGroupOffsetsResponse:
    if not authorize(broker, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return DeleteShareGroupOffsetsResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=AUTHORIZATION_FAILED
        )
    names = [t.topic_name for t in request.topics]
    denied = {n for n in names if not authorize(broker, AclOperation.READ, ResourceType.TOPIC, n)}
    refusal, rows = await broker.share_offsets.delete(
        request.group_id, [n for n in names if n not in denied]
    )
    if refusal is not None:
        return DeleteShareGroupOffsetsResponse(
            error_code=refusal.error, error_message=refusal.message
        )
    by_name = {r.topic: r for r in rows}
    responses = []
    for name in names:
        row = by_name.get(name)
        if row is None:
            responses.append(
                DeleteShareGroupOffsetsResponseTopic(
                    topic_name=name,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message=AUTHORIZATION_FAILED,
                )
            )
        else:
            responses.append(
                DeleteShareGroupOffsetsResponseTopic(
                    topic_name=name,
                    topic_id=row.topic_id,
                    error_code=row.error,
                    error_message=row.message,
                )
            )
    return DeleteShareGroupOffsetsResponse(responses=responses)
