"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455).

A backend that can move replicas implements ``Reassigner`` (the ZooKeeper one: the
controller completes a reassignment once the target replicas are in sync, see
controller/decisions.py). The embedded backend has one broker, so the only valid target is
the current replica list, and nothing is ever in progress. v1 may forbid changing a
partition's replication factor (KIP-860).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from controller.decisions import Reassignment
from kbroker.authorization import authorize
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from wire.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from wire.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from wire.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

TopicPartition = tuple[str, int]


@runtime_checkable
class Reassigner(Protocol):
    def is_controller(self) -> bool: ...

    async def alter_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]: ...

    def list_reassignments(
        self, partitions: Sequence[TopicPartition] | None
    ) -> dict[TopicPartition, Reassignment]: ...


def _single_node(
    broker: Broker, targets: Mapping[TopicPartition, Sequence[int] | None]
) -> dict[TopicPartition, KafkaError | None]:
    results: dict[TopicPartition, KafkaError | None] = {}
    for (topic, index), target in targets.items():
        info = broker.metadata.topic(topic)
        if info is None or not 0 <= index < len(info.partitions):
            results[(topic, index)] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        elif target is None:
            results[(topic, index)] = KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        elif tuple(target) != info.partitions[index].replicas:
            results[(topic, index)] = KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, "a single broker cannot move replicas"
            )
        else:
            results[(topic, index)] = None
    return results


def _replication_factor_changes(
    broker: Broker, reassigner: Reassigner, targets: Mapping[TopicPartition, Sequence[int] | None]
) -> dict[TopicPartition, KafkaError | None]:
    """KIP-860 (v1, allow_replication_factor_change false): the targets whose replica count
    differs from the partition's replication factor (its original replicas while a
    reassignment is in progress), refused with INVALID_REPLICATION_FACTOR."""
    moving = reassigner.list_reassignments([tp for tp, t in targets.items() if t is not None])
    refused: dict[TopicPartition, KafkaError | None] = {}
    for (topic, index), target in targets.items():
        info = broker.metadata.topic(topic)
        if target is None or info is None or not 0 <= index < len(info.partitions):
            continue
        ongoing = moving.get((topic, index))
        factor = len(info.partitions[index].replicas if ongoing is None else ongoing.original)
        if len(target) != factor:
            refused[(topic, index)] = KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {factor} to {len(target)} but "
                "changing the replication factor is not allowed",
            )
    return refused


def _may(broker: Broker, operation: AclOperation) -> bool:
    """ALTER (to reassign) or DESCRIBE (to list) on the cluster, as Kafka asks."""
    return authorize(broker, operation, ResourceType.CLUSTER, CLUSTER_NAME)


async def handle_alter_partition_reassignments(
    broker: Broker, header: RequestHeader, request: AlterPartitionReassignmentsRequest, version: int
) -> AlterPartitionReassignmentsResponse:
    targets: dict[TopicPartition, Sequence[int] | None] = {
        (t.name, p.partition_index): p.replicas for t in request.topics for p in t.partitions
    }
    if not _may(broker, AclOperation.ALTER):
        return AlterPartitionReassignmentsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, responses=[]
        )
    refused: dict[TopicPartition, KafkaError | None] = {}
    if isinstance(broker.metadata, Reassigner):
        if not broker.metadata.is_controller():
            # Reassignments are the controller's (KIP-455): clients send them there.
            return AlterPartitionReassignmentsResponse(
                error_code=ErrorCode.NOT_CONTROLLER, error_message=None, responses=[]
            )
        if not request.allow_replication_factor_change:
            refused = _replication_factor_changes(broker, broker.metadata, targets)
            targets = {tp: t for tp, t in targets.items() if tp not in refused}
        results = {**(await broker.metadata.alter_reassignments(targets)), **refused}
    else:
        results = _single_node(broker, targets)
    by_topic: dict[str, list[ReassignablePartitionResponse]] = {}
    for (topic, index), error in results.items():
        by_topic.setdefault(topic, []).append(
            ReassignablePartitionResponse(
                partition_index=index,
                error_code=ErrorCode.NONE if error is None else error.code,
                error_message=None if error is None else error.message,
            )
        )
    return AlterPartitionReassignmentsResponse(
        error_message=None,
        allow_replication_factor_change=request.allow_replication_factor_change,
        responses=[ReassignableTopicResponse(name=t, partitions=p) for t, p in by_topic.items()],
    )


async def handle_list_partition_reassignments(
    broker: Broker, header: RequestHeader, request: ListPartitionReassignmentsRequest, version: int
) -> ListPartitionReassignmentsResponse:
    wanted = (
        None
        if request.topics is None
        else [(t.name, p) for t in request.topics for p in t.partition_indexes]
    )
    if not _may(broker, AclOperation.DESCRIBE):
        return ListPartitionReassignmentsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, topics=[]
        )
    moving: dict[TopicPartition, Reassignment] = {}
    if isinstance(broker.metadata, Reassigner):
        if not broker.metadata.is_controller():
            return ListPartitionReassignmentsResponse(
                error_code=ErrorCode.NOT_CONTROLLER, error_message=None, topics=[]
            )
        moving = broker.metadata.list_reassignments(wanted)
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for (topic, index), state in sorted(moving.items()):
        by_topic.setdefault(topic, []).append(
            OngoingPartitionReassignment(
                partition_index=index,
                replicas=list(state.replicas),
                adding_replicas=list(state.adding),
                removing_replicas=list(state.removing),
            )
        )
    return ListPartitionReassignmentsResponse(
        error_message=None,
        topics=[OngoingTopicReassignment(name=t, partitions=p) for t, p in by_topic.items()],
    )
