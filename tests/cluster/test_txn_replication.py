"""Transactions on replicated partitions: markers wait for the ISR, followers build the same
producer state and aborted-transaction index, and a new leader keeps the open transactions
(its last stable offset) after the old one is killed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from helpers import create_topic, full_isr, partition_view, wait_for
from local_cluster import LocalCluster

from kbroker.client import BrokerConnection
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from wire.records.record import Record, build_batch

pytestmark = pytest.mark.slow

TOPIC = "txn-replicated"
ABORTED, OPEN = 7001, 7002


async def _call(cluster: LocalCluster, broker_id: int, api_key: int, body: object, version: int):
    broker = cluster.brokers[broker_id]
    connection = await BrokerConnection.open((broker.host, broker.port), "cluster-test")
    try:
        return await connection.call(api_key, version, body)
    finally:
        await connection.close()


def call(cluster: LocalCluster, broker_id: int, api_key: int, body: object, version: int):
    return asyncio.run(_call(cluster, broker_id, api_key, body, version))


def produce_txn(cluster: LocalCluster, leader: int, pid: int, count: int) -> int:
    now = int(time.time() * 1000)
    batch = build_batch(
        [Record(i, now, None, b"v%d" % i) for i in range(count)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    request = ProduceRequest(
        transactional_id="tx",
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            TopicProduceData(
                name=TOPIC, partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    response = call(cluster, leader, ApiKey.PRODUCE, request, 9)
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == 0
    return int(answer.base_offset)


def write_marker(cluster: LocalCluster, broker_id: int, pid: int, commit: bool) -> int:
    request = WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=pid,
                producer_epoch=0,
                transaction_result=commit,
                coordinator_epoch=0,
                topics=[WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])],
            )
        ]
    )
    response = call(cluster, broker_id, ApiKey.WRITE_TXN_MARKERS, request, 1)
    return int(response.markers[0].topics[0].partitions[0].error_code)


def fetch_committed(cluster: LocalCluster, broker_id: int):
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=1,
        topics=[
            FetchTopic(
                topic=TOPIC,
                partitions=[
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    return call(cluster, broker_id, ApiKey.FETCH, request, 12).responses[0].partitions[0]


def txn_index_bytes(cluster: LocalCluster, broker_id: int) -> bytes:
    directory = Path(cluster.brokers[broker_id].log_dir) / f"{TOPIC}-0"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.txnindex")))


def test_markers_replicate_and_a_new_leader_keeps_open_transactions(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, TOPIC, **{"min.insync.replicas": "2"})
    leader = wait_for(lambda: full_isr(cluster, TOPIC), 90, "a full ISR").leader
    aborted_first = produce_txn(cluster, leader, ABORTED, 3)
    open_first = produce_txn(cluster, leader, OPEN, 2)
    # Acknowledged only once the ISR has the marker.
    assert write_marker(cluster, leader, ABORTED, commit=False) == 0
    data = fetch_committed(cluster, leader)
    assert data.last_stable_offset == open_first
    assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [
        (ABORTED, aborted_first)
    ]
    index = txn_index_bytes(cluster, leader)
    assert len(index) == 34
    wait_for(
        lambda: all(txn_index_bytes(cluster, b) == index for b in cluster.brokers) or None,
        30,
        "the same aborted-transaction index on every replica",
    )
    # A follower other than the leader is not asked.
    follower = next(b for b in cluster.brokers if b != leader)
    assert write_marker(cluster, follower, OPEN, commit=True) == ErrorCode.NOT_LEADER_OR_FOLLOWER

    cluster.brokers[leader].kill()
    try:
        view = wait_for(
            lambda: (
                (v := partition_view(cluster, TOPIC)) is not None
                and v.leader not in (-1, leader)
                and v
            ),
            60,
            "a new leader",
        )
        new_leader = view.leader
        # Until the new leader's high watermark passes the abort marker (its follower fetches
        # once more), that transaction counts as undecided and the LSO stays at its start.
        data = wait_for(
            lambda: (
                (d := fetch_committed(cluster, new_leader)).error_code == 0
                and d.last_stable_offset == open_first
                and d
            ),
            30,
            "the new leader's LSO at the open transaction",
        )
        assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [
            (ABORTED, aborted_first)
        ]
        assert write_marker(cluster, new_leader, OPEN, commit=True) == 0
        done = fetch_committed(cluster, new_leader)
        assert done.last_stable_offset == done.high_watermark > open_first
    finally:
        cluster.brokers[leader].start(timeout=60)
