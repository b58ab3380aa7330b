"""``kbroker transactions list|describe|find-hanging`` and the hanging transactions of
``kbroker cluster describe``, against a real kbroker process and a confluent-kafka
transactional producer."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.client import BrokerConnection
from tests.ops.support import Cli, OpsBroker
from wire.api_keys import ApiKey
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.records.record import Record, build_batch

pytestmark = pytest.mark.slow

HOUR_MS = 3_600_000


def _create(broker: OpsBroker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


async def _write_orphan_transaction(broker: OpsBroker, topic: str, producer_id: int) -> None:
    """A transactional batch an hour old from a producer no coordinator knows: what a
    coordinator lost (or a client bug) leaves behind, a transaction nothing will end."""
    batch = build_batch(
        [Record(0, int(time.time() * 1000) - HOUR_MS, None, b"orphan")],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    request = ProduceRequest(
        transactional_id="nobody",
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    connection = await BrokerConnection.open((broker.process.host, broker.process.port), "test")
    try:
        response = await connection.call(ApiKey.PRODUCE, 9, request)
    finally:
        await connection.close()
    assert response.responses[0].partition_responses[0].error_code == 0


def test_list_and_describe_an_open_transaction(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    _create(ops_broker, "cli-txn")
    producer = Producer({"bootstrap.servers": ops_broker.bootstrap, "transactional.id": "cli-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("cli-txn", value=b"open", partition=0)
    producer.flush(30)

    listed = cli("transactions", "list", *b)
    assert listed.code == 0, listed.err
    assert listed.out.splitlines()[0].split() == [
        "TRANSACTIONAL_ID",
        "COORDINATOR",
        "PRODUCER_ID",
        "STATE",
    ]
    row = next(line.split() for line in listed.out.splitlines() if line.startswith("cli-tx "))
    assert row[1] == "0" and row[3] == "Ongoing"
    committed_only = cli("transactions", "list", *b, "--state", "CompleteCommit", "--json")
    assert "cli-tx" not in [t["transactional_id"] for t in json.loads(committed_only.out)]
    bogus = cli("transactions", "list", *b, "--state", "Bogus")
    assert bogus.code == 1 and "unknown transaction state(s): Bogus" in bogus.err

    described = json.loads(cli("transactions", "describe", *b, "cli-tx", "--json").out)
    assert described["state"] == "Ongoing"
    assert described["producer_id"] == int(row[2])
    assert described["partitions"] == [["cli-txn", 0]]
    assert described["start_time_ms"] > 0
    text = cli("transactions", "describe", *b, "cli-tx")
    assert "cli-txn-0" in text.out and "Ongoing" in text.out

    # Open, but not for longer than a coordinator allows: not hanging, unless told so.
    assert json.loads(cli("transactions", "find-hanging", *b, "--json").out) == []
    strict = cli("transactions", "find-hanging", *b, "--max-transaction-timeout", "0", "--json")
    assert {(t["topic"], t["producer_id"]) for t in json.loads(strict.out)} == {
        ("cli-txn", described["producer_id"])
    }

    producer.commit_transaction(30)
    after = json.loads(cli("transactions", "describe", *b, "cli-tx", "--json").out)
    assert after["state"] == "CompleteCommit" and after["partitions"] == []

    unknown = cli("transactions", "describe", *b, "no-such-tx")
    assert unknown.code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in unknown.err


def test_hanging_transaction_found(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    _create(ops_broker, "cli-hanging")
    asyncio.run(_write_orphan_transaction(ops_broker, "cli-hanging", producer_id=424242))

    found = json.loads(cli("transactions", "find-hanging", *b, "--json").out)
    assert [(t["topic"], t["partition"], t["producer_id"]) for t in found] == [
        ("cli-hanging", 0, 424242)
    ]
    described = cli("cluster", "describe", *b)
    assert described.code == 0, described.err
    assert "Hanging transactions: 1" in described.out
    assert "cli-hanging-0" in described.out
    as_json = json.loads(cli("cluster", "describe", *b, "--json").out)
    assert [t["producer_id"] for t in as_json["hanging_transactions"]] == [424242]
