"""Group membership APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups.

Each handler translates between the wire messages of every version and the coordinator
(``kbroker.group.coordinator``); the group logic itself lives in the pure state machine.

FindCoordinator also finds share coordinators (key type 2, v6+, KIP-932): the key is
``group:topic id:partition`` (INVALID_REQUEST when it is not, or before v6).

Authorization (kbroker/authorization.py), as Kafka's: finding a coordinator needs DESCRIBE
on the group or transactional id (CLUSTER_ACTION on the cluster for a share key); joining,
syncing, heartbeats and leaving READ on the group; describing DESCRIBE; deleting DELETE
(GROUP_AUTHORIZATION_FAILED, or TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional
id, CLUSTER_AUTHORIZATION_FAILED for a share key). ListGroups lists every group
with DESCRIBE on the cluster, else the groups the principal may describe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize, authorized_operations
from kbroker.group.events import GroupState, JoinRequest, SyncRequest
from kbroker.security.acls import (
    CLUSTER_NAME,
    OPERATIONS_NOT_REQUESTED,
    AclOperation,
    ResourceType,
)
from kbroker.server.connection import CLIENT_HOST, LISTENER_NAME
from kbroker.share.state_records import parse_coordinator_key
from wire.errors import ErrorCode
from wire.messages.delete_groups_request import DeleteGroupsRequest
from wire.messages.delete_groups_response import DeletableGroupResult, DeleteGroupsResponse
from wire.messages.describe_groups_request import DescribeGroupsRequest
from wire.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from wire.messages.heartbeat_request import HeartbeatRequest
from wire.messages.heartbeat_response import HeartbeatResponse
from wire.messages.join_group_request import JoinGroupRequest
from wire.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from wire.messages.leave_group_request import LeaveGroupRequest
from wire.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from wire.messages.list_groups_request import ListGroupsRequest
from wire.messages.list_groups_response import ListedGroup, ListGroupsResponse
from wire.messages.request_header import RequestHeader
from wire.messages.sync_group_request import SyncGroupRequest
from wire.messages.sync_group_response import SyncGroupResponse

if TYPE_CHECKING:
    from kbroker.broker import Broker

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# A share partition's key "group:topic id:partition" (KIP-932), from v6 on.
SHARE_KEY_TYPE = 2
FIRST_SHARE_FIND_VERSION = 6
# FindCoordinator v4+ carries a batch of keys (KIP-699).
FIRST_BATCHED_FIND_VERSION = 4
# JoinGroup v4+: KIP-394 member id handshake; v9+: skip_assignment (KIP-814).
FIRST_MEMBER_ID_REQUIRED_VERSION = 4
FIRST_SKIP_ASSIGNMENT_VERSION = 9
# JoinGroup v7+ allows a null protocol name in the response.
FIRST_NULLABLE_PROTOCOL_NAME_VERSION = 7
# LeaveGroup v3+ carries a batch of members (KIP-345).
FIRST_BATCHED_LEAVE_VERSION = 3
# DescribeGroups v6+ answers GROUP_ID_NOT_FOUND for a group it does not know (KIP-1043).
FIRST_GROUP_NOT_FOUND_VERSION = 6
CLASSIC_GROUP_TYPE = "classic"


def _may(broker: Broker, operation: AclOperation, group_id: str) -> bool:
    return authorize(broker, operation, ResourceType.GROUP, group_id)


async def handle_find_coordinator(
    broker: Broker, header: RequestHeader, request: FindCoordinatorRequest, version: int
) -> FindCoordinatorResponse:
    keys = request.coordinator_keys if version >= FIRST_BATCHED_FIND_VERSION else [request.key]
    coordinators = []
    for key in keys:
        node_id, host, port, message = -1, "", -1, None
        share_key = parse_coordinator_key(key) if request.key_type == SHARE_KEY_TYPE else None
        if request.key_type == GROUP_KEY_TYPE and not _may(broker, AclOperation.DESCRIBE, key):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif request.key_type == TRANSACTION_KEY_TYPE and not authorize(
            broker, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif request.key_type == SHARE_KEY_TYPE and (
            version < FIRST_SHARE_FIND_VERSION or share_key is None
        ):
            error = ErrorCode.INVALID_REQUEST
        elif request.key_type == SHARE_KEY_TYPE and not authorize(
            broker, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        elif request.key_type in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE):
            if request.key_type == GROUP_KEY_TYPE:
                error, info = await broker.group_coordinator.find_coordinator(key)
            elif share_key is not None:
                error, info = await broker.share_coordinator.find_coordinator(share_key)
            else:
                error, info = await broker.txn_coordinator.find_coordinator(key)
            if info is not None:
                # The coordinator's address on the listener this client uses.
                info = info.through(LISTENER_NAME.get())
                if info is None:
                    error = ErrorCode.COORDINATOR_NOT_AVAILABLE
                else:
                    node_id, host, port = info.broker_id, info.host, info.port
        else:
            error, message = ErrorCode.INVALID_REQUEST, f"unknown key type {request.key_type}"
        coordinators.append(
            Coordinator(
                key=key,
                node_id=node_id,
                host=host,
                port=port,
                error_code=error,
                error_message=message,
            )
        )
    if version >= FIRST_BATCHED_FIND_VERSION:
        return FindCoordinatorResponse(coordinators=coordinators)
    only = coordinators[0]
    return FindCoordinatorResponse(
        error_code=only.error_code,
        error_message=only.error_message,
        node_id=only.node_id,
        host=only.host,
        port=only.port,
    )


async def handle_join_group(
    broker: Broker, header: RequestHeader, request: JoinGroupRequest, version: int
) -> JoinGroupResponse:
    if not _may(broker, AclOperation.READ, request.group_id):
        return JoinGroupResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
            member_id=request.member_id,
            protocol_name=None if version >= FIRST_NULLABLE_PROTOCOL_NAME_VERSION else "",
        )
    rebalance_timeout = request.rebalance_timeout_ms
    if version == 0:
        # v0 has no rebalance timeout; the session timeout served as both.
        rebalance_timeout = request.session_timeout_ms
    result = await broker.group_coordinator.join(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            client_id=header.client_id or "",
            client_host=CLIENT_HOST.get(),
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in request.protocols),
            require_known_member_id=(
                version >= FIRST_MEMBER_ID_REQUIRED_VERSION and request.group_instance_id is None
            ),
        )
    )
    protocol_name = result.protocol_name
    if protocol_name is None and version < FIRST_NULLABLE_PROTOCOL_NAME_VERSION:
        protocol_name = ""
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment and version >= FIRST_SKIP_ASSIGNMENT_VERSION,
        member_id=result.member_id,
        members=[
            JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )


async def handle_sync_group(
    broker: Broker, header: RequestHeader, request: SyncGroupRequest, version: int
) -> SyncGroupResponse:
    if not _may(broker, AclOperation.READ, request.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = broker.group_coordinator
    result = await coordinator.sync(
        SyncRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            generation_id=request.generation_id,
            protocol_type=request.protocol_type,
            protocol_name=request.protocol_name,
            assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
        )
    )
    return SyncGroupResponse(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def handle_heartbeat(
    broker: Broker, header: RequestHeader, request: HeartbeatRequest, version: int
) -> HeartbeatResponse:
    if not _may(broker, AclOperation.READ, request.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = broker.group_coordinator.heartbeat(
        request.group_id, request.member_id, request.group_instance_id, request.generation_id
    )
    return HeartbeatResponse(error_code=error)


async def handle_leave_group(
    broker: Broker, header: RequestHeader, request: LeaveGroupRequest, version: int
) -> LeaveGroupResponse:
    if not _may(broker, AclOperation.READ, request.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if version < FIRST_BATCHED_LEAVE_VERSION:
        error, errors = await broker.group_coordinator.leave(
            request.group_id, [(request.member_id, None)]
        )
        if error == ErrorCode.NONE and errors:
            error = errors[0]
        return LeaveGroupResponse(error_code=error)
    leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    error, errors = await broker.group_coordinator.leave(request.group_id, leaving)
    return LeaveGroupResponse(
        error_code=error,
        members=[
            MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=e)
            for (member_id, instance_id), e in zip(leaving, errors, strict=True)
        ],
    )


async def handle_describe_groups(
    broker: Broker, header: RequestHeader, request: DescribeGroupsRequest, version: int
) -> DescribeGroupsResponse:
    groups = []
    for group_id in request.groups:
        if not _may(broker, AclOperation.DESCRIBE, group_id):
            groups.append(
                DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id)
            )
            continue
        operations = (
            authorized_operations(broker, ResourceType.GROUP, group_id)
            if request.include_authorized_operations
            else OPERATIONS_NOT_REQUESTED
        )
        error, description = broker.group_coordinator.describe_group(group_id)
        if description is None:
            # Kafka describes a group it does not know (or a consumer group of KIP-848's
            # protocol or a share group, which ConsumerGroupDescribe and ShareGroupDescribe
            # describe) as Dead, from v6 with the error GROUP_ID_NOT_FOUND (KIP-1043).
            not_found = error == ErrorCode.NONE
            message = (
                f"Group {group_id} is not a classic group."
                if broker.group_coordinator.core.is_modern_group(group_id)
                else f"Group {group_id} not found."
            )
            if not_found and version >= FIRST_GROUP_NOT_FOUND_VERSION:
                error = ErrorCode.GROUP_ID_NOT_FOUND
            groups.append(
                DescribedGroup(
                    error_code=error,
                    error_message=message if not_found and error else None,
                    group_id=group_id,
                    group_state=GroupState.DEAD.value if not_found else "",
                    authorized_operations=operations,
                )
            )
            continue
        groups.append(
            DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=group_id,
                group_state=description.state.value,
                protocol_type=description.protocol_type,
                protocol_data=description.protocol,
                members=[
                    DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in description.members
                ],
                authorized_operations=operations,
            )
        )
    return DescribeGroupsResponse(groups=groups)


async def handle_list_groups(
    broker: Broker, header: RequestHeader, request: ListGroupsRequest, version: int
) -> ListGroupsResponse:
    error, listings = broker.group_coordinator.list_groups()
    if not authorize(broker, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        listings = [g for g in listings if _may(broker, AclOperation.DESCRIBE, g.group_id)]
    states = {s.lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    return ListGroupsResponse(
        error_code=error,
        groups=[
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state.value,
                group_type=g.group_type,
            )
            for g in listings
            if (not states or g.state.value.lower() in states)
            and (not types or g.group_type in types)
        ],
    )


async def handle_delete_groups(
    broker: Broker, header: RequestHeader, request: DeleteGroupsRequest, version: int
) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(request.groups_names))
    refused = [g for g in names if not _may(broker, AclOperation.DELETE, g)]
    errors = dict.fromkeys(refused, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    allowed = [g for g in names if g not in errors]
    if allowed:
        errors.update(await broker.group_coordinator.delete_groups(allowed))
    return DeleteGroupsResponse(
        results=[
            DeletableGroupResult(group_id=group_id, error_code=errors[group_id])
            for group_id in dict.fromkeys(request.groups_names)
        ]
    )
