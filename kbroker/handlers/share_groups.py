"""The share group membership APIs (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe, every
version. Each translates between the wire messages and the group coordinator
(kbroker/group/share_heartbeat.py holds the protocol itself).

Authorization (kbroker/authorization.py), as Kafka's: a heartbeat needs READ on the group,
describing DESCRIBE on it (GROUP_AUTHORIZATION_FAILED), with the authorized operations when
asked (KIP-430).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize, authorized_operations
from kbroker.group.events import ShareHeartbeat
from kbroker.handlers.group_assignments import (
    Assignment,
    described_assignment,
    heartbeat_assignment,
)
from kbroker.security.acls import OPERATIONS_NOT_REQUESTED, AclOperation, ResourceType
from kbroker.server.connection import CLIENT_HOST
from wire.errors import ErrorCode
from wire.messages.request_header import RequestHeader
from wire.messages.share_group_describe_request import ShareGroupDescribeRequest
from wire.messages.share_group_describe_response import Assignment as DescribedAssignment
from wire.messages.share_group_describe_response import (
    DescribedGroup,
    Member,
    ShareGroupDescribeResponse,
    TopicPartitions,
)
from wire.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from wire.messages.share_group_heartbeat_response import Assignment as HeartbeatAssignment
from wire.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from wire.messages.share_group_heartbeat_response import (
    TopicPartitions as HeartbeatTopicPartitions,
)

if TYPE_CHECKING:
    from kbroker.broker import Broker

# The only assignor of share groups (KIP-932).
SIMPLE_ASSIGNOR = "simple"


async def handle_share_group_heartbeat(
    broker: Broker, header: RequestHeader, request: ShareGroupHeartbeatRequest, version: int
) -> ShareGroupHeartbeatResponse:
    if not authorize(broker, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    result = await broker.group_coordinator.share_heartbeat(
        ShareHeartbeat(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            rack_id=request.rack_id,
            subscribed_topic_names=(
                None
                if request.subscribed_topic_names is None
                else tuple(request.subscribed_topic_names)
            ),
            client_id=header.client_id or "",
            client_host=CLIENT_HOST.get(),
        )
    )
    return ShareGroupHeartbeatResponse(
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=heartbeat_assignment(
            result.assignment, HeartbeatAssignment, HeartbeatTopicPartitions
        ),
    )


def _described(broker: Broker, assignment: Assignment) -> DescribedAssignment:
    return described_assignment(broker, assignment, DescribedAssignment, TopicPartitions)


async def handle_share_group_describe(
    broker: Broker, header: RequestHeader, request: ShareGroupDescribeRequest, version: int
) -> ShareGroupDescribeResponse:
    groups = []
    for group_id in request.group_ids:
        if not authorize(broker, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(
                DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id)
            )
            continue
        found = broker.group_coordinator.describe_share_group(group_id)
        groups.append(
            DescribedGroup(
                error_code=found.error,
                error_message=found.message,
                group_id=group_id,
                group_state=found.state,
                group_epoch=found.group_epoch,
                assignment_epoch=found.assignment_epoch,
                assignor_name=SIMPLE_ASSIGNOR,
                members=[
                    Member(
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=sorted(m.subscribed_topic_names),
                        assignment=described_assignment(
                            broker, m.assigned, DescribedAssignment, TopicPartitions
                        ),
                    )
                    for m in found.members
                ],
                authorized_operations=(
                    authorized_operations(broker, ResourceType.GROUP, group_id)
                    if request.include_authorized_operations and found.error == ErrorCode.NONE
                    else OPERATIONS_NOT_REQUESTED
                ),
            )
        )
    return ShareGroupDescribeResponse(groups=groups)
