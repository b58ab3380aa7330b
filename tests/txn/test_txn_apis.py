"""The transaction coordinator's APIs on a real in-process broker, over the wire: every
version of each, markers written to the partitions, transactional offsets pending until their
marker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.client import BrokerConnection
from kbroker.dispatch import served_versions
from kbroker.group.offsets_store import OFFSETS_TOPIC, partition_for
from kbroker.txn.log_records import TRANSACTION_STATE_TOPIC
from tests.group.conftest import StartBroker, connect
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from wire.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.describe_transactions_request import DescribeTransactionsRequest
from wire.messages.end_txn_request import EndTxnRequest
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.init_producer_id_request import InitProducerIdRequest
from wire.messages.list_transactions_request import ListTransactionsRequest
from wire.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from wire.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from wire.records.batch import iter_batches

TOPIC = "events"
GROUP = "g"


@pytest.fixture
async def broker(start_broker: StartBroker) -> Broker:
    b = await start_broker(**{"transaction.state.log.num.partitions": "2"})
    await b.metadata.create_topic(TOPIC, 2, 1)
    return b


@pytest.fixture
async def conn(broker: Broker) -> AsyncIterator[BrokerConnection]:
    c = await connect(broker)
    yield c
    await c.close()


def versions(api: ApiKey) -> list[int]:
    return list(served_versions(api))


async def _init(conn: BrokerConnection, txn: str = "tx", version: int = 4, **kw: Any) -> Any:
    request = InitProducerIdRequest(
        transactional_id=txn, transaction_timeout_ms=kw.pop("timeout", 10_000), **kw
    )
    for _ in range(100):
        response = await conn.call(ApiKey.INIT_PRODUCER_ID, version, request)
        if response.error_code not in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.CONCURRENT_TRANSACTIONS,
            ErrorCode.NOT_COORDINATOR,
        ):
            return response
        await asyncio.sleep(0.05)
    return response


async def _add(
    conn: BrokerConnection, pid: int, epoch: int, *partitions: int, version: int = 3
) -> Any:
    topics = [AddPartitionsToTxnTopic(name=TOPIC, partitions=list(partitions))]
    if version >= 4:
        request = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnTransaction(
                    transactional_id="tx", producer_id=pid, producer_epoch=epoch, topics=topics
                )
            ]
        )
    else:
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=topics,
        )
    return await conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, request)


async def _end(conn: BrokerConnection, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    request = EndTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=commit
    )
    response = await conn.call(ApiKey.END_TXN, version, request)
    return response.error_code


async def _wait_state(broker: Broker, state: str) -> None:
    for _ in range(200):
        _, description = broker.txn_coordinator.describe("tx")
        if description is not None and description.state.display_name == state:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"transaction never reached {state}")


async def test_transaction_apis_are_advertised(conn: BrokerConnection) -> None:
    response = await conn.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    for api in (
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ApiKey.ADD_OFFSETS_TO_TXN,
        ApiKey.END_TXN,
        ApiKey.TXN_OFFSET_COMMIT,
        ApiKey.DESCRIBE_TRANSACTIONS,
        ApiKey.LIST_TRANSACTIONS,
        ApiKey.WRITE_TXN_MARKERS,
    ):
        assert advertised[api] == (served_versions(api).start, served_versions(api).stop - 1)


# v0 has no key type (groups only).
@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR)[1:])
async def test_find_transaction_coordinator(
    broker: Broker, conn: BrokerConnection, version: int
) -> None:
    if version >= 4:
        request = FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"])
    else:
        request = FindCoordinatorRequest(key="tx", key_type=1)
    response = await conn.call(ApiKey.FIND_COORDINATOR, version, request)
    found = response.coordinators[0] if version >= 4 else response
    assert (found.error_code, found.node_id, found.port) == (ErrorCode.NONE, 0, broker.port)
    topic = broker.metadata.topic(TRANSACTION_STATE_TOPIC)
    assert topic is not None and len(topic.partitions) == 2


@pytest.mark.parametrize("version", versions(ApiKey.INIT_PRODUCER_ID))
async def test_init_producer_id_bumps_and_fences(
    broker: Broker, conn: BrokerConnection, version: int
) -> None:
    await conn.call(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="tx", key_type=1))
    first = await _init(conn, version=version)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
    second = await _init(conn, version=version)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    too_long = await _init(conn, version=version, timeout=900_001)
    assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    fenced = ErrorCode.PRODUCER_FENCED if version >= 4 else ErrorCode.INVALID_PRODUCER_EPOCH
    if version >= 3:
        # KIP-360: naming an epoch that is neither current nor the previous one.
        stale = await _init(conn, version=version, producer_id=first.producer_id, producer_epoch=7)
        assert stale.error_code == fenced


@pytest.mark.parametrize("version", versions(ApiKey.END_TXN))
async def test_commit_writes_markers_and_end_txn_versions(
    broker: Broker, conn: BrokerConnection, version: int
) -> None:
    await conn.call(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="tx", key_type=1))
    init = await _init(conn)
    pid = init.producer_id
    added = await _add(conn, pid, 0, 0, 1)
    assert [
        p.partition_error_code
        for t in added.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ] == [ErrorCode.NONE, ErrorCode.NONE]
    assert await _end(conn, pid, 0, True, version) == ErrorCode.NONE
    await _wait_state(broker, "CompleteCommit")
    for index in (0, 1):
        partition = broker.partition(TOPIC, index)
        assert partition is not None
        region = partition.log.read(
            0, 1 << 20, max_offset=partition.log.log_end_offset, min_one_batch=True
        )
        assert region is not None
        headers = [h for _, h in iter_batches(region.read())]
        assert [(h.is_control, h.producer_id) for h in headers] == [(True, pid)]
    # A retry of the commit is answered; an abort now is not a valid transition.
    assert await _end(conn, pid, 0, True, version) == ErrorCode.NONE
    assert await _end(conn, pid, 0, False, version) == ErrorCode.INVALID_TXN_STATE
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert await _end(conn, pid, 9, True, version) == fenced


@pytest.mark.parametrize("version", versions(ApiKey.ADD_PARTITIONS_TO_TXN))
async def test_add_partitions_versions(
    broker: Broker, conn: BrokerConnection, version: int
) -> None:
    await conn.call(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="tx", key_type=1))
    pid = (await _init(conn)).producer_id
    response = await _add(conn, pid, 0, 0, version=version)
    if version >= 4:
        (result,) = response.results_by_transaction
        topics = result.topic_results
    else:
        topics = response.results_by_topic_v3_and_below
    assert [(t.name, [p.partition_error_code for p in t.results_by_partition]) for t in topics] == [
        (TOPIC, [ErrorCode.NONE])
    ]
    unknown = await _add(conn, pid, 0, 0, 7, version=3)
    assert {
        p.partition_index: p.partition_error_code
        for t in unknown.results_by_topic_v3_and_below
        for p in t.results_by_partition
    } == {0: ErrorCode.OPERATION_NOT_ATTEMPTED, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    fenced = await _add(conn, pid, 5, 0, version=version)
    codes = (
        fenced.results_by_transaction[0].topic_results
        if version >= 4
        else fenced.results_by_topic_v3_and_below
    )
    expected = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert codes[0].results_by_partition[0].partition_error_code == expected


async def test_verify_only(conn: BrokerConnection) -> None:
    await conn.call(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="tx", key_type=1))
    pid = (await _init(conn)).producer_id
    await _add(conn, pid, 0, 0)
    request = AddPartitionsToTxnRequest(
        transactions=[
            AddPartitionsToTxnTransaction(
                transactional_id="tx",
                producer_id=pid,
                producer_epoch=0,
                verify_only=True,
                topics=[AddPartitionsToTxnTopic(name=TOPIC, partitions=[0, 1])],
            )
        ]
    )
    response = await conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, request)
    (topic,) = response.results_by_transaction[0].topic_results
    assert {p.partition_index: p.partition_error_code for p in topic.results_by_partition} == {
        0: ErrorCode.NONE,
        1: ErrorCode.INVALID_TXN_STATE,
    }


async def _fetch_offset(conn: BrokerConnection, require_stable: bool) -> tuple[int, int]:
    request = OffsetFetchRequest(
        group_id=GROUP,
        topics=[OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])],
        require_stable=require_stable,
    )
    response = await conn.call(ApiKey.OFFSET_FETCH, 7, request)
    p = response.topics[0].partitions[0]
    return p.committed_offset, p.error_code


@pytest.mark.parametrize("commit", [True, False])
@pytest.mark.parametrize("version", versions(ApiKey.TXN_OFFSET_COMMIT))
async def test_txn_offsets_pending_until_the_marker(
    broker: Broker, conn: BrokerConnection, version: int, commit: bool
) -> None:
    await conn.call(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="tx", key_type=1))
    pid = (await _init(conn)).producer_id
    added = await conn.call(
        ApiKey.ADD_OFFSETS_TO_TXN,
        3,
        AddOffsetsToTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=0, group_id=GROUP
        ),
    )
    assert added.error_code == ErrorCode.NONE
    _, description = broker.txn_coordinator.describe("tx")
    assert description is not None
    index = partition_for(GROUP, 3)
    assert description.partitions == frozenset({(OFFSETS_TOPIC, index)})
    committed = await conn.call(
        ApiKey.TXN_OFFSET_COMMIT,
        version,
        TxnOffsetCommitRequest(
            transactional_id="tx",
            group_id=GROUP,
            producer_id=pid,
            producer_epoch=0,
            topics=[
                TxnOffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=42)
                    ],
                )
            ],
        ),
    )
    assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
    assert await _fetch_offset(conn, require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert await _fetch_offset(conn, require_stable=False) == (-1, ErrorCode.NONE)
    assert await _end(conn, pid, 0, commit) == ErrorCode.NONE
    await _wait_state(broker, "CompleteCommit" if commit else "CompleteAbort")
    expected = 42 if commit else -1
    assert await _fetch_offset(conn, require_stable=True) == (expected, ErrorCode.NONE)
    # The log says the same after a reload.
    coordinator = broker.group_coordinator
    coordinator.core.unload(index)
    await coordinator.state._load(index, coordinator.begin_load(index))
    assert await _fetch_offset(conn, require_stable=True) == (expected, ErrorCode.NONE)


async def test_txn_offset_commit_from_a_fenced_producer(
    broker: Broker, conn: BrokerConnection
) -> None:
    await conn.call(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="tx", key_type=1))
    await _init(conn)
    pid = (await _init(conn)).producer_id  # epoch 1
    added = await conn.call(
        ApiKey.ADD_OFFSETS_TO_TXN,
        3,
        AddOffsetsToTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=1, group_id=GROUP
        ),
    )
    assert added.error_code == ErrorCode.NONE
    request = TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=GROUP,
        producer_id=pid,
        producer_epoch=1,
        topics=[
            TxnOffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)],
            )
        ],
    )
    assert (await conn.call(ApiKey.TXN_OFFSET_COMMIT, 3, request)).topics[0].partitions[
        0
    ].error_code == ErrorCode.NONE
    request.producer_epoch = 0
    response = await conn.call(ApiKey.TXN_OFFSET_COMMIT, 3, request)
    assert response.topics[0].partitions[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH


async def test_describe_and_list_transactions(broker: Broker, conn: BrokerConnection) -> None:
    await conn.call(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="tx", key_type=1))
    pid = (await _init(conn)).producer_id
    await _add(conn, pid, 0, 1)
    described = await conn.call(
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        DescribeTransactionsRequest(transactional_ids=["tx", "nope"]),
    )
    found, missing = described.transaction_states
    assert (found.transaction_state, found.producer_id, found.transaction_timeout_ms) == (
        "Ongoing",
        pid,
        10_000,
    )
    assert [(t.topic, t.partitions) for t in found.topics] == [(TOPIC, [1])]
    assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    for version in versions(ApiKey.LIST_TRANSACTIONS):
        listed = await conn.call(
            ApiKey.LIST_TRANSACTIONS,
            version,
            ListTransactionsRequest(state_filters=["Ongoing", "Bogus"]),
        )
        assert listed.unknown_state_filters == ["Bogus"]
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
            ("tx", "Ongoing")
        ]


async def test_list_transactions_by_pattern(broker: Broker, conn: BrokerConnection) -> None:
    # KIP-1152 (v2): RE2/J syntax matched against the whole id, as Kafka 4.3 answers.
    await conn.call(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="tx", key_type=1))
    for transactional_id in ("tx", "xab", "xabc"):
        await _init(conn, transactional_id)
    expected = {
        None: ["tx", "xab", "xabc"],
        "": ["tx", "xab", "xabc"],
        "xab": ["xab"],
        "a.*": [],
        ".*ab": ["xab"],
        "x[[:alpha:]]+": ["xab", "xabc"],
        "(?i)XAB": ["xab"],
    }
    for pattern, ids in expected.items():
        listed = await conn.call(
            ApiKey.LIST_TRANSACTIONS, 2, ListTransactionsRequest(transactional_id_pattern=pattern)
        )
        assert listed.error_code == ErrorCode.NONE
        assert sorted(t.transactional_id for t in listed.transaction_states) == ids, pattern
    for bad in ("(", "[a-", "(?<=x)ab"):
        listed = await conn.call(
            ApiKey.LIST_TRANSACTIONS, 2, ListTransactionsRequest(transactional_id_pattern=bad)
        )
        assert listed.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION, bad
        assert listed.transaction_states == []
