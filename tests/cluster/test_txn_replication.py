"""Transactions on replicated partitions: markers wait for the ISR, followers build the same
producer state and aborted-transaction index, and a new leader keeps the open transactions
(its last stable offset) after the old one is killed; producer ids are unique in the cluster,
whichever broker gives them out."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from helpers import create_topic, full_isr, partition_view, wait_for
from local_cluster import LocalCluster

from kbroker.client import BrokerConnection
from kbroker.data_client import DataClient
from kbroker.transactional_producer import TransactionalProducer, end_transaction
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from wire.messages.init_producer_id_request import InitProducerIdRequest
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from wire.records.batch import iter_batches
from wire.records.isolation import AbortedFilter
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


VERIFICATION = "transaction.partition.verification.enable"
BROKER_RESOURCE = 4


def verification_on(cluster: LocalCluster, broker_id: int) -> bool:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=BROKER_RESOURCE,
                resource_name=str(broker_id),
                configuration_keys=[VERIFICATION],
            )
        ]
    )
    response = call(cluster, broker_id, ApiKey.DESCRIBE_CONFIGS, request, 4)
    return response.results[0].configs[0].value == "true"


def set_verification(cluster: LocalCluster, enabled: bool) -> None:
    """KIP-890's verification of transactional produces, as a cluster-wide dynamic default,
    and wait for every live broker to apply it."""
    op = 1 if enabled else 0  # DELETE the default (back to true), or SET it to false
    request = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=BROKER_RESOURCE,
                resource_name="",
                configs=[
                    AlterableConfig(
                        name=VERIFICATION,
                        config_operation=op,
                        value=None if enabled else "false",
                    )
                ],
            )
        ]
    )
    live = [b for b, broker in cluster.brokers.items() if broker.running()]
    response = call(cluster, live[0], ApiKey.INCREMENTAL_ALTER_CONFIGS, request, 1)
    assert response.responses[0].error_code == 0, response.responses[0].error_message
    wait_for(
        lambda: all(verification_on(cluster, b) == enabled for b in live) or None,
        30,
        f"{VERIFICATION}={enabled} on every broker",
    )


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


def fetch_committed(cluster: LocalCluster, broker_id: int, topic: str = TOPIC):
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=1,
        topics=[
            FetchTopic(
                topic=topic,
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
    # The batches are written by hand, without a transaction coordinator, which KIP-890's
    # verification would refuse; an operator may switch it off (a dynamic config).
    set_verification(cluster, False)
    try:
        _markers_replicate_and_a_new_leader_keeps_open_transactions(cluster, leader)
    finally:
        set_verification(cluster, True)


def _markers_replicate_and_a_new_leader_keeps_open_transactions(
    cluster: LocalCluster, leader: int
) -> None:
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


def idempotent_producer_id(cluster: LocalCluster, broker_id: int) -> int:
    """InitProducerId without a transactional id, as the Java client's idempotent producer
    sends it (to whichever broker it picks)."""
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=2**31 - 1)
    response = call(cluster, broker_id, ApiKey.INIT_PRODUCER_ID, request, 4)
    assert response.error_code == 0
    return int(response.producer_id)


def produce_idempotent(cluster: LocalCluster, leader: int, topic: str, pid: int) -> int:
    now = int(time.time() * 1000)
    batch = build_batch(
        [Record(i, now, b"k%d" % i, b"v") for i in range(5)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
    )
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    response = call(cluster, leader, ApiKey.PRODUCE, request, 9)
    return int(response.responses[0].partition_responses[0].error_code)


def committed_record_count(cluster: LocalCluster, leader: int, topic: str) -> int:
    data = fetch_committed(cluster, leader, topic)
    keep = AbortedFilter((a.producer_id, a.first_offset) for a in data.aborted_transactions)
    records = bytes(data.records or b"")
    return sum(
        header.records_count
        for pos, header in iter_batches(records)
        if not keep.drop(header, records[pos : pos + header.size])
    )


def test_idempotent_producers_after_a_transaction_keep_their_records(
    cluster: LocalCluster,
) -> None:
    """librdkafka's test 0098, sub-test 1.2, with the Java producer: a transactional producer
    commits 5 records and aborts 5, then an idempotent producer writes 5. Each broker used
    to count producer ids from 0 by itself, so the idempotent producer, asking a broker other
    than the transaction coordinator, got the transactional producer's id: the partition
    leader fenced its batch (an older epoch) or took it for a duplicate, the Java producer
    dropped the records without a word, and a read_committed consumer read 5 of 10."""
    topic = "txn-then-idempotent"
    create_topic(cluster, topic, **{"min.insync.replicas": "2"})
    leader = wait_for(lambda: full_isr(cluster, topic), 90, "a full ISR").leader
    with DataClient(cluster.bootstrap) as client:
        transactional = TransactionalProducer(client, "txn-then-idempotent", 60_000)
        for commit in (True, False):
            # One transaction per init (the epoch goes up by one).
            transactional.init()
            now = int(time.time() * 1000)
            transactional.produce((topic, 0), [Record(0, now, b"t", b"v")] * 5)
            end_transaction(client, transactional.handle, commit)
    idempotent = [idempotent_producer_id(cluster, b) for b in sorted(cluster.brokers)]
    assert len({transactional.handle.producer_id, *idempotent}) == 4
    assert [produce_idempotent(cluster, leader, topic, pid) for pid in idempotent] == [0] * 3
    wait_for(
        lambda: committed_record_count(cluster, leader, topic) == 5 + 3 * 5 or None,
        30,
        "the committed and the idempotent records below the last stable offset",
    )
