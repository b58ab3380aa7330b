"""Transaction coordinator APIs (KIP-98, KIP-890): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions, ListTransactions. InitProducerId with a transactional id is answered in
``init_producer_id.py`` through the same coordinator, FindCoordinator in ``groups.py``.

Each handler translates the wire messages of every version to the coordinator
(``kbroker.txn.coordinator``) and back. Requests of versions that predate PRODUCER_FENCED get
INVALID_PRODUCER_EPOCH in its place, as Kafka answers them.

Authorization (kbroker/authorization.py), as Kafka's: changing a transaction needs WRITE on
its transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), adding partitions WRITE
on their topics (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED), adding
offsets READ on the group (GROUP_AUTHORIZATION_FAILED); describing needs DESCRIBE on the
transactional id, and listing shows the describable ones only.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.group.offsets_store import OFFSETS_TOPIC, partition_for
from kbroker.mirror.topic_configs import read_only_error
from kbroker.regex import InvalidRegex, Regex
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kbroker.txn.log_records import TV_1, TV_2, TopicPartition, TxnState
from wire.errors import ErrorCode
from wire.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from wire.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from wire.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from wire.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from wire.messages.describe_transactions_request import DescribeTransactionsRequest
from wire.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TopicData,
)
from wire.messages.describe_transactions_response import (
    TransactionState as DescribedState,
)
from wire.messages.end_txn_request import EndTxnRequest
from wire.messages.end_txn_response import EndTxnResponse
from wire.messages.list_transactions_request import ListTransactionsRequest
from wire.messages.list_transactions_response import ListTransactionsResponse
from wire.messages.list_transactions_response import TransactionState as ListedState
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

# The first version whose clients know PRODUCER_FENCED: AddPartitionsToTxn, AddOffsetsToTxn
# and EndTxn v2, InitProducerId v4 (the specs' version notes).
FIRST_FENCED_VERSION = 2
FIRST_FENCED_INIT_VERSION = 4
# AddPartitionsToTxn v4+ is the batched broker-to-coordinator form (KIP-890).
FIRST_BATCHED_ADD_PARTITIONS_VERSION = 4
# EndTxn v5: transaction version 2, the end bumps the producer's epoch (KIP-890).
FIRST_EPOCH_BUMP_END_VERSION = 5


def fenced_for(error: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """PRODUCER_FENCED as an old client knows it."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_fenced_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _may_txn(broker: Broker, operation: AclOperation, transactional_id: str) -> bool:
    return authorize(broker, operation, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _partitions(topics: list[AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return [(t.name, p) for t in topics for p in t.partitions]


def _topic_results(
    errors: dict[TopicPartition, ErrorCode],
) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=error)
        )
    return [
        AddPartitionsToTxnTopicResult(name=name, results_by_partition=results)
        for name, results in by_topic.items()
    ]


async def _add_one(
    broker: Broker, txn: AddPartitionsToTxnTransaction, version: int
) -> dict[TopicPartition, ErrorCode]:
    """One transaction's partitions: unknown ones make the rest OPERATION_NOT_ATTEMPTED."""
    wanted = _partitions(txn.topics)
    if not _may_txn(broker, AclOperation.WRITE, txn.transactional_id):
        return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    refused = {
        t for t, _ in wanted if not authorize(broker, AclOperation.WRITE, ResourceType.TOPIC, t)
    }
    if refused:
        return {
            tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if tp[0] in refused
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    metadata = broker.metadata
    unknown = set()
    for topic, index in wanted:
        info = metadata.topic(topic)
        if info is None or not 0 <= index < len(info.partitions):
            unknown.add((topic, index))
    if unknown:
        return {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    # A mirror topic's records, transaction markers included, come from its source only: a
    # local transaction's marker would take an offset the source's next batch needs.
    mirrors = {
        t
        for t, _ in wanted
        if (info := metadata.topic(t)) is not None and read_only_error(t, info.configs)
    }
    if mirrors:
        return {
            tp: ErrorCode.INVALID_REQUEST if tp[0] in mirrors else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    coordinator = broker.txn_coordinator
    if txn.verify_only:
        return coordinator.verify_partitions(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
        )
    # Brokers add partitions for their producers only with transaction version 2 (KIP-890).
    txn_version = TV_2 if version >= FIRST_BATCHED_ADD_PARTITIONS_VERSION else TV_1
    error = await coordinator.add_partitions(
        txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted, txn_version
    )
    error = fenced_for(error, version, FIRST_FENCED_VERSION)
    return dict.fromkeys(wanted, error)


async def handle_add_partitions_to_txn(
    broker: Broker, header: RequestHeader, request: AddPartitionsToTxnRequest, version: int
) -> AddPartitionsToTxnResponse:
    if version < FIRST_BATCHED_ADD_PARTITIONS_VERSION:
        single = AddPartitionsToTxnTransaction(
            transactional_id=request.v3_and_below_transactional_id,
            producer_id=request.v3_and_below_producer_id,
            producer_epoch=request.v3_and_below_producer_epoch,
            topics=request.v3_and_below_topics,
        )
        errors = await _add_one(broker, single, version)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_topic_results(errors))
    if not authorize(broker, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        # The batched form is the brokers' own (KIP-890), as Kafka authorizes it.
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    outcomes = await asyncio.gather(*(_add_one(broker, t, version) for t in request.transactions))
    return AddPartitionsToTxnResponse(
        results_by_transaction=[
            AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=_topic_results(errors)
            )
            for txn, errors in zip(request.transactions, outcomes, strict=True)
        ]
    )


async def handle_add_offsets_to_txn(
    broker: Broker, header: RequestHeader, request: AddOffsetsToTxnRequest, version: int
) -> AddOffsetsToTxnResponse:
    """The group's ``__consumer_offsets`` partition joins the transaction (TxnOffsetCommit
    writes there next)."""
    if not _may_txn(broker, AclOperation.WRITE, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorize(broker, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    count = broker.group_coordinator.state.partition_count()
    offsets_partition = (OFFSETS_TOPIC, partition_for(request.group_id, count))
    error = await broker.txn_coordinator.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [offsets_partition]
    )
    return AddOffsetsToTxnResponse(error_code=fenced_for(error, version, FIRST_FENCED_VERSION))


async def handle_end_txn(
    broker: Broker, header: RequestHeader, request: EndTxnRequest, version: int
) -> EndTxnResponse:
    if not _may_txn(broker, AclOperation.WRITE, request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    result = await broker.txn_coordinator.end_txn(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.committed,
        TV_2 if version >= FIRST_EPOCH_BUMP_END_VERSION else TV_1,
    )
    return EndTxnResponse(
        error_code=fenced_for(result.error, version, FIRST_FENCED_VERSION),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )


async def handle_describe_transactions(
    broker: Broker, header: RequestHeader, request: DescribeTransactionsRequest, version: int
) -> DescribeTransactionsResponse:
    states = []
    for transactional_id in request.transactional_ids:
        if not _may_txn(broker, AclOperation.DESCRIBE, transactional_id):
            states.append(
                DescribedState(
                    error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    transactional_id=transactional_id,
                )
            )
            continue
        error, description = broker.txn_coordinator.describe(transactional_id)
        if description is None:
            states.append(DescribedState(error_code=error, transactional_id=transactional_id))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(description.partitions):
            by_topic.setdefault(topic, []).append(index)
        states.append(
            DescribedState(
                error_code=ErrorCode.NONE,
                transactional_id=transactional_id,
                transaction_state=description.state.display_name,
                transaction_timeout_ms=description.timeout_ms,
                transaction_start_time_ms=description.start_ms,
                producer_id=description.producer_id,
                producer_epoch=description.producer_epoch,
                topics=[TopicData(topic=t, partitions=p) for t, p in by_topic.items()],
            )
        )
    return DescribeTransactionsResponse(transaction_states=states)


async def handle_list_transactions(
    broker: Broker, header: RequestHeader, request: ListTransactionsRequest, version: int
) -> ListTransactionsResponse:
    states = []
    unknown = []
    for name in request.state_filters:
        state = TxnState.from_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.append(state)
    if unknown and not states:
        # Only unknown states asked for: nothing can match.
        return ListTransactionsResponse(unknown_state_filters=unknown)
    pattern = None
    if request.transactional_id_pattern:
        try:
            pattern = Regex(request.transactional_id_pattern)
        except InvalidRegex:
            return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION)
    error, listed = broker.txn_coordinator.list_transactions(
        states, request.producer_id_filters, request.duration_filter
    )
    if pattern is not None:
        listed = [d for d in listed if pattern.matches(d.transactional_id)]
    return ListTransactionsResponse(
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            ListedState(
                transactional_id=d.transactional_id,
                producer_id=d.producer_id,
                transaction_state=d.state.display_name,
            )
            for d in listed
            if _may_txn(broker, AclOperation.DESCRIBE, d.transactional_id)
        ],
    )
