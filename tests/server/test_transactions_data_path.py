"""Transactional produce, WriteTxnMarkers, read_committed Fetch and ListOffsets through the
broker (the partition side of KIP-98)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.handlers.fetch import handle_fetch
from kbroker.log.file_region import FileRegion
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_data_path import create_topic, fetch, fetch_request, records
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.api_versions_response import ApiVersionsResponse
from wire.messages.describe_producers_request import DescribeProducersRequest
from wire.messages.describe_producers_request import TopicRequest as DescribeProducersTopic
from wire.messages.describe_producers_response import DescribeProducersResponse
from wire.messages.fetch_response import PartitionData
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.messages.list_offsets_response import ListOffsetsResponse
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.produce_response import ProduceResponse
from wire.messages.request_header import RequestHeader
from wire.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from wire.messages.write_txn_markers_response import WriteTxnMarkersResponse
from wire.records.record import Record, build_batch, decode_records


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """The partition side alone: these transactions have no coordinator, so the leaders do not
    verify them with one (KIP-890's verification is tested in tests/txn)."""
    instance = Broker(
        broker_config(
            tmp_path / "data", free_port(), transaction_partition_verification_enable="false"
        )
    )
    await instance.start()
    try:
        yield instance
    finally:
        await instance.stop()


PID = 4000


def now_records(start: int, count: int) -> list[Record]:
    """Records stamped now: markers are stamped now too, and a segment rolls when timestamps
    jump by more than segment.ms."""
    return records(start, count, ts=int(time.time() * 1000))


def txn_batch(start: int, count: int, *, seq: int, epoch: int = 0, pid: int = PID) -> bytes:
    return build_batch(
        now_records(start, count),
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
    await produce_txn(client, "t", build_batch(now_records(0, 3)), transactional_id=None)
    assert await produce_txn(client, "t", txn_batch(3, 2, seq=0)) == (ErrorCode.NONE, 3)
    partition = broker.partition("t", 0)
    assert partition is not None
    assert (partition.high_watermark, partition.last_stable_offset) == (5, 3)
    plain = build_batch(now_records(5, 1), producer_id=PID, producer_epoch=0, base_sequence=2)
    assert (await produce_txn(client, "t", plain))[0] == ErrorCode.INVALID_TXN_STATE
    assert (await produce_txn(client, "t", txn_batch(5, 1, seq=0, epoch=1)))[0] == ErrorCode.NONE
    older = txn_batch(6, 1, seq=1, epoch=0)
    assert (await produce_txn(client, "t", older))[0] == ErrorCode.INVALID_PRODUCER_EPOCH


async def write_markers(
    client: RawClient,
    topic: str,
    partitions: list[int],
    *,
    commit: bool,
    epoch: int = 0,
    coordinator_epoch: int = 0,
    pid: int = PID,
    version: int = 1,
    transaction_version: int = 0,
) -> dict[int, int]:
    """partition -> error code of a WriteTxnMarkers with one marker."""
    request = WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                coordinator_epoch=coordinator_epoch,
                transaction_version=transaction_version,
                topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=partitions)],
            )
        ]
    )
    response = await client.call(ApiKey.WRITE_TXN_MARKERS, version, request)
    assert isinstance(response, WriteTxnMarkersResponse)
    [result] = response.markers
    assert result.producer_id == pid and [t.name for t in result.topics] == [topic]
    return {p.partition_index: p.error_code for p in result.topics[0].partitions}


async def test_write_txn_markers_is_advertised(broker: Broker, client: RawClient) -> None:
    response = await client.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())
    assert isinstance(response, ApiVersionsResponse)
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert versions[ApiKey.WRITE_TXN_MARKERS] == (0, 2)


