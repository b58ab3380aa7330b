"""Partition leaders verify transactions with their coordinator (KIP-890).

Before the first batch of a producer's transaction is appended to a partition (a Produce
request, or the group coordinator's TxnOffsetCommit write to ``__consumer_offsets``), the
leader asks the transactional id's coordinator whether the partition is part of the producer's
ongoing transaction (AddPartitionsToTxn v4+ with ``verify_only``) or, with transaction version
2, to add it (the client no longer does). A batch of a transaction that already ended (a
request delayed past its EndTxn, the hole KIP-890 closes) is refused, so it cannot open a
transaction no coordinator will end. The coordinator may be this broker: then it is asked
directly. What the coordinator answers becomes the producer's error with ``produce_error``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kbroker.inter_broker import BrokerConnections
from kbroker.txn.log_records import TV_2, TopicPartition
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from wire.messages.add_partitions_to_txn_response import AddPartitionsToTxnResponse

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

# Coordinator answers a producer retries: the coordinator moved, is loading, or is completing
# the previous transaction. Kafka gives them to the producer as NOT_ENOUGH_REPLICAS, which
# every client version retries.
_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
NOT_IN_TRANSACTION = "Partition was not added to the transaction"


def produce_error(error: ErrorCode, abortable_known: bool) -> KafkaError | None:
    """The producer's error for a coordinator's answer (None: verified). ``abortable_known``:
    the request version knows TRANSACTION_ABORTABLE (Produce v11+, TxnOffsetCommit v4+), which
    replaces INVALID_TXN_STATE for a partition outside the transaction, as Kafka answers."""
    if error == ErrorCode.NONE:
        return None
    if error in _RETRIABLE:
        return KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, f"transaction verification: {error.name}")
    if error == ErrorCode.PRODUCER_FENCED:
        return KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH)
    if error in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        if abortable_known:
            return KafkaError(ErrorCode.TRANSACTION_ABORTABLE)
        return KafkaError(ErrorCode.INVALID_TXN_STATE, NOT_IN_TRANSACTION)
    return KafkaError(error)


class TxnVerifier:
    """Asks transaction coordinators, over one connection per coordinator broker."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._connections = BrokerConnections(
            broker, f"kbroker-txn-verification-{broker.config.broker_id}"
        )

    async def close(self) -> None:
        await self._connections.close()

    async def check(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        """Each partition's answer: whether it is in the transaction (``add``: after adding it,
        transaction version 2)."""
        wanted = list(partitions)
        coordinator = self._broker.txn_coordinator
        error, leader = await coordinator.find_coordinator(transactional_id)
        if leader is None:
            return dict.fromkeys(wanted, error)
        if leader.broker_id == self._broker.config.broker_id:
            if add:
                added = await coordinator.add_partitions(
                    transactional_id, producer_id, producer_epoch, wanted, TV_2
                )
                return dict.fromkeys(wanted, added)
            return coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, wanted
            )
        return await self._ask(
            leader.broker_id, transactional_id, producer_id, producer_epoch, wanted, add
        )

    async def _ask(
        self,
        broker_id: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        wanted: list[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        topics: dict[str, list[int]] = {}
        for topic, index in wanted:
            topics.setdefault(topic, []).append(index)
        request = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=not add,
                    topics=[
                        AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in topics.items()
                    ],
                )
            ]
        )
        try:
            connection = await self._connections.get(broker_id)
            if connection is None:
                return dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            response, _ = await connection.request(ApiKey.ADD_PARTITIONS_TO_TXN, request)
        except (OSError, EOFError, TimeoutError, KafkaError, asyncio.IncompleteReadError) as exc:
            log.info("transaction verification with broker %d failed: %s", broker_id, exc)
            await self._connections.drop(broker_id)
            return dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        assert isinstance(response, AddPartitionsToTxnResponse)
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(wanted, ErrorCode(response.error_code))
        answers = dict.fromkeys(wanted, ErrorCode.UNKNOWN_SERVER_ERROR)
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    answers[(topic.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return answers
