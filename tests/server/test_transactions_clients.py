"""Stock clients read transactional data written through Produce and WriteTxnMarkers:
read_committed consumers drop aborted records with the broker's aborted_transactions list
and stop at the last stable offset; read_uncommitted ones see every record."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPartition

from kbroker.broker import Broker
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_data_path import create_topic
from tests.server.test_transactions_data_path import PID, produce_txn, txn_batch, write_markers


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


COMMITTED_PID, ABORTED_PID, OPEN_PID = PID, PID + 1, PID + 2


async def write_transactions(client: RawClient) -> tuple[list[bytes], list[bytes]]:
    """Interleaved committed and aborted transactions, then one left open; returns the
    values a read_committed and a read_uncommitted consumer must see (in order)."""
    await create_topic(client, "txn")
    committed: list[bytes] = []
    everything: list[bytes] = []
    seq = {COMMITTED_PID: 0, ABORTED_PID: 0, OPEN_PID: 0}
    for round_ in range(5):
        for pid in (COMMITTED_PID, ABORTED_PID, COMMITTED_PID):
            start = 100 * round_ + len(everything)
            await produce_txn(client, "txn", txn_batch(start, 2, seq=seq[pid], pid=pid))
            seq[pid] += 2
            values = [f"v{start + i}".encode() for i in range(2)]
            everything += values
            if pid == COMMITTED_PID:
                committed += values
        await write_markers(client, "txn", [0], commit=False, pid=ABORTED_PID)
        await write_markers(client, "txn", [0], commit=True, pid=COMMITTED_PID)
    await produce_txn(client, "txn", txn_batch(9000, 2, seq=0, pid=OPEN_PID))
    everything += [b"v9000", b"v9001"]
    return committed, everything


def drain(poll: Callable[[], list[bytes]], count: int) -> list[bytes]:
    """Values polled until `count` arrived (or 20 polls), plus one more poll to show that
    nothing else comes (the open transaction stays hidden from read_committed)."""
    values: list[bytes] = []
    for _ in range(20):
        values += poll()
        if len(values) >= count:
            break
    return values + poll()


def consume_confluent(port: int, isolation: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": f"g-{isolation}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ConfluentPartition("txn", 0, OFFSET_BEGINNING)])

    def poll() -> list[bytes]:
        messages = consumer.consume(num_messages=100, timeout=0.5)
        assert all(m.error() is None for m in messages), [m.error() for m in messages]
        return [m.value() for m in messages]

    try:
        return drain(poll, count)
    finally:
        consumer.close()


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
async def test_aiokafka_consumer(broker: Broker, client: RawClient, isolation: str) -> None:
    committed, everything = await write_transactions(client)
    expected = committed if isolation == "read_committed" else everything
    consumer = AIOKafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{broker.port}",
        isolation_level=isolation,
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        partition = TopicPartition("txn", 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        got: list[bytes] = []
        for _ in range(20):
            batches = await consumer.getmany(timeout_ms=500)
            got += [m.value for messages in batches.values() for m in messages]
            if len(got) >= len(expected):
                break
        batches = await consumer.getmany(timeout_ms=500)
        got += [m.value for messages in batches.values() for m in messages]
        end = await consumer.end_offsets([partition])
    finally:
        await consumer.stop()
    assert got == expected
    lso = broker.partition("txn", 0).last_stable_offset  # type: ignore[union-attr]
    if isolation == "read_committed":
        assert end[partition] == lso


def consume_kafka_python(port: int, isolation: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}",
        isolation_level=isolation,
        enable_auto_commit=False,
    )
    partition = KafkaPartition("txn", 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)

    def poll() -> list[bytes]:
        polled = consumer.poll(timeout_ms=500)
        return [m.value for messages in polled.values() for m in messages]

    try:
        return drain(poll, count)
    finally:
        consumer.close()


@pytest.mark.parametrize("consume", [consume_confluent, consume_kafka_python])
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
async def test_blocking_client_consumers(
    broker: Broker,
    client: RawClient,
    isolation: str,
    consume: Callable[[int, str, int], list[bytes]],
) -> None:
    committed, everything = await write_transactions(client)
    expected = committed if isolation == "read_committed" else everything
    got = await asyncio.to_thread(consume, broker.port, isolation, len(expected))
    assert got == expected
