"""The consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat and
ConsumerGroupDescribe, every version. Each translates between the wire messages and the
group coordinator (kbroker/group/consumer_heartbeat.py holds the protocol itself).

Authorization (kbroker/authorization.py), as Kafka's: a heartbeat needs READ on the group,
describing DESCRIBE on it (GROUP_AUTHORIZATION_FAILED), with the authorized operations when
asked (KIP-430). A heartbeat that names its subscribed topics also needs DESCRIBE on each of
them: Kafka 4.3 answers TOPIC_AUTHORIZATION_FAILED, with no message, before the coordinator
sees the request, so that a member cannot learn of topics it may not describe. For the same
reason a described group whose assignments name such a topic is answered
TOPIC_AUTHORIZATION_FAILED instead, and a regex subscription matches only the topics the
principal of the heartbeat that resolves it may describe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize, authorized_operations, describable_topics
from kbroker.group.consumer_heartbeat import owned_assignment
from kbroker.group.events import ConsumerHeartbeat
from kbroker.handlers.group_assignments import (
    Assignment,
    described_assignment,
    heartbeat_assignment,
)
from kbroker.security.acls import OPERATIONS_NOT_REQUESTED, AclOperation, ResourceType
from kbroker.server.connection import CLIENT_HOST
from wire.errors import ErrorCode
from wire.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from wire.messages.consumer_group_describe_response import Assignment as DescribedAssignment
from wire.messages.consumer_group_describe_response import (
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)
from wire.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from wire.messages.consumer_group_heartbeat_response import Assignment as HeartbeatAssignment
from wire.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)
from wire.messages.consumer_group_heartbeat_response import (
    TopicPartitions as HeartbeatTopicPartitions,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

# ConsumerGroupHeartbeat v1+: the client generates its member id (KIP-1082).
FIRST_CLIENT_MEMBER_ID_VERSION = 1
# KIP-1099: ConsumerGroupDescribe v1 says whether a member uses the classic protocol.
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1
# Kafka 4.3's error message for a described group whose assignments name a topic the principal
# may not describe.
UNDESCRIBABLE_TOPICS_MESSAGE = (
    "The group has described topic(s) that the client is not authorized to describe."
)


async def handle_consumer_group_heartbeat(
    broker: Broker, header: RequestHeader, request: ConsumerGroupHeartbeatRequest, version: int
) -> ConsumerGroupHeartbeatResponse:
    if not authorize(broker, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if request.subscribed_topic_names and not all(
        authorize(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        for name in set(request.subscribed_topic_names)
    ):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    owned = owned_assignment(
        None
        if request.topic_partitions is None
        else [(tp.topic_id, tp.partitions) for tp in request.topic_partitions]
    )
    result = await broker.group_coordinator.consumer_heartbeat(
        ConsumerHeartbeat(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=(
                None
                if request.subscribed_topic_names is None
                else tuple(request.subscribed_topic_names)
            ),
            subscribed_topic_regex=request.subscribed_topic_regex,
            server_assignor=request.server_assignor,
            owned=owned,
            client_id=header.client_id or "",
            client_host=CLIENT_HOST.get(),
            client_member_id=version >= FIRST_CLIENT_MEMBER_ID_VERSION,
            topic_describable=describable_topics(broker),
        )
    )
    return ConsumerGroupHeartbeatResponse(
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


async def handle_consumer_group_describe(
    broker: Broker, header: RequestHeader, request: ConsumerGroupDescribeRequest, version: int
) -> ConsumerGroupDescribeResponse:
    groups = []
    for group_id in request.group_ids:
        if not authorize(broker, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(
                DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id)
            )
            continue
        found = broker.group_coordinator.describe_consumer_group(group_id)
        groups.append(
            DescribedGroup(
                error_code=found.error,
                error_message=found.message,
                group_id=group_id,
                group_state=found.state,
                group_epoch=found.group_epoch,
                assignment_epoch=found.assignment_epoch,
                assignor_name=found.assignor,
                members=[
                    Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=sorted(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=described_assignment(
                            broker, m.assigned, DescribedAssignment, TopicPartitions
                        ),
                        target_assignment=described_assignment(
                            broker, target, DescribedAssignment, TopicPartitions
                        ),
                        member_type=(
                            MEMBER_TYPE_CLASSIC if m.classic is not None else MEMBER_TYPE_CONSUMER
                        ),
                    )
                    for m, target in found.members
                ],
                authorized_operations=(
                    authorized_operations(broker, ResourceType.GROUP, group_id)
                    if request.include_authorized_operations and found.error == ErrorCode.NONE
                    else OPERATIONS_NOT_REQUESTED
                ),
            )
        )
    if broker.authorizer is not None:
        groups = [_without_undescribable_topics(broker, group) for group in groups]
    return ConsumerGroupDescribeResponse(groups=groups)


def _without_undescribable_topics(broker: Broker, group: DescribedGroup) -> DescribedGroup:
    """Kafka 4.3 does not describe a group whose members' current or target assignments name
    a topic the principal may not DESCRIBE: the group is answered TOPIC_AUTHORIZATION_FAILED
    with Kafka's message and nothing else, so its members' assignments do not reveal those
    topics."""
    names = {
        tp.topic_name
        for member in group.members
        for assignment in (member.assignment, member.target_assignment)
        for tp in assignment.topic_partitions
    }
    if all(authorize(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, n) for n in names):
        return group
    return DescribedGroup(
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        error_message=UNDESCRIBABLE_TOPICS_MESSAGE,
        group_id=group.group_id,
    )
