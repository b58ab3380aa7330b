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


async def test_scram_credentials_share_the_users_znode_with_quotas(
    tmp_path: Path, zookeeper: str
) -> None:
    """A user's SCRAM credentials and quotas live in one znode, as in Kafka: writing one
    keeps the other; a credential written by Kafka's tools is read."""
    from kbroker.security.scram import credential_to_string, make_credential

    config = broker_config(
        tmp_path / "data", free_port(), zookeeper_connect=zookeeper, broker_id="1"
    )
    broker = Broker(config)
    await broker.start()
    zk = KazooClient(hosts=zookeeper)
    zk.start()
    client = await RawClient.connect(broker.port)
    try:
        credential = make_credential("SCRAM-SHA-512", "pw")
        await broker.metadata.alter_scram_credentials([("carol", "SCRAM-SHA-512", credential)])
        request = AlterClientQuotasRequest(
            entries=[_entry({"user": "carol"}, producer_byte_rate=1024)]
        )
        await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
        stored = json.loads(zk.get("/config/users/carol")[0])["config"]
        assert stored == {
            "SCRAM-SHA-512": credential_to_string(credential),
            "producer_byte_rate": "1024",
        }
        assert (
            stored["SCRAM-SHA-512"].startswith("salt=")
            and ",iterations=4096" in stored["SCRAM-SHA-512"]
        )
        await broker.metadata.alter_scram_credentials([("carol", "SCRAM-SHA-512", None)])
        assert json.loads(zk.get("/config/users/carol")[0])["config"] == {
            "producer_byte_rate": "1024"
        }
        # As kafka-configs.sh --zookeeper --add-config 'SCRAM-SHA-256=[...]' leaves it.
        other = make_credential("SCRAM-SHA-256", "pw2")
        zk.create(
            "/config/users/erin",
            json.dumps(
                {"version": 1, "config": {"SCRAM-SHA-256": credential_to_string(other)}}
            ).encode(),
        )
        zk.create(
            "/config/changes/config_change_",
            b'{"version":2,"entity_path":"users/erin"}',
            sequence=True,
        )
        deadline = time.monotonic() + 10
        while "erin" not in broker.metadata.scram_credentials():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        assert broker.metadata.scram_credentials()["erin"]["SCRAM-SHA-256"] == other
        assert ("user", "erin") not in {k[0] for k in broker.metadata.client_quotas()}
    finally:
        await client.close()
        zk.stop()
        await broker.stop()
