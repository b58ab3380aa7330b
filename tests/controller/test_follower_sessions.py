"""Followers fetch in an incremental fetch session (KIP-227): two in-process brokers with a
real ZooKeeper, a replicated partition, and the leader's session cache looked at."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kbroker.broker import Broker
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_data_path import produce, records
from wire.api_keys import ApiKey
from wire.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from wire.records.record import build_batch


async def wait_for(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_followers_fetch_in_a_session(tmp_path: Path, zookeeper: str) -> None:
    brokers = [
        Broker(
            broker_config(
                tmp_path / f"b{i}",
                free_port(),
                zookeeper_connect=zookeeper,
                broker_id=str(i),
                replica_fetch_wait_max_ms="100",
                offsets_topic_replication_factor="1",
            )
        )
        for i in (1, 2)
    ]
    for broker in brokers:
        await broker.start()
    client = await RawClient.connect(brokers[0].port)
    try:
        topic = CreatableTopic(name="r", num_partitions=1, replication_factor=2)
        await client.call(
            ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics=[topic], timeout_ms=10000)
        )
        await wait_for(lambda: any(b.partition("r", 0) is not None for b in brokers))
        leader = next(b for b in brokers if b.partition("r", 0) is not None)
        follower = next(b for b in brokers if b is not leader)
        if leader is not brokers[0]:
            await client.close()
            client = await RawClient.connect(leader.port)
        await produce(client, "r", build_batch(records(0, 5)))
        replica = follower.partitions[("r", 0)]
        await wait_for(lambda: replica.log.log_end_offset == 5)
        sessions = list(leader.fetch_sessions.sessions.values())
        assert len(sessions) == 1 and sessions[0].privileged
        # Incremental fetches followed the first full one.
        await wait_for(lambda: sessions[0].next_epoch > 3)
        await produce(client, "r", build_batch(records(5, 3)))
        await wait_for(lambda: replica.log.log_end_offset == 8)
    finally:
        await client.close()
        for broker in brokers:
            await broker.stop()
