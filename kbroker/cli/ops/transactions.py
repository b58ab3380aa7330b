"""Transactions over the protocol, for ``kbroker transactions`` and ``kbroker cluster
describe`` (what Kafka's kafka-transactions.sh shows): ListTransactions on every broker,
DescribeTransactions at a transactional id's coordinator (KIP-664), and the open
transactions of every partition from its leader's DescribeProducers, where a transaction open
for longer than ``transaction.max.timeout.ms`` is hanging (no coordinator will end it)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass

from kbroker.cli.ops.admin import OpsError, _check
from kbroker.client import BrokerConnection, KafkaClient
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.describe_producers_request import DescribeProducersRequest, TopicRequest
from wire.messages.describe_transactions_request import DescribeTransactionsRequest
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.list_transactions_request import ListTransactionsRequest

KEY_TYPE_TRANSACTION = 1
RESOURCE_BROKER = 4
MAX_TIMEOUT_CONFIG = "transaction.max.timeout.ms"
DEFAULT_MAX_TIMEOUT_MS = 900_000
# Answers that mean "ask again shortly" while a coordinator loads or moves.
_COORDINATOR_RETRY = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
}
_RETRY_SECONDS = 0.2
# How long a coordinator may take to load or move before the command gives up.
COORDINATOR_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class ListedTransaction:
    coordinator: int
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    coordinator: int
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction a partition's leader still holds open (DescribeProducers)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    last_timestamp_ms: int
    coordinator_epoch: int


async def list_transactions(
    client: KafkaClient, states: list[str], producer_ids: list[int]
) -> list[ListedTransaction]:
    """Every transactional id some broker coordinates, filtered as ListTransactions does."""
    metadata = await client.metadata([])
    found: list[ListedTransaction] = []
    for node_id in sorted(b.node_id for b in metadata.brokers):
        connection = await client.node(node_id)
        request = ListTransactionsRequest(state_filters=states, producer_id_filters=producer_ids)
        response, _ = await connection.request(ApiKey.LIST_TRANSACTIONS, request)
        _check(response.error_code, None, f"transactions of broker {node_id}")
        if response.unknown_state_filters:
            raise OpsError(
                f"unknown transaction state(s): {', '.join(response.unknown_state_filters)}"
            )
        found += [
            ListedTransaction(node_id, t.transactional_id, t.producer_id, t.transaction_state)
            for t in response.transaction_states
        ]
    return sorted(found, key=lambda t: t.transactional_id)


async def _coordinator(client: KafkaClient, transactional_id: str) -> tuple[int, BrokerConnection]:
    """The broker coordinating `transactional_id` (FindCoordinator, key type 1)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + COORDINATOR_WAIT_SECONDS
    while True:
        connection = await client.any_connection()
        version = connection.version(ApiKey.FIND_COORDINATOR)
        if version < 1:
            raise OpsError("the broker does not support transactions (FindCoordinator v0)")
        if version >= 4:
            request = FindCoordinatorRequest(
                key_type=KEY_TYPE_TRANSACTION, coordinator_keys=[transactional_id]
            )
        else:
            request = FindCoordinatorRequest(key=transactional_id, key_type=KEY_TYPE_TRANSACTION)
        response = await connection.call(ApiKey.FIND_COORDINATOR, version, request)
        answer = response.coordinators[0] if version >= 4 else response
        if answer.error_code == ErrorCode.NONE:
            return answer.node_id, await client.node(answer.node_id)
        if answer.error_code not in _COORDINATOR_RETRY or loop.time() > deadline:
            _check(answer.error_code, None, f"coordinator of {transactional_id!r}")
        await asyncio.sleep(_RETRY_SECONDS)


