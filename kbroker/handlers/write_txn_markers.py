"""WriteTxnMarkers: the transaction coordinator asks each partition leader to end a
transaction (KIP-98).

For every marker and partition the leader appends one control batch (the producer's id and
epoch, the commit or abort marker with the coordinator epoch; kbroker/partition.py) and,
as with acks=all (kbroker/acks_all.py), waits for the ISR before answering, within the
broker's request.timeout.ms, as Kafka does. Each partition gets its own error:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (before the append)
or NOT_ENOUGH_REPLICAS_AFTER_APPEND / REQUEST_TIMED_OUT (after it), INVALID_PRODUCER_EPOCH
when the marker's producer epoch is older than the producer's, TRANSACTION_COORDINATOR_FENCED
when its coordinator epoch is older than the last marker's, or when a marker of transaction
version 2 (v2, KIP-1228) does not carry a newer epoch than the transaction it ends
(kbroker/producer_state.py).
Appending the marker updates the partition's open transactions, its last stable offset and,
for an abort, the aborted-transaction index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbroker.acks_all import await_replication, check_min_insync
from kbroker.group.offsets_store import OFFSETS_TOPIC
from kbroker.handlers.common import leader_partition
from wire.errors import ErrorCode, KafkaError
from wire.messages.request_header import RequestHeader
from wire.messages.write_txn_markers_request import WritableTxnMarker, WriteTxnMarkersRequest
from wire.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from wire.records.control import EndTxnMarker

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.partition import Partition


@dataclass
class _Written:
    """A marker appended to a partition, waiting for the ISR."""

    partition: Partition
    last_offset: int
    result: WritableTxnMarkerPartitionResult
    producer_id: int
    commit: bool


def _append(
    broker: Broker, marker: WritableTxnMarker, topic: str, index: int, now_ms: int
) -> tuple[Partition, int]:
    partition = leader_partition(broker, topic, index)
    check_min_insync(partition)
    appended = partition.append_marker(
        EndTxnMarker(marker.transaction_result, marker.coordinator_epoch),
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        now_ms=now_ms,
        transaction_version=marker.transaction_version,
    )
    return partition, appended.last_offset


async def handle_write_txn_markers(
    broker: Broker, header: RequestHeader, request: WriteTxnMarkersRequest, version: int
) -> WriteTxnMarkersResponse:
    now_ms = int(broker.clock() * 1000)
    written: list[_Written] = []
    markers: list[WritableTxnMarkerResult] = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                result = WritableTxnMarkerPartitionResult(partition_index=index)
                try:
                    partition, last_offset = _append(broker, marker, topic.name, index, now_ms)
                    written.append(
                        _Written(
                            partition,
                            last_offset,
                            result,
                            marker.producer_id,
                            marker.transaction_result,
                        )
                    )
                except KafkaError as exc:
                    result.error_code = exc.code
                partitions.append(result)
            topics.append(WritableTxnMarkerTopicResult(name=topic.name, partitions=partitions))
        markers.append(WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    outcomes = await await_replication(
        broker,
        [(w.partition, w.last_offset) for w in written],
        broker.config.get("request.timeout.ms"),
    )
    for w, error in zip(written, outcomes, strict=True):
        w.result.error_code = error
        if error == ErrorCode.NONE and w.partition.topic == OFFSETS_TOPIC:
            # The group coordinator makes the transaction's offsets visible or drops them.
            broker.group_coordinator.complete_txn(w.producer_id, w.partition.index, w.commit)
    return WriteTxnMarkersResponse(markers=markers)
