"""Broker registrations the ZooKeeper backend cannot read are skipped, not fatal."""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient

from kbroker.broker import Broker
from tests.server.conftest import broker_config, free_port


async def test_an_unreadable_registration_is_ignored(tmp_path: Path, zookeeper: str) -> None:
    other = KazooClient(hosts=zookeeper)
    other.start(timeout=30)
    try:
        other.create("/brokers/ids/7", b'{"version": 5}', makepath=True)
        other.create("/brokers/ids/8", b"not json", makepath=True)
        broker = Broker(
            broker_config(
                tmp_path / "data",
                free_port(),
                zookeeper_connect=zookeeper,
                broker_id="1",
                offsets_topic_replication_factor="1",
            )
        )
        await broker.start()
        try:
            assert broker.zk is not None
            assert [b.broker_id for b in broker.zk.brokers()] == [1]
        finally:
            await broker.stop()
    finally:
        other.stop()
