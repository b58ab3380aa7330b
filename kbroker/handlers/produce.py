"""Produce: validate batch headers and CRCs, append, answer by acks.

Records are not decoded here: the batches' 61-byte headers and CRC-32C are
checked (wire.records.batch.validate_produce_records) and the log rewrites base
offsets in place. Only a compacted topic's records are decoded, to refuse keyless
ones (kbroker/record_validation.py, with KIP-467 record_errors), and those of a topic with
schema validation on, to refuse records without a registered schema id
(kbroker/schema_validation.py). Produce v0-v2
carries legacy message sets (magic 0/1), which are converted to v2 batches once,
on the way in. With acks=0 no response is
sent, and a failed append closes the connection so the producer notices, as
the protocol guide specifies.

acks=all: before appending, a partition whose ISR is smaller than
min.insync.replicas refuses with NOT_ENOUGH_REPLICAS; after appending, the
request waits in the purgatory until the high watermark passes every appended
batch (the whole ISR has it), and answers NOT_ENOUGH_REPLICAS_AFTER_APPEND when
the ISR shrank below min.insync.replicas meanwhile, NOT_LEADER_OR_FOLLOWER when
leadership moved, REQUEST_TIMED_OUT after timeout_ms.

Authorization (kbroker/authorization.py), as Kafka's: a transactional id needs WRITE on
it (else the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic WRITE on
the topic (else its partitions are TOPIC_AUTHORIZATION_FAILED).

Transactional batches (KIP-98) need the request's transactional id: without one the whole
request is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers. The
producer state then checks them (kbroker/producer_state.py): an older producer epoch gets
INVALID_PRODUCER_EPOCH, a non-transactional batch while the producer's transaction is open
INVALID_TXN_STATE.

Produce v13 names topics by id (KIP-516): an id the broker does not know is answered
UNKNOWN_TOPIC_ID for each of its partitions, and the answer carries the ids back.

KIP-890 (``transaction.partition.verification.enable``, default true): a transactional batch
that would open its producer's transaction on a partition is first verified with the
transaction coordinator (kbroker/txn/verification.py), and with transaction version 2 and
Produce v12+ the coordinator adds the partition itself; a batch delayed past its transaction's
end is refused (INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v11) instead of opening a
transaction that no coordinator would end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.acks_all import await_replication, check_min_insync
from kbroker.authorization import authorize
from kbroker.features import TRANSACTION_VERSION
from kbroker.handlers.common import (
    LEADER_MOVED,
    broker_endpoints,
    current_leader,
    leader_partition,
    topic_name,
)
from kbroker.handlers.throttling import throttle
from kbroker.mirror.topic_configs import read_only_error
from kbroker.producer_state import ProducerStateManager, VerificationGuard
from kbroker.quotas import PRODUCER_BYTE_RATE
from kbroker.record_validation import RecordValidationError, check_keys_for_compaction
from kbroker.schema_validation import check_schema_ids
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.server.connection import CloseConnection
from kbroker.txn.log_records import TV_2
from kbroker.txn.verification import produce_error
from wire.errors import ErrorCode, KafkaError
from wire.messages.produce_request import ProduceRequest
from wire.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from wire.messages.request_header import RequestHeader
from wire.records.batch import (
    BATCH_HEADER_SIZE,
    peek_magic,
    read_header,
    validate_produce_records,
)
from wire.records.legacy import to_v2_batches

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.partition import Partition

VALID_ACKS = (-1, 0, 1)
# The first Produce version whose batches must be RecordBatch v2 (KIP-98).
FIRST_V2_ONLY_VERSION = 3
# Topics named by id, not name (KIP-516).
FIRST_TOPIC_ID_VERSION = 13
# The producer knows TRANSACTION_ABORTABLE (KIP-890).
FIRST_ABORTABLE_VERSION = 11
# With transaction version 2 the leader adds the partition to the transaction (KIP-890).
FIRST_IMPLICIT_ADD_VERSION = 12
LOG_APPEND_TIME = "LogAppendTime"


def _append(
    broker: Broker,
    partition: Partition,
    records: memoryview | bytes | None,
    acks: int,
    version: int,
    verification: VerificationGuard | None,
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
        batches = to_v2_batches(view, max_message_bytes=config.max_message_bytes)
        validate_produce_records(memoryview(batches), config.max_message_bytes)
    else:
        validate_produce_records(view, config.max_message_bytes)
        # A large request arrives in a writable buffer of its own (wire.frame.FrameDecoder)
        # that nothing else reads: offsets are assigned in it with no copy.
        batches = view if not view.readonly else bytearray(view)
    if "compact" in config.cleanup_policy:
        topic, index = partition.key
        check_keys_for_compaction(batches, topic, index, config.max_message_bytes)
    if config.confluent_value_schema_validation or config.confluent_key_schema_validation:
        registry = broker.schema_registry
        check_schema_ids(
            batches,
            partition.key[0],
            None if registry is None else registry.state,
            keys=config.confluent_key_schema_validation,
            values=config.confluent_value_schema_validation,
            max_message_bytes=config.max_message_bytes,
        )
    if acks == -1:
        check_min_insync(partition)
    append_time = (
        int(broker.clock() * 1000) if config.message_timestamp_type == LOG_APPEND_TIME else None
    )
    result = partition.append(batches, log_append_time_ms=append_time, verification=verification)
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


async def _verify_transaction(
    broker: Broker,
    request: ProduceRequest,
    version: int,
    names: list[str | None],
    topic_errors: list[KafkaError | None],
) -> dict[tuple[str, int], VerificationGuard | KafkaError]:
    """KIP-890: the partitions where this request would open its producer's transaction are
    first verified with the transaction coordinator (added by it from Produce v12 with
    transaction version 2); each gets the guard to append with, or its error."""
    if request.transactional_id is None or not broker.config.get(
        "transaction.partition.verification.enable"
    ):
        return {}
    guards: dict[tuple[str, int], tuple[ProducerStateManager, VerificationGuard]] = {}
    for topic, name, error in zip(request.topic_data, names, topic_errors, strict=True):
        if name is None or error is not None:
            continue
        for data in topic.partition_data:
            records = data.records
            if records is None or len(records) < BATCH_HEADER_SIZE or peek_magic(records) != 2:
                continue
            header = read_header(records)
            partition = broker.partition(name, data.index)
            if not header.is_transactional or partition is None or not partition.is_leader:
                continue  # the append answers what is wrong
            producers = partition.log.producers
            if producers.needs_verification(header.producer_id, header.producer_epoch):
                guard = producers.begin_verification(header.producer_id, header.producer_epoch)
                guards[(name, data.index)] = (producers, guard)
    if not guards:
        return {}
    first = next(iter(guards.values()))[1]
    add = (
        version >= FIRST_IMPLICIT_ADD_VERSION and broker.features.level(TRANSACTION_VERSION) >= TV_2
    )
    answers = await broker.txn_verifier.check(
        request.transactional_id, first.producer_id, first.producer_epoch, guards, add=add
    )
    verified: dict[tuple[str, int], VerificationGuard | KafkaError] = {}
    for tp, (producers, guard) in guards.items():
        error = produce_error(
            answers.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR),
            abortable_known=version >= FIRST_ABORTABLE_VERSION,
        )
        if error is not None:
            producers.end_verification(guard)
        verified[tp] = error or guard
    return verified


def _has_transactional_records(request: ProduceRequest) -> bool:
    """Whether the first batch of any partition is a transactional v2 batch (a valid
    request holds one batch per partition; the rest is checked at append)."""
    for topic in request.topic_data:
        for data in topic.partition_data:
            records = data.records
            if records is None or len(records) < BATCH_HEADER_SIZE:
                continue
            if peek_magic(records) == 2 and read_header(records).is_transactional:
                return True
    return False


async def handle_produce(
    broker: Broker, header: RequestHeader, request: ProduceRequest, version: int
) -> ProduceResponse | None:
    acks = request.acks
    request_error: KafkaError | None = None
    if acks not in VALID_ACKS:
        request_error = KafkaError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks}")
    elif request.transactional_id is None and _has_transactional_records(request):
        request_error = KafkaError(
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "transactional records need a transactional id",
        )
    elif request.transactional_id is not None and not authorize(
        broker, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        request_error = KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    failed = False
    waiting: list[tuple[Partition, int, PartitionProduceResponse]] = []
    responses: list[TopicProduceResponse] = []
    names = [
        topic_name(broker, t.name, t.topic_id, version >= FIRST_TOPIC_ID_VERSION)
        for t in request.topic_data
    ]
    topic_errors: list[KafkaError | None] = []
    for name in names:
        topic_error = request_error
        if topic_error is None and name is None:
            topic_error = KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
        elif topic_error is None and not authorize(
            broker, AclOperation.WRITE, ResourceType.TOPIC, name
        ):
            topic_error = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif topic_error is None and (info := broker.metadata.topic(name)) is not None:
            # A mirror topic takes its records from its source only, until promoted.
            topic_error = read_only_error(name, info.configs)
        topic_errors.append(topic_error)
    verified = await _verify_transaction(broker, request, version, names, topic_errors)
    for topic, name, topic_error in zip(request.topic_data, names, topic_errors, strict=True):
        partitions: list[PartitionProduceResponse] = []
        for data in topic.partition_data:
            try:
                if topic_error is not None:
                    raise topic_error
                assert name is not None
                guard = verified.get((name, data.index))
                if isinstance(guard, KafkaError):
                    raise guard
                partition = leader_partition(broker, name, data.index)
                try:
                    response, last_offset = _append(
                        broker, partition, data.records, acks, version, guard
                    )
                except OSError as exc:
                    # A write the log directory refused (ENOSPC, EIO): the segment was cut
                    # back to its last whole batch, the directory goes offline (KIP-112),
                    # the client is told KAFKA_STORAGE_ERROR and looks for another leader,
                    # and every partition elsewhere keeps being served.
                    broker.log_dir_failed(partition.log.directory.parent, exc)
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
                        record_errors=_record_errors(exc) if version >= 8 else [],
                    )
                )
        responses.append(
            TopicProduceResponse(
                name=name or "", topic_id=topic.topic_id, partition_responses=partitions
            )
        )
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return None
    await _await_replication(broker, waiting, request.timeout_ms)
    response = ProduceResponse(responses=responses)
    produced = sum(len(p.records or b"") for t in request.topic_data for p in t.partition_data)
    throttle(broker, header, PRODUCER_BYTE_RATE, produced, response, has_field=version >= 1)
    if version >= 10:
        _add_leader_hints(broker, response)
    return response


def _record_errors(exc: KafkaError) -> list[BatchIndexAndErrorMessage]:
    """KIP-467: which records of the batch made it fail."""
    if not isinstance(exc, RecordValidationError):
        return []
    return [
        BatchIndexAndErrorMessage(batch_index=e.batch_index, batch_index_error_message=e.message)
        for e in exc.record_errors
    ]


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
