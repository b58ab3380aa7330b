"""KIP-890 on an in-process broker, over the wire: partition leaders verify a transaction's
first batch with the coordinator (part 1), and transaction version 2 (part 2) bumps the epoch
at every end and lets the leaders add partitions. The answers are those Kafka 4.3 gave to the
same requests (Produce, EndTxn, TxnOffsetCommit at each version)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.client import BrokerConnection
from kbroker.group.offsets_store import OFFSETS_TOPIC, partition_for
from tests.group.conftest import StartBroker, connect
from tests.txn.test_txn_apis import GROUP, TOPIC, _add, _end, _init, _wait_state
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.end_txn_request import EndTxnRequest
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from wire.records.record import Record, build_batch


async def _broker(start_broker: StartBroker, **props: str) -> tuple[Broker, BrokerConnection]:
    """A broker with the topic, and a connection that found the transaction coordinator
    (which creates __transaction_state)."""
    b = await start_broker(**{"transaction.state.log.num.partitions": "2", **props})
    await b.metadata.create_topic(TOPIC, 2, 1)
    conn = await connect(b)
    await conn.call(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="tx", key_type=1))
    return b, conn


def _batch(pid: int, epoch: int, seq: int) -> bytes:
    record = Record(offset=0, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])
    return build_batch(
        [record], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )


async def _produce(
    broker: Broker, conn: BrokerConnection, version: int, pid: int, epoch: int, seq: int
) -> tuple[int, str | None]:
    """A transactional batch to partition 0: its error code and message."""
    data = PartitionProduceData(index=0, records=_batch(pid, epoch, seq))
    info = broker.metadata.topic(TOPIC)
    assert info is not None
    topic = (
        TopicProduceData(name=TOPIC, partition_data=[data])
        if version < 13
        else TopicProduceData(topic_id=info.topic_id, partition_data=[data])
    )
    request = ProduceRequest(transactional_id="tx", acks=-1, timeout_ms=5000, topic_data=[topic])
    response = await conn.call(ApiKey.PRODUCE, version, request)
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.error_message


async def _end_v5(conn: BrokerConnection, pid: int, epoch: int, commit: bool) -> Any:
    request = EndTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=commit
    )
    response = await conn.call(ApiKey.END_TXN, 5, request)
    return response.error_code, response.producer_id, response.producer_epoch


def _open_transactions(broker: Broker) -> dict[int, int]:
    partition = broker.partition(TOPIC, 0)
    assert partition is not None
    return partition.log.producers.ongoing_transactions()


async def test_a_produce_delayed_past_its_transaction_end_is_refused(
    start_broker: StartBroker,
) -> None:
    # The hole KIP-890 closes: the transaction was aborted while this batch was on its way; it
    # must not open a transaction that no coordinator will end (a hanging transaction).
    broker, conn = await _broker(start_broker)
    pid = (await _init(conn)).producer_id
    assert (await _add(conn, pid, 0, 0)).results_by_topic_v3_and_below[0].results_by_partition[
        0
    ].partition_error_code == ErrorCode.NONE
    assert await _produce(broker, conn, 11, pid, 0, 0) == (ErrorCode.NONE, None)
    assert await _end(conn, pid, 0, commit=False) == ErrorCode.NONE
    await _wait_state(broker, "CompleteAbort")
    assert _open_transactions(broker) == {}
    assert await _produce(broker, conn, 9, pid, 0, 1) == (
        ErrorCode.INVALID_TXN_STATE,
        "Partition was not added to the transaction",
    )
    assert await _produce(broker, conn, 11, pid, 0, 1) == (ErrorCode.TRANSACTION_ABORTABLE, None)
    assert _open_transactions(broker) == {}
    # Without an AddPartitionsToTxn, a version 1 producer's batch is refused too.
    assert await _produce(broker, conn, 11, pid, 0, 1) == (ErrorCode.TRANSACTION_ABORTABLE, None)
    await conn.close()


async def test_without_verification_the_late_produce_hangs(start_broker: StartBroker) -> None:
    # transaction.partition.verification.enable=false restores the old behaviour: the same
    # late batch opens a transaction that stays open (what find-hanging reports).
    broker, conn = await _broker(
        start_broker, **{"transaction.partition.verification.enable": "false"}
    )
    pid = (await _init(conn)).producer_id
    await _add(conn, pid, 0, 0)
    assert await _produce(broker, conn, 11, pid, 0, 0) == (ErrorCode.NONE, None)
    assert await _end(conn, pid, 0, commit=False) == ErrorCode.NONE
    await _wait_state(broker, "CompleteAbort")
    assert await _produce(broker, conn, 11, pid, 0, 1) == (ErrorCode.NONE, None)
    assert list(_open_transactions(broker)) == [pid]
    await conn.close()


async def test_transaction_version_2(start_broker: StartBroker) -> None:
    broker, conn = await _broker(start_broker)
    pid = (await _init(conn)).producer_id
    # Produce v12: the leader adds the partition; EndTxn v5 bumps the epoch and says so.
    assert await _produce(broker, conn, 12, pid, 0, 0) == (ErrorCode.NONE, None)
    _, description = broker.txn_coordinator.describe("tx")
    assert description is not None and description.partitions == frozenset({(TOPIC, 0)})
    assert await _end_v5(conn, pid, 0, commit=True) == (ErrorCode.NONE, pid, 1)
    await _wait_state(broker, "CompleteCommit")
    # A batch of the old epoch is fenced; a retry of the EndTxn gets the same answer.
    assert await _produce(broker, conn, 12, pid, 0, 1) == (ErrorCode.INVALID_PRODUCER_EPOCH, None)
    assert await _end_v5(conn, pid, 0, commit=True) == (ErrorCode.NONE, pid, 1)
    # The next transaction starts at sequence 0 with the new epoch (Produce v13: topic ids).
    assert await _produce(broker, conn, 13, pid, 1, 0) == (ErrorCode.NONE, None)
    assert await _end_v5(conn, pid, 1, commit=False) == (ErrorCode.NONE, pid, 2)
    await _wait_state(broker, "CompleteAbort")
    assert _open_transactions(broker) == {}
    await conn.close()


@pytest.mark.parametrize(("version", "error"), [(4, ErrorCode.TRANSACTION_ABORTABLE), (5, 0)])
async def test_txn_offset_commit_without_add_offsets(
    start_broker: StartBroker, version: int, error: int
) -> None:
    # v5 with transaction version 2: the group's offsets partition joins the transaction
    # without AddOffsetsToTxn; v4 expects AddOffsetsToTxn first.
    broker, conn = await _broker(start_broker)
    pid = (await _init(conn)).producer_id
    assert await _produce(broker, conn, 12, pid, 0, 0) == (ErrorCode.NONE, None)
    request = TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=GROUP,
        producer_id=pid,
        producer_epoch=0,
        topics=[
            TxnOffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)],
            )
        ],
    )
    response = await conn.call(ApiKey.TXN_OFFSET_COMMIT, version, request)
    assert response.topics[0].partitions[0].error_code == error
    _, description = broker.txn_coordinator.describe("tx")
    assert description is not None
    offsets = (
        OFFSETS_TOPIC,
        partition_for(GROUP, broker.group_coordinator.state.partition_count()),
    )
    assert (offsets in description.partitions) == (error == ErrorCode.NONE)
    await conn.close()