async def test_markers_end_transactions_at_every_version(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "t", partitions=2)
    partition = broker.partition("t", 0)
    assert partition is not None
    seq = 0
    for version in (0, 1, 2):
        for commit in (True, False):
            start = partition.log.log_end_offset
            await produce_txn(client, "t", txn_batch(0, 2, seq=seq))
            seq += 2
            assert partition.last_stable_offset == start
            errors = await write_markers(client, "t", [0, 7], commit=commit, version=version)
            assert errors == {0: ErrorCode.NONE, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            assert partition.log.log_end_offset == start + 3
            assert partition.last_stable_offset == partition.high_watermark == start + 3
    headers = [h for s in partition.log.segments() for _, h in s.batches_from(0)]
    assert [h.is_control for h in headers] == [False, True] * 6
    assert all(h.producer_id == PID and h.is_transactional for h in headers)
    assert await write_markers(client, "nope", [0], commit=True) == {
        0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    }


async def test_transaction_version_2_markers_carry_the_bumped_epoch(
    broker: Broker, client: RawClient
) -> None:
    # KIP-1228 (WriteTxnMarkers v2): a version 2 end bumps the epoch, so its marker must carry
    # a newer epoch than the transaction's; an equal one would end a later transaction.
    await create_topic(client, "t")
    await produce_txn(client, "t", txn_batch(0, 1, seq=0, epoch=3))
    tv2 = {"version": 2, "transaction_version": 2, "commit": True}
    assert await write_markers(client, "t", [0], epoch=3, **tv2) == {
        0: ErrorCode.INVALID_PRODUCER_EPOCH
    }
    partition = broker.partition("t", 0)
    assert partition is not None and partition.last_stable_offset == 0
    assert await write_markers(client, "t", [0], epoch=4, **tv2) == {0: ErrorCode.NONE}
    assert partition.last_stable_offset == partition.log.log_end_offset == 2
    # The same marker again (its answer lost) ends nothing and is accepted.
    assert await write_markers(client, "t", [0], epoch=4, **tv2) == {0: ErrorCode.NONE}


async def test_marker_for_a_partition_without_transaction_is_written(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "t", partitions=2)
    assert await write_markers(client, "t", [1], commit=False) == {1: ErrorCode.NONE}
    partition = broker.partition("t", 1)
    assert partition is not None and partition.log.log_end_offset == 1


async def test_stale_markers_are_refused(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "t")
    await produce_txn(client, "t", txn_batch(0, 1, seq=0, epoch=3))
    assert await write_markers(client, "t", [0], commit=True, epoch=3, coordinator_epoch=5) == {
        0: ErrorCode.NONE
    }
    await produce_txn(client, "t", txn_batch(1, 1, seq=1, epoch=3))
    assert await write_markers(client, "t", [0], commit=True, epoch=2, coordinator_epoch=5) == {
        0: ErrorCode.INVALID_PRODUCER_EPOCH
    }
    assert await write_markers(client, "t", [0], commit=True, epoch=3, coordinator_epoch=4) == {
        0: ErrorCode.TRANSACTION_COORDINATOR_FENCED
    }
    partition = broker.partition("t", 0)
    assert partition is not None and partition.last_stable_offset == 2


async def fetch_partition(
    client: RawClient, broker: Broker, topic: str, offset: int, *, isolation: int, **kw: int
) -> PartitionData:
    response = await fetch(client, broker, topic, offset, isolation_level=isolation, **kw)
    return response.responses[0].partitions[0]


async def list_latest(client: RawClient, topic: str, isolation: int) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)]
            )
        ],
    )
    response = await client.call(ApiKey.LIST_OFFSETS, 5, request)
    assert isinstance(response, ListOffsetsResponse)
    return response.topics[0].partitions[0].offset


async def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "t")
    await produce_txn(client, "t", txn_batch(0, 2, seq=0))  # 0-1, aborted
    await produce_txn(client, "t", txn_batch(2, 2, seq=0, pid=PID + 1))  # 2-3, committed
    await write_markers(client, "t", [0], commit=False)  # 4
    await write_markers(client, "t", [0], commit=True, pid=PID + 1)  # 5
    await produce_txn(client, "t", build_batch(now_records(6, 1)), transactional_id=None)  # 6
    await produce_txn(client, "t", txn_batch(7, 2, seq=2))  # 7-8, open
    await produce_txn(client, "t", build_batch(now_records(9, 1)), transactional_id=None)  # 9

    committed = await fetch_partition(client, broker, "t", 0, isolation=1)
    assert (committed.high_watermark, committed.last_stable_offset) == (10, 7)
    assert [r.offset for r in decode_records(committed.records)][-1] == 6
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(PID, 0)]
    later = await fetch_partition(client, broker, "t", 5, isolation=1)
    assert later.aborted_transactions == []
    uncommitted = await fetch_partition(client, broker, "t", 0, isolation=0)
    assert uncommitted.last_stable_offset == 7
    assert [r.offset for r in decode_records(uncommitted.records)][-1] == 9
    assert await list_latest(client, "t", isolation=1) == 7
    assert await list_latest(client, "t", isolation=0) == 10

    await write_markers(client, "t", [0], commit=False)  # 10
    done = await fetch_partition(client, broker, "t", 6, isolation=1)
    assert done.last_stable_offset == 11
    assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(PID, 7)]
    assert await list_latest(client, "t", isolation=1) == 11


