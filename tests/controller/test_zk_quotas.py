"""Client quotas and SCRAM credentials in ZooKeeper at Kafka's paths, with its change
notifications, as Kafka 3.9 writes them (issue 13, item 4). What Kafka's own tools write is
read in tests/cluster/test_kafka_tools.py."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from controller.interface import Endpoint
from controller.zk_backend import ZkMetadata
from kbroker.broker import Broker
from kbroker.cli import main
from kbroker.config import BrokerConfig
from kbroker.security.scram import credential_to_string, make_credential
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_client_quotas import _entry
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.alter_client_quotas_request import AlterClientQuotasRequest
from wire.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from wire.messages.create_acls_request import AclCreation, CreateAclsRequest


def _changes(zk: KazooClient) -> list[str]:
    """The entity paths of the config change notifications, oldest first."""
    return [
        json.loads(zk.get(f"/config/changes/{c}")[0])["entity_path"]
        for c in sorted(zk.get_children("/config/changes"))
    ]


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
                _entry({"user": None}, controller_mutation_rate=10),
            ]
        )
        await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
        data, _ = zk.get("/config/users/alice/clients/<default>")
        assert data == b'{"version":1,"config":{"producer_byte_rate":"1024"}}'
        data, _ = zk.get("/config/clients/a%20b")
        assert json.loads(data)["config"] == {"request_percentage": "12.5"}
        # A double-valued quota as Kafka writes it, whole or not.
        data, _ = zk.get("/config/users/<default>")
        assert json.loads(data)["config"] == {"controller_mutation_rate": "10.0"}
        assert _changes(zk) == ["users/alice/clients/<default>", "clients/a%20b", "users/<default>"]

        # The last quota of an entity takes its znode, and the parents left empty, along.
        request = AlterClientQuotasRequest(
            entries=[
                _entry({"user": "alice", "client-id": None}, producer_byte_rate=None),
                _entry({"client-id": "a b"}, request_percentage=None),
            ]
        )
        await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
        assert zk.exists("/config/users/alice") is None
        assert zk.exists("/config/clients/a%20b") is None
        assert _changes(zk)[-2:] == ["users/alice/clients/<default>", "clients/a%20b"]
        assert set(broker.metadata.client_quotas()) == {(("user", None),)}
    finally:
        await client.close()
        zk.stop()
        zk.close()
        await broker.stop()


async def test_scram_credentials_share_the_users_znode_with_quotas(
    tmp_path: Path, zookeeper: str
) -> None:
    """A user's SCRAM credentials and quotas live in one znode, as in Kafka: writing one
    keeps the other; the user's znode goes with the last of them."""
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
        request = AlterClientQuotasRequest(
            entries=[_entry({"user": "carol"}, producer_byte_rate=None)]
        )
        await client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
        assert zk.exists("/config/users/carol") is None
        assert _changes(zk) == ["users/carol"] * 4
    finally:
        await client.close()
        zk.stop()
        zk.close()
        await broker.stop()


async def test_names_zookeeper_cannot_store_are_refused(tmp_path: Path, zookeeper: str) -> None:
    """A quota entity or SCRAM user named '.' or '..' and an ACL resource named with '/' or
    '..' have no znode: each is refused on its own with an error, and the connection stays
    up (it used to be closed by the failing handler, or the ACL reported created and lost)."""
    config = broker_config(
        tmp_path / "data",
        free_port(),
        zookeeper_connect=zookeeper,
        broker_id="1",
        authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        super_users="User:ANONYMOUS",
    )
    broker = Broker(config)
    await broker.start()
    client = await RawClient.connect(broker.port)
    try:
        quotas = await client.call(
            ApiKey.ALTER_CLIENT_QUOTAS,
            1,
            AlterClientQuotasRequest(
                entries=[
                    _entry({"user": ".."}, producer_byte_rate=1024),
                    _entry({"user": "ok"}, producer_byte_rate=1024),
                ]
            ),
        )
        assert [e.error_code for e in quotas.entries] == [ErrorCode.INVALID_REQUEST, 0]
        assert "ZooKeeper" in quotas.entries[0].error_message
        upsertion = ScramCredentialUpsertion(
            name=".", mechanism=1, iterations=4096, salt=b"s" * 16, salted_password=b"p" * 32
        )
        scram = await client.call(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            AlterUserScramCredentialsRequest(upsertions=[upsertion]),
        )
        assert [r.error_code for r in scram.results] == [ErrorCode.UNACCEPTABLE_CREDENTIAL]

        def group_acl(name: str) -> AclCreation:
            return AclCreation(
                resource_type=3,
                resource_name=name,
                resource_pattern_type=3,
                principal="User:bob",
                host="*",
                operation=3,
                permission_type=3,
            )

        acls = await client.call(
            ApiKey.CREATE_ACLS,
            3,
            CreateAclsRequest(creations=[group_acl(n) for n in ("a/b", "..", "a b")]),
        )
        assert [r.error_code for r in acls.results] == [
            ErrorCode.INVALID_REQUEST,
            ErrorCode.INVALID_REQUEST,
            0,
        ]
        assert {a.name for a in broker.metadata.acls()} == {"a b"}
        assert set(broker.metadata.client_quotas()) == {(("user", "ok"),)}
    finally:
        await client.close()
        await broker.stop()


def test_kbroker_users_zookeeper_refuses_a_name_without_a_znode(
    zookeeper: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["users", "add", "..", "--password", "x", "--zookeeper", zookeeper])
    assert exited.value.code == 1
    assert "'..' is not a znode name" in capsys.readouterr().err


def _backend(tmp_path: Path, zookeeper: str, clock: Callable[[], float] = time.time) -> ZkMetadata:
    config = BrokerConfig.from_properties(
        {"broker.id": "1", "log.dirs": str(tmp_path / "1"), "zookeeper.connect": zookeeper}
    )
    return ZkMetadata(config, clock=clock)


async def test_config_changes_of_topics_and_brokers_are_announced_and_purged(
    tmp_path: Path, zookeeper: str
) -> None:
    """Changing a topic's or the broker's configs is announced as Kafka's brokers announce
    it (a topic's creation is not), and every broker deletes the notifications 15 minutes
    old, as Kafka's brokers do, so that they do not pile up."""
    zk = KazooClient(hosts=zookeeper)
    zk.start()
    one = _backend(tmp_path, zookeeper)
    await one.start()
    try:
        await one.register([Endpoint("PLAINTEXT", "127.0.0.1", free_port())])
        await one.create_topic("t", 1, 1, configs={"retention.ms": "1000"})
        await one.set_topic_configs("t", {"retention.ms": "2000"})
        await one.set_broker_configs({"log.retention.ms": "60000"})
        assert _changes(zk) == ["topics/t", "brokers/1"]
        assert zk.get("/config/topics/t")[0] == b'{"version":1,"config":{"retention.ms":"2000"}}'
        zk.create("/kafka-acl-changes/acl_changes_", b"TOPIC:t", sequence=True)
    finally:
        await one.stop()
    # A broker whose clock is 16 minutes ahead sees them all expired.
    later = _backend(tmp_path, zookeeper, clock=lambda: time.time() + 16 * 60)
    await later.start()
    try:
        assert zk.get_children("/config/changes") == []
        assert zk.get_children("/kafka-acl-changes") == []
    finally:
        await later.stop()
        zk.stop()
        zk.close()
