"""Client quotas in ZooKeeper at Kafka's paths, with its change notifications, and quotas
written there by Kafka's own tools picked up (issue 13, item 4)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from kazoo.client import KazooClient

from kbroker.broker import Broker
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_client_quotas import _describe, _entry
from wire.api_keys import ApiKey
from wire.messages.alter_client_quotas_request import AlterClientQuotasRequest


async def test_quotas_live_at_kafkas_paths(tmp_path: Path, zookeeper: str) -> None:
    config = broker_config(
        tmp_path / "data", free_port(), zookeeper_connect=zookeeper, broker_id="1"
    )
    broker = Broker(config)
    await broker.start()
    zk = KazooClient(hosts=zookeeper)
    zk.start()
    client = await RawClient.connect(broker.port)
    try:
        request = AlterClientQuotasRequest(
            entries=[
                _entry({"user": "alice", "client-id": None}, producer_byte_rate=1024),
                _entry({"client-id": "a b"}, request_percentage=12.5),
            ]
        )
        await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
        data, _ = zk.get("/config/users/alice/clients/<default>")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1024"}}
        data, _ = zk.get("/config/clients/a%20b")
        assert json.loads(data)["config"] == {"request_percentage": "12.5"}
        changes = sorted(zk.get_children("/config/changes"))
        paths = [json.loads(zk.get(f"/config/changes/{c}")[0])["entity_path"] for c in changes]
        assert paths == ["users/alice/clients/<default>", "clients/a%20b"]
        # What kafka-configs.sh writes is seen by the broker.
        zk.create(
            "/config/users/<default>",
            json.dumps({"version": 1, "config": {"consumer_byte_rate": "2048"}}).encode(),
        )
        deadline = time.monotonic() + 10
        while (("user", None),) not in await _describe(client, 1):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        quotas = await _describe(client, 1)
        assert quotas[(("user", None),)] == {"consumer_byte_rate": 2048.0}
        assert broker.quotas.quota_for("consumer_byte_rate", "bob", "x") == (
            (("user", "bob"),),
            2048.0,
        )
    finally:
        await client.close()
        zk.stop()
        zk.close()
        await broker.stop()
