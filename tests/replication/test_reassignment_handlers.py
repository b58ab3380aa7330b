"""The reassignment handlers over the embedded (single-node) backend."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from controller.decisions import Reassignment
from controller.embedded import EmbeddedMetadata
from kbroker.config import BrokerConfig
from kbroker.handlers.reassignments import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from wire.errors import ErrorCode
from wire.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from wire.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from wire.messages.request_header import RequestHeader

HEADER = RequestHeader(request_api_key=45, request_api_version=0, correlation_id=1)


async def test_single_node_accepts_only_the_current_replicas(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {"broker.id": "1", "log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:9092"}
    )
    metadata = EmbeddedMetadata(config)
    await metadata.start()
    await metadata.create_topic("t", 1, 1)
    broker = SimpleNamespace(authorizer=None, metadata=metadata)
    request = AlterPartitionReassignmentsRequest(
        topics=[
            ReassignableTopic(
                name="t",
                partitions=[
                    ReassignablePartition(partition_index=0, replicas=[1]),
                ],
            ),
            ReassignableTopic(
                name="u", partitions=[ReassignablePartition(partition_index=0, replicas=[1])]
            ),
        ]
    )
    response = await handle_alter_partition_reassignments(broker, HEADER, request, 0)  # type: ignore[arg-type]
    codes = {
        (t.name, p.partition_index): p.error_code for t in response.responses for p in t.partitions
    }
    assert codes == {("t", 0): ErrorCode.NONE, ("u", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    moved = AlterPartitionReassignmentsRequest(
        topics=[
            ReassignableTopic(
                name="t", partitions=[ReassignablePartition(partition_index=0, replicas=[2])]
            )
        ]
    )
    response = await handle_alter_partition_reassignments(broker, HEADER, moved, 0)  # type: ignore[arg-type]
    assert response.responses[0].partitions[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    cancel = AlterPartitionReassignmentsRequest(
        topics=[ReassignableTopic(name="t", partitions=[ReassignablePartition(partition_index=0)])]
    )
    response = await handle_alter_partition_reassignments(broker, HEADER, cancel, 0)  # type: ignore[arg-type]
    assert response.responses[0].partitions[0].error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    listed = await handle_list_partition_reassignments(
        broker,  # type: ignore[arg-type]
        HEADER,
        ListPartitionReassignmentsRequest(),
        0,
    )
    assert listed.topics == []


class NotController:
    """A cluster backend on a broker that is not the controller."""

    def is_controller(self) -> bool:
        return False

    async def alter_reassignments(self, targets: object) -> object:
        raise AssertionError("only the controller reassigns")

    def list_reassignments(self, partitions: object) -> object:
        raise AssertionError("only the controller lists reassignments")


async def test_a_broker_that_is_not_the_controller_refuses() -> None:
    broker = SimpleNamespace(authorizer=None, metadata=NotController())
    request = AlterPartitionReassignmentsRequest(
        topics=[
            ReassignableTopic(
                name="t", partitions=[ReassignablePartition(partition_index=0, replicas=[2])]
            )
        ]
    )
    response = await handle_alter_partition_reassignments(broker, HEADER, request, 0)  # type: ignore[arg-type]
    assert response.error_code == ErrorCode.NOT_CONTROLLER and response.responses == []
    listed = await handle_list_partition_reassignments(
        broker,  # type: ignore[arg-type]
        HEADER,
        ListPartitionReassignmentsRequest(),
        0,
    )
    assert listed.error_code == ErrorCode.NOT_CONTROLLER


class RecordingController(EmbeddedMetadata):
    """The embedded backend posing as a cluster controller: records what it is asked to move;
    partition ("t", 1) is being moved from [1, 2] to [3, 4]."""

    def __init__(self, config: BrokerConfig) -> None:
        super().__init__(config)
        self.asked: dict[tuple[str, int], object] = {}

    def is_controller(self) -> bool:
        return True

    async def alter_reassignments(self, targets: dict) -> dict:  # type: ignore[type-arg]
        self.asked.update(targets)
        return dict.fromkeys(targets)

    def list_reassignments(self, partitions: object) -> dict:  # type: ignore[type-arg]
        return {("t", 1): Reassignment(replicas=(1, 2, 3, 4), adding=(3, 4), removing=(1, 2))}


async def test_v1_may_forbid_changing_the_replication_factor(tmp_path: Path) -> None:
    # KIP-860: with allow_replication_factor_change false, a target whose replica count differs
    # from the partition's replication factor (the original replicas while moving) is refused.
    config = BrokerConfig.from_properties(
        {"broker.id": "1", "log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:9092"}
    )
    metadata = RecordingController(config)
    await metadata.start()
    await metadata.create_topic("t", 2, 1)
    broker = SimpleNamespace(authorizer=None, metadata=metadata)
    targets = {0: [2], 1: [5, 6, 7]}

    def request(allow: bool) -> AlterPartitionReassignmentsRequest:
        partitions = [
            ReassignablePartition(partition_index=i, replicas=r) for i, r in targets.items()
        ]
        return AlterPartitionReassignmentsRequest(
            allow_replication_factor_change=allow,
            topics=[ReassignableTopic(name="t", partitions=partitions)],
        )

    response = await handle_alter_partition_reassignments(broker, HEADER, request(False), 1)  # type: ignore[arg-type]
    codes = {p.partition_index: p.error_code for p in response.responses[0].partitions}
    assert codes == {0: ErrorCode.NONE, 1: ErrorCode.INVALID_REPLICATION_FACTOR}
    assert response.allow_replication_factor_change is False
    assert list(metadata.asked) == [("t", 0)]
    response = await handle_alter_partition_reassignments(broker, HEADER, request(True), 1)  # type: ignore[arg-type]
    assert {p.error_code for p in response.responses[0].partitions} == {ErrorCode.NONE}
    assert list(metadata.asked) == [("t", 0), ("t", 1)]
