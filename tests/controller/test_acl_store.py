"""ACL storage (controller/acl_store.py): Kafka's znode paths and JSON, the embedded file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from controller import acl_store
from controller.embedded import METADATA_FILE
from kbroker.security.acls import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from tests.controller.test_embedded_metadata import make_config, started

READ = AclBinding(
    ResourceType.TOPIC,
    "t",
    PatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    PermissionType.ALLOW,
)
PREFIXED = AclBinding(
    ResourceType.TRANSACTIONAL_ID,
    "app-",
    PatternType.PREFIXED,
    "User:*",
    "10.0.0.1",
    AclOperation.DESCRIBE_CONFIGS,
    PermissionType.DENY,
)


def test_paths_are_kafkas() -> None:
    assert acl_store.resource_path(acl_store.pattern_of(READ)) == "/kafka-acl/Topic/t"
    assert (
        acl_store.resource_path(acl_store.pattern_of(PREFIXED))
        == "/kafka-acl-extended/prefixed/TransactionalId/app-"
    )


def test_znode_json_round_trips_in_kafkas_format() -> None:
    data = acl_store.encode_acls([PREFIXED])
    # Byte for byte what Kafka 3.9's kafka-acls.sh writes (tests/cluster/test_kafka_tools.py).
    assert data == (
        b'{"acls":[{"principal":"User:*","permissionType":"Deny","host":"10.0.0.1",'
        b'"operation":"DescribeConfigs"}],"version":1}'
    )
    assert acl_store.decode_acls(data, acl_store.pattern_of(PREFIXED)) == {PREFIXED}
    # Upper-case names (older tools) are read too; an unknown operation is left out.
    written = {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "ALLOW",
                "operation": "READ",
                "host": "*",
            },
            {"principal": "User:bob", "permissionType": "Allow", "operation": "Fly", "host": "*"},
        ],
    }
    decoded = acl_store.decode_acls(json.dumps(written).encode(), acl_store.pattern_of(READ))
    assert decoded == {READ}


def test_change_notifications() -> None:
    assert acl_store.change_notification(acl_store.pattern_of(READ)) == (
        "/kafka-acl-changes/acl_changes_",
        b"TOPIC:t",
    )
    path, data = acl_store.change_notification(acl_store.pattern_of(PREFIXED))
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert data == (
        b'{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"app-","patternType":"PREFIXED"}'
    )


def test_names_zookeeper_cannot_store_are_refused() -> None:
    """Kafka's AclAuthorizer refuses a name with '/' and ZooKeeper refuses relative or
    control-character names; anything else, wildcards and spaces included, is a znode."""
    for name in ("a/b", "..", ".", "x\x01y", "x\U0001f600"):
        problem = acl_store.zookeeper_problem(dataclasses.replace(READ, name=name))
        assert problem is not None and problem.startswith("Invalid resource name for ZooKeeper")
    for name in ("*", "a b", "g%20h", "caf\u00e9", "...", ".a"):
        assert acl_store.zookeeper_problem(dataclasses.replace(READ, name=name)) is None


def test_every_resource_type_has_its_znode_under_both_roots() -> None:
    types = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
    assert set(acl_store.PATHS) == {
        *(f"/kafka-acl/{t}" for t in types),
        *(f"/kafka-acl-extended/prefixed/{t}" for t in types),
        "/kafka-acl-changes",
        "/kafka-acl-extended-changes",
    }


async def test_embedded_acls_survive_a_restart(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    md = await started(config)
    assert md.acls() == frozenset()
    await md.alter_acls([READ, PREFIXED], [])
    before = md.acls()
    await md.alter_acls([READ], [])
    assert md.acls() is before
    assert md.acls() == {READ, PREFIXED}
    again = await started(config)
    assert again.acls() == {READ, PREFIXED}
    await again.alter_acls([], [READ])
    stored = json.loads((tmp_path / "a" / METADATA_FILE).read_text())
    assert stored["acls"] == acl_store.to_json([PREFIXED])
    assert (await started(config)).acls() == {PREFIXED}


async def test_embedded_files_without_acls_load(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    await started(config)
    path = tmp_path / "a" / METADATA_FILE
    state = json.loads(path.read_text())
    del state["acls"]
    path.write_text(json.dumps(state))
    assert (await started(config)).acls() == frozenset()
