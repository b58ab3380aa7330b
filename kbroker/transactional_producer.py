"""A blocking transactional producer over ``kbroker.data_client`` (KIP-98), for the Spark
sink's exactly-once mode.

One transaction at a time: ``init()`` (FindCoordinator for the transactional id, then
InitProducerId, which fences an earlier producer with the same id and aborts its open
transaction), ``produce()`` (AddPartitionsToTxn the first time a partition is written, then
transactional batches with their own sequence numbers), and the transaction is ended with
``end_transaction`` (EndTxn). Ending needs only the id, producer id and epoch
(``TransactionHandle``), so a process other than the writer may end it: a Spark task writes,
the driver commits once every task has written (a two-phase commit, as Flink's Kafka sink
does). ``transaction_state`` reads a transactional id's state (DescribeTransactions), which
tells a re-run whether its transaction was already committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kbroker.data_client import RETRY_BACKOFF_SECONDS, Connection, DataClient
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from wire.messages.describe_transactions_request import DescribeTransactionsRequest
from wire.messages.end_txn_request import EndTxnRequest
from wire.messages.init_producer_id_request import InitProducerIdRequest
from wire.records.record import Record, build_batch

TopicPartition = tuple[str, int]
T = TypeVar("T")
KEY_TYPE_TRANSACTION = 1
# The coordinator is busy ending the previous transaction: send the same request again
# shortly. (Coordinator loads and moves are the client's to judge.)
_BUSY = ErrorCode.CONCURRENT_TRANSACTIONS


@dataclass(frozen=True)
class TransactionHandle:
    """What ending a transaction takes, picklable (a Spark commit message carries it)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def _at_coordinator(
    client: DataClient, transactional_id: str, send: Callable[[Connection], T]
) -> T:
    """``send(connection)`` at the id's coordinator, again after retriable answers (which
    `send` raises as KafkaError) until the client's timeout."""
    deadline = time.monotonic() + client.timeout
    while True:
        connection = client.coordinator(transactional_id, KEY_TYPE_TRANSACTION)
        try:
            return send(connection)
        except KafkaError as exc:
            retry = exc.code == _BUSY or client.coordinator_failed(
                transactional_id, KEY_TYPE_TRANSACTION, exc.code
            )
            if not retry or time.monotonic() > deadline:
                raise
        time.sleep(RETRY_BACKOFF_SECONDS)


def _check(code: int, what: str) -> None:
    if code != ErrorCode.NONE:
        raise KafkaError(ErrorCode(code), what)


class TransactionalProducer:
    def __init__(self, client: DataClient, transactional_id: str, timeout_ms: int) -> None:
        self._client = client
        self._id = transactional_id
        self._timeout_ms = timeout_ms
        self._producer: tuple[int, int] | None = None
        self._sequences: dict[TopicPartition, int] = {}

    @property
    def handle(self) -> TransactionHandle:
        if self._producer is None:
            raise RuntimeError("init() first")
        return TransactionHandle(self._id, *self._producer)

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """The partitions the open transaction has written to."""
        return frozenset(self._sequences)

    def init(self) -> None:
        def send(connection: Connection) -> tuple[int, int]:
            request = InitProducerIdRequest(
                transactional_id=self._id, transaction_timeout_ms=self._timeout_ms
            )
            response, _ = connection.request(ApiKey.INIT_PRODUCER_ID, request)
            _check(response.error_code, f"InitProducerId for {self._id!r}")
            return response.producer_id, response.producer_epoch

        self._producer = _at_coordinator(self._client, self._id, send)
        self._sequences = {}

    def _add_partition(self, tp: TopicPartition) -> None:
        producer_id, epoch = self.handle.producer_id, self.handle.producer_epoch

        def send(connection: Connection) -> None:
            request = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self._id,
                v3_and_below_producer_id=producer_id,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=tp[0], partitions=[tp[1]])],
            )
            response, _ = connection.request(ApiKey.ADD_PARTITIONS_TO_TXN, request)
            for topic in response.results_by_topic_v3_and_below:
                for p in topic.results_by_partition:
                    _check(p.partition_error_code, f"AddPartitionsToTxn {tp[0]}-{tp[1]}")

        _at_coordinator(self._client, self._id, send)
        self._sequences[tp] = 0

    def produce(
        self, tp: TopicPartition, records: Sequence[Record], *, compression: int = 0
    ) -> int:
        """Append `records` to `tp` inside the open transaction; returns the base offset."""
        if not records:
            raise ValueError("nothing to produce")
        if tp not in self._sequences:
            self._add_partition(tp)
        handle = self.handle
        sequence = self._sequences[tp]
        batch = build_batch(
            [
                Record(offset=i, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers)
                for i, r in enumerate(records)
            ],
            compression=compression,
            producer_id=handle.producer_id,
            producer_epoch=handle.producer_epoch,
            base_sequence=sequence,
            transactional=True,
        )
        base = self._client.produce_batch(tp, batch, transactional_id=self._id)
        self._sequences[tp] = (sequence + len(records)) & 0x7FFFFFFF
        return base


def end_transaction(client: DataClient, handle: TransactionHandle, commit: bool) -> None:
    """Commit or abort the open transaction of `handle` (EndTxn), from any process."""

    def send(connection: Connection) -> None:
        request = EndTxnRequest(
            transactional_id=handle.transactional_id,
            producer_id=handle.producer_id,
            producer_epoch=handle.producer_epoch,
            committed=commit,
        )
        response, _ = connection.request(ApiKey.END_TXN, request)
        _check(response.error_code, f"EndTxn for {handle.transactional_id!r}")

    _at_coordinator(client, handle.transactional_id, send)


def transaction_state(client: DataClient, transactional_id: str) -> str | None:
    """The coordinator's state of `transactional_id` (Empty, Ongoing, CompleteCommit, ...),
    None when it does not know the id."""

    def send(connection: Connection) -> str | None:
        request = DescribeTransactionsRequest(transactional_ids=[transactional_id])
        response, _ = connection.request(ApiKey.DESCRIBE_TRANSACTIONS, request)
        state = response.transaction_states[0]
        if state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            return None
        _check(state.error_code, f"DescribeTransactions for {transactional_id!r}")
        return str(state.transaction_state)

    return _at_coordinator(client, transactional_id, send)