async def describe_transaction(
    client: KafkaClient, transactional_id: str
) -> TransactionDescription:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + COORDINATOR_WAIT_SECONDS
    while True:
        node_id, connection = await _coordinator(client, transactional_id)
        request = DescribeTransactionsRequest(transactional_ids=[transactional_id])
        response, _ = await connection.request(ApiKey.DESCRIBE_TRANSACTIONS, request)
        state = response.transaction_states[0]
        if state.error_code in _COORDINATOR_RETRY and loop.time() < deadline:
            await asyncio.sleep(_RETRY_SECONDS)
            continue
        _check(state.error_code, None, f"transaction {transactional_id!r}")
        return TransactionDescription(
            node_id,
            transactional_id,
            state.transaction_state,
            state.producer_id,
            state.producer_epoch,
            state.transaction_timeout_ms,
            state.transaction_start_time_ms,
            tuple(sorted((t.topic, p) for t in state.topics for p in t.partitions)),
        )


@dataclass(frozen=True)
class OpenTransactions:
    """What the reachable leaders hold open, and the leaders this client could not reach
    (their advertised address may be for another network, as a compose file's EXTERNAL
    listener seen from inside)."""

    found: list[OpenTransaction]
    unreachable: list[int]


async def open_transactions(client: KafkaClient) -> OpenTransactions:
    """The open transactions of every partition, asked of each partition's leader. Brokers
    without DescribeProducers (before KIP-664) are left out."""
    metadata = await client.metadata(None)
    led: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for topic in metadata.topics:
        for p in topic.partitions:
            if p.leader_id >= 0:
                led[p.leader_id][topic.name or ""].append(p.partition_index)
    found: list[OpenTransaction] = []
    unreachable: list[int] = []
    for leader, topics in sorted(led.items()):
        try:
            connection = await client.node(leader)
        except (OSError, TimeoutError, KafkaError):
            unreachable.append(leader)
            continue
        if ApiKey.DESCRIBE_PRODUCERS not in connection.versions:
            continue
        request = DescribeProducersRequest(
            topics=[TopicRequest(name=t, partition_indexes=ps) for t, ps in topics.items()]
        )
        response, _ = await connection.request(ApiKey.DESCRIBE_PRODUCERS, request)
        for topic in response.topics:
            for p in topic.partitions:
                # A partition that moved since the metadata was read: its new leader will
                # show it in the next run.
                if p.error_code != ErrorCode.NONE:
                    continue
                found += [
                    OpenTransaction(
                        topic.name,
                        p.partition_index,
                        s.producer_id,
                        s.producer_epoch,
                        s.current_txn_start_offset,
                        s.last_timestamp,
                        s.coordinator_epoch,
                    )
                    for s in p.active_producers
                    if s.current_txn_start_offset >= 0
                ]
    return OpenTransactions(
        sorted(found, key=lambda t: (t.topic, t.partition, t.producer_id)), unreachable
    )


async def max_transaction_timeout_ms(client: KafkaClient) -> int:
    """The brokers' transaction.max.timeout.ms (Kafka's default where none answers it)."""
    metadata = await client.metadata([])
    node_id = min(b.node_id for b in metadata.brokers)
    try:
        connection = await client.node(node_id)
    except (OSError, TimeoutError, KafkaError):
        return DEFAULT_MAX_TIMEOUT_MS
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=RESOURCE_BROKER,
                resource_name=str(node_id),
                configuration_keys=[MAX_TIMEOUT_CONFIG],
            )
        ]
    )
    response, _ = await connection.request(ApiKey.DESCRIBE_CONFIGS, request)
    for result in response.results:
        for config in result.configs if result.error_code == ErrorCode.NONE else []:
            if config.name == MAX_TIMEOUT_CONFIG and config.value:
                return int(config.value)
    return DEFAULT_MAX_TIMEOUT_MS


def hanging(
    transactions: list[OpenTransaction], now_ms: int, max_timeout_ms: int
) -> list[OpenTransaction]:
    """Open transactions whose last write is older than the longest timeout a coordinator
    allows: their coordinator would have aborted them by now, so none knows about them."""
    return [t for t in transactions if t.last_timestamp_ms + max_timeout_ms < now_ms]
