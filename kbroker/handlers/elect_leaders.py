"""ElectLeaders (KIP-460): preferred or unclean leader election on request.

Election type 0 moves leadership to each partition's preferred (first assigned) replica when
it is alive and in sync; type 1 elects a leader for partitions without one, from any live
replica if no ISR member lives. A backend that can elect implements ``LeaderElector`` (the
ZooKeeper one); with the embedded backend every partition is led by its only, preferred,
replica, so elections are never needed. A null topic list means every partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kbroker.authorization import authorize
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from wire.errors import ErrorCode
from wire.messages.elect_leaders_request import ElectLeadersRequest
from wire.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

TopicPartition = tuple[str, int]
PREFERRED = 0
UNCLEAN = 1


@runtime_checkable
class LeaderElector(Protocol):
    def is_controller(self) -> bool: ...

    async def elect_leaders(
        self, partitions: Sequence[TopicPartition], *, unclean: bool
    ) -> dict[TopicPartition, ErrorCode]: ...


def _requested(broker: Broker, request: ElectLeadersRequest) -> list[TopicPartition]:
    if request.topic_partitions is None:
        return [
            (t.name, p.partition) for t in broker.metadata.topics().values() for p in t.partitions
        ]
    return [(t.topic, p) for t in request.topic_partitions for p in t.partitions]


async def handle_elect_leaders(
    broker: Broker, header: RequestHeader, request: ElectLeadersRequest, version: int
) -> ElectLeadersResponse:
    if not authorize(broker, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        # ALTER on the cluster, as Kafka asks (kbroker/authorization.py).
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        asked = [(t.topic, p) for t in request.topic_partitions or () for p in t.partitions]
        return _response(dict.fromkeys(asked, refused), version, refused)
    if isinstance(broker.metadata, LeaderElector) and not broker.metadata.is_controller():
        # Elections are the controller's: clients send them where Metadata says it is.
        asked = [(t.topic, p) for t in request.topic_partitions or () for p in t.partitions]
        not_controller = dict.fromkeys(asked, ErrorCode.NOT_CONTROLLER)
        return _response(not_controller, version, ErrorCode.NOT_CONTROLLER)
    unclean = version >= 1 and request.election_type == UNCLEAN
    results: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    for topic, index in _requested(broker, request):
        info = broker.metadata.topic(topic)
        if info is None or not 0 <= index < len(info.partitions):
            results[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            known.append((topic, index))
    if version >= 1 and request.election_type not in (PREFERRED, UNCLEAN):
        results.update(dict.fromkeys(known, ErrorCode.INVALID_REQUEST))
    elif isinstance(broker.metadata, LeaderElector):
        results.update(await broker.metadata.elect_leaders(known, unclean=unclean))
    else:
        results.update(dict.fromkeys(known, ErrorCode.ELECTION_NOT_NEEDED))
    return _response(results, version)


def _response(
    results: dict[TopicPartition, ErrorCode], version: int, error: ErrorCode = ErrorCode.NONE
) -> ElectLeadersResponse:
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, index), code in results.items():
        by_topic.setdefault(topic, []).append(
            PartitionResult(
                partition_id=index,
                error_code=code,
                error_message=None if code == ErrorCode.NONE else code.name,
            )
        )
    return ElectLeadersResponse(
        error_code=error if version >= 1 else ErrorCode.NONE,  # a top-level error from v1
        replica_election_results=[
            ReplicaElectionResult(topic=t, partition_result=r) for t, r in by_topic.items()
        ],
    )
