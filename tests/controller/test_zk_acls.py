"""ACLs in ZooKeeper at Kafka's paths: written with change notifications and seen by every
broker within a second (issue 12, item 4). ACLs written by Kafka's own tools are read in
tests/cluster/test_kafka_tools.py."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from kazoo.client import KazooClient

from controller.zk_backend import ZkMetadata
from kbroker.config import BrokerConfig
from kbroker.security.acls import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from tests.controller.test_acl_store import READ

WRITE = AclBinding(
    ResourceType.TOPIC, "t", PatternType.LITERAL, "User:bob", "*", AclOperation.WRITE,
    PermissionType.DENY,
)  # fmt: skip
GROUP = AclBinding(
    ResourceType.GROUP, "app-", PatternType.PREFIXED, "User:*", "*", AclOperation.READ,
    PermissionType.ALLOW,
)  # fmt: skip


def _backend(tmp_path: Path, zookeeper: str, broker_id: int) -> ZkMetadata:
    config = BrokerConfig.from_properties(
        {
            "broker.id": str(broker_id),
            "log.dirs": str(tmp_path / str(broker_id)),
            "zookeeper.connect": zookeeper,
        }
    )
    return ZkMetadata(config)


async def _until(check: object, seconds: float = 1.0) -> float:
    """Seconds until `check()` holds; fails past `seconds`."""
    started = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - started < seconds, "not seen in time"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def test_acls_at_kafkas_paths_and_seen_by_other_brokers(
    tmp_path: Path, zookeeper: str
) -> None:
    one = _backend(tmp_path, zookeeper, 1)
    two = _backend(tmp_path, zookeeper, 2)
    await one.start()
    await two.start()
    zk = KazooClient(hosts=zookeeper)
    zk.start()
    try:
        await one.alter_acls([READ, WRITE, GROUP], [])
        assert one.acls() == {READ, WRITE, GROUP}
        await _until(lambda: two.acls() == {READ, WRITE, GROUP})
        data, _ = zk.get("/kafka-acl/Topic/t")
        stored = json.loads(data)
        assert stored["version"] == 1
        assert sorted(stored["acls"], key=lambda a: a["principal"]) == [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "Read",
                "host": "*",
            },
            {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "*"},
        ]
        data, _ = zk.get("/kafka-acl-extended/prefixed/Group/app-")
        assert json.loads(data)["acls"][0]["principal"] == "User:*"
        literal = zk.get_children("/kafka-acl-changes")
        assert [zk.get(f"/kafka-acl-changes/{c}")[0] for c in literal] == [b"TOPIC:t"]
        assert all(c.startswith("acl_changes_") for c in literal)
        (extended,) = zk.get_children("/kafka-acl-extended-changes")
        assert json.loads(zk.get(f"/kafka-acl-extended-changes/{extended}")[0]) == {
            "version": 1,
            "resourceType": "GROUP",
            "name": "app-",
            "patternType": "PREFIXED",
        }

        # Removal through the other broker; the last ACL of a pattern takes its znode.
        await two.alter_acls([], [READ, WRITE])
        assert zk.exists("/kafka-acl/Topic/t") is None
        await _until(lambda: one.acls() == {GROUP})

        # Every resource type's znode is there, as Kafka's AclAuthorizer creates them.
        assert zk.exists("/kafka-acl/DelegationToken") is not None
        assert zk.exists("/kafka-acl-extended/prefixed/User") is not None
    finally:
        zk.stop()
        zk.close()
        await one.stop()
        await two.stop()
