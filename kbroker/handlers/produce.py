"""Produce: validate batch headers and CRCs, append, answer by acks.

Records are never decoded here: the batches' 61-byte headers and CRC-32C are
checked (wire.records.batch.validate_produce_records) and the log rewrites base
offsets in place. Produce v0-v2 carries legacy message sets (magic 0/1), which
are converted to v2 batches once, on the way in. With acks=0 no response is
sent, and a failed append closes the connection so the producer notices, as
the protocol guide specifies.

acks=all: before appending, a partition whose ISR is smaller than
min.insync.replicas refuses with NOT_ENOUGH_REPLICAS; after appending, the
request waits in the purgatory until the high watermark passes every appended
batch (the whole ISR has it), and answers NOT_ENOUGH_REPLICAS_AFTER_APPEND when
the ISR shrank below min.insync.replicas meanwhile, NOT_LEADER_OR_FOLLOWER when
leadership moved, REQUEST_TIMED_OUT after timeout_ms.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kbroker.acks_all import await_replication, check_min_insync
from kbroker.handlers.common import (
    LEADER_MOVED,
    broker_endpoints,
    current_leader,
    leader_partition,
)
from kbroker.server.connection import CloseConnection
from wire.errors import ErrorCode, KafkaError
from wire.messages.produce_request import ProduceRequest
from wire.messages.produce_response import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from wire.messages.request_header import RequestHeader
from wire.records.batch import peek_magic, validate_produce_records
from wire.records.legacy import to_v2_batches

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.partition import Partition

VALID_ACKS = (-1, 0, 1)
# The first Produce version whose batches must be RecordBatch v2 (KIP-98).
FIRST_V2_ONLY_VERSION = 3
LOG_APPEND_TIME = "LogAppendTime"

log = logging.getLogger(__name__)


def _append(
    broker: Broker,
    partition: Partition,
    records: memoryview | bytes | None,
    acks: int,
    version: int,
) -> tuple[PartitionProduceResponse, int]:
    """Append; returns the response and the last offset written (for acks=all)."""
    if records is None or len(records) == 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "no record batch")
    view = memoryview(records)
    config = partition.log.config
    magic = peek_magic(view) if len(view) > 16 else -1
    if magic < 2:
        if version >= FIRST_V2_ONLY_VERSION:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"produce v{version} requires record batch magic 2, got {magic}",
            )
        batches = to_v2_batches(view)
        validate_produce_records(memoryview(batches), config.max_message_bytes)
    else:
        validate_produce_records(view, config.max_message_bytes)
        # A large request arrives in a writable buffer of its own (wire.frame.FrameDecoder)
        # that nothing else reads: offsets are assigned in it with no copy.
        batches = view if not view.readonly else bytearray(view)
    if acks == -1:
        check_min_insync(partition)
    append_time = (
        int(broker.clock() * 1000) if config.message_timestamp_type == LOG_APPEND_TIME else None
    )
    result = partition.append(batches, log_append_time_ms=append_time)
    response = PartitionProduceResponse(
        index=partition.index,
        error_code=ErrorCode.NONE,
        base_offset=result.first_offset,
        log_append_time_ms=result.log_append_time_ms,
        log_start_offset=result.log_start_offset,
    )
    return response, result.last_offset


async def _await_replication(
    broker: Broker,
    waiting: list[tuple[Partition, int, PartitionProduceResponse]],
    timeout_ms: int,
) -> None:
    outcomes = await await_replication(broker, [(p, last) for p, last, _ in waiting], timeout_ms)
    for (_, _, response), error in zip(waiting, outcomes, strict=True):
        if error != ErrorCode.NONE:
            response.error_code = error
            response.base_offset = -1


async def handle_produce(
    broker: Broker, header: RequestHeader, request: ProduceRequest, version: int
) -> ProduceResponse | None:
    acks = request.acks
    request_error: KafkaError | None = None
    if acks not in VALID_ACKS:
        request_error = KafkaError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks}")
    elif request.transactional_id is not None:
        request_error = KafkaError(ErrorCode.INVALID_REQUEST, "transactions are not supported yet")
    failed = False
    waiting: list[tuple[Partition, int, PartitionProduceResponse]] = []
    responses: list[TopicProduceResponse] = []
    for topic in request.topic_data:
        partitions: list[PartitionProduceResponse] = []
        for data in topic.partition_data:
            try:
                if request_error is not None:
                    raise request_error
                partition = leader_partition(broker, topic.name, data.index)
                try:
                    response, last_offset = _append(broker, partition, data.records, acks, version)
                except OSError as exc:
                    # A write the log directory refused (ENOSPC, EIO): the segment was cut
                    # back to its last whole batch; the client is told as Kafka tells it
                    # (KIP-112) and retries, and every other partition keeps being served.
                    log.warning("append to %s-%d failed: %s", topic.name, data.index, exc.strerror)
                    raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc
                partitions.append(response)
                if acks == -1:
                    waiting.append((partition, last_offset, response))
            except KafkaError as exc:
                failed = True
                partitions.append(
                    PartitionProduceResponse(
                        index=data.index,
                        error_code=exc.code,
                        base_offset=-1,
                        error_message=exc.message if version >= 8 else None,
                    )
                )
        responses.append(TopicProduceResponse(name=topic.name, partition_responses=partitions))
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return None
    await _await_replication(broker, waiting, request.timeout_ms)
    response = ProduceResponse(responses=responses)
    if version >= 10:
        _add_leader_hints(broker, response)
    return response


def _add_leader_hints(broker: Broker, response: ProduceResponse) -> None:
    """KIP-951 (see kbroker/handlers/common.py)."""
    leaders: set[int] = set()
    for topic in response.responses:
        for partition in topic.partition_responses:
            if partition.error_code in LEADER_MOVED:
                leader, epoch = current_leader(broker, topic.name, partition.index)
                partition.current_leader = LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
                if leader >= 0:
                    leaders.add(leader)
    response.node_endpoints = [
        NodeEndpoint(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
        for b in broker_endpoints(broker, leaders)
    ]