async def test_read_committed_data_stays_a_file_region(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "t")
    await produce_txn(client, "t", txn_batch(0, 2, seq=0))
    await write_markers(client, "t", [0], commit=False)
    header = RequestHeader(request_api_key=ApiKey.FETCH, request_api_version=12, correlation_id=1)
    request = fetch_request(broker, "t", 0, isolation_level=1)
    response = await handle_fetch(broker, header, request, 12)
    data = response.responses[0].partitions[0]
    assert isinstance(data.records, FileRegion) and data.records.nbytes > 0
    assert len(data.aborted_transactions) == 1


async def test_a_read_committed_long_poll_wakes_when_the_lso_moves(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "t")
    await produce_txn(client, "t", txn_batch(0, 2, seq=0))
    other = await RawClient.connect(broker.port)
    started = time.monotonic()
    waiting = asyncio.ensure_future(
        fetch_partition(other, broker, "t", 0, isolation=1, max_wait_ms=10_000, min_bytes=1)
    )
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await write_markers(client, "t", [0], commit=True)
    data = await asyncio.wait_for(waiting, 5)
    assert time.monotonic() - started < 5
    assert data.last_stable_offset == 3
    assert [r.offset for r in decode_records(data.records)] == [0, 1, 2]
    other.writer.close()


async def test_retention_stops_at_the_last_stable_offset(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "t", segment_bytes="100", retention_ms="1")
    plain = await produce_txn(client, "t", build_batch(now_records(0, 1)), transactional_id=None)
    assert plain == (ErrorCode.NONE, 0)
    await produce_txn(client, "t", txn_batch(1, 2, seq=0))  # 1-2, open
    for i in range(3):
        await produce_txn(client, "t", build_batch(now_records(3 + i, 1)), transactional_id=None)
    partition = broker.partition("t", 0)
    assert partition is not None and len(partition.log.segments()) == 5
    await asyncio.sleep(0.01)
    assert broker.storage is not None
    broker.storage.enforce_retention()
    assert partition.log.log_start_offset == 1 == partition.last_stable_offset
    await write_markers(client, "t", [0], commit=True)  # 6
    await asyncio.sleep(0.01)
    broker.storage.enforce_retention()
    assert partition.log.log_start_offset > 1


async def test_describe_producers_shows_open_transactions(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "t")
    await produce_txn(client, "t", build_batch(now_records(0, 1)), transactional_id=None)
    await produce_txn(client, "t", txn_batch(1, 3, seq=0, epoch=2))  # 1-3, open
    await produce_txn(client, "t", txn_batch(4, 1, seq=0, pid=PID + 1))  # 4
    await write_markers(client, "t", [0], commit=True, pid=PID + 1, coordinator_epoch=9)
    request = DescribeProducersRequest(
        topics=[DescribeProducersTopic(name="t", partition_indexes=[0, 3])]
    )
    response = await client.call(ApiKey.DESCRIBE_PRODUCERS, 0, request)
    assert isinstance(response, DescribeProducersResponse)
    known, unknown = response.topics[0].partitions
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert known.error_code == ErrorCode.NONE
    states = {
        p.producer_id: (
            p.producer_epoch,
            p.last_sequence,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
        for p in known.active_producers
    }
    assert states == {PID: (2, 2, -1, 1), PID + 1: (0, 0, 9, -1)}
