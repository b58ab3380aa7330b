"""Transactional produce, WriteTxnMarkers, read_committed Fetch and ListOffsets through the
broker (the partition side of KIP-98)."""

from __future__ import annotations

from kbroker.broker import Broker
from tests.server.conftest import RawClient
from tests.server.test_data_path import create_topic, records
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.produce_response import ProduceResponse
from wire.records.record import build_batch

PID = 4000


def txn_batch(start: int, count: int, *, seq: int, epoch: int = 0, pid: int = PID) -> bytes:
    return build_batch(
        records(start, count),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


async def produce_txn(
    client: RawClient, topic: str, data: bytes, *, transactional_id: str | None = "tx"
) -> tuple[int, int]:
    """(error code, base offset) of a Produce v9 with one partition."""
    request = ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=data)]
            )
        ],
    )
    response = await client.call(ApiKey.PRODUCE, 9, request)
    assert isinstance(response, ProduceResponse)
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


async def test_transactional_batches_need_a_transactional_id(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "t")
    error, _ = await produce_txn(client, "t", txn_batch(0, 2, seq=0), transactional_id=None)
    assert error == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert await produce_txn(client, "t", txn_batch(0, 2, seq=0)) == (ErrorCode.NONE, 0)


async def test_open_transaction_holds_the_last_stable_offset(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "t")
    await produce_txn(client, "t", build_batch(records(0, 3)), transactional_id=None)
    assert await produce_txn(client, "t", txn_batch(3, 2, seq=0)) == (ErrorCode.NONE, 3)
    partition = broker.partition("t", 0)
    assert partition is not None
    assert (partition.high_watermark, partition.last_stable_offset) == (5, 3)
    plain = build_batch(records(5, 1), producer_id=PID, producer_epoch=0, base_sequence=2)
    assert (await produce_txn(client, "t", plain))[0] == ErrorCode.INVALID_TXN_STATE
    assert (await produce_txn(client, "t", txn_batch(5, 1, seq=0, epoch=1)))[0] == ErrorCode.NONE
    older = txn_batch(6, 1, seq=1, epoch=0)
    assert (await produce_txn(client, "t", older))[0] == ErrorCode.INVALID_PRODUCER_EPOCH
