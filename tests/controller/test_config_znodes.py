"""Entity config znodes as Kafka 3.9 writes them (controller/config_znodes.py): the bytes,
which znode an emptied quota entity takes with it, when notifications expire, and quota
values in Kafka's number formats."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from controller import config_znodes, quota_store, zk_paths


def test_config_and_change_bytes_are_kafkas() -> None:
    # As kafka-configs.sh and Kafka's brokers write them (tests/cluster/test_kafka_tools.py).
    assert zk_paths.encode_config({"producer_byte_rate": "1024"}) == (
        b'{"version":1,"config":{"producer_byte_rate":"1024"}}'
    )
    assert config_znodes.encode_change("users/alice/clients/<default>") == (
        b'{"version":2,"entity_path":"users/alice/clients/<default>"}'
    )
    assert config_znodes.config_path("ips/<default>") == "/config/ips/<default>"


def _tree(
    children: Mapping[str, Sequence[str]], configs: Mapping[str, Mapping[str, str]]
) -> tuple[Callable[[str], Sequence[str]], Callable[[str], Mapping[str, str]]]:
    """Reads of a ZooKeeper tree given as dicts (a missing znode has no children)."""
    return (lambda path: children.get(path, ())), (lambda path: configs.get(path, {}))


@pytest.mark.parametrize(
    ("entity", "children", "configs", "doomed"),
    [
        # A quota entity without children goes; one with children stays, emptied.
        ("users/alice", {}, {}, "/config/users/alice"),
        ("users/alice", {"/config/users/alice": ["clients"]}, {}, None),
        ("clients/app", {}, {}, "/config/clients/app"),
        ("ips/<default>", {}, {}, "/config/ips/<default>"),
        # Topics and brokers keep their znodes.
        ("topics/t", {}, {}, None),
        ("brokers/1", {}, {}, None),
        # A user's only client id takes the user's "clients" with it, and the user too
        # when the user has no config of its own and no other child.
        (
            "users/alice/clients/app",
            {"/config/users/alice": ["clients"], "/config/users/alice/clients": ["app"]},
            {},
            "/config/users/alice",
        ),
        (
            "users/alice/clients/app",
            {"/config/users/alice": ["clients"], "/config/users/alice/clients": ["app"]},
            {"/config/users/alice": {"SCRAM-SHA-256": "salt=..."}},
            "/config/users/alice/clients",
        ),
        (
            "users/alice/clients/app",
            {"/config/users/alice": ["clients"], "/config/users/alice/clients": ["app", "b"]},
            {},
            "/config/users/alice/clients/app",
        ),
    ],
)
def test_an_emptied_quota_entity_takes_its_emptied_parents(
    entity: str,
    children: Mapping[str, Sequence[str]],
    configs: Mapping[str, Mapping[str, str]],
    doomed: str | None,
) -> None:
    assert config_znodes.node_to_delete(entity, *_tree(children, configs)) == doomed


def test_notifications_expire_after_fifteen_minutes() -> None:
    created = 1_000_000
    assert not config_znodes.expired(created, created + 15 * 60 * 1000)
    assert config_znodes.expired(created, created + 15 * 60 * 1000 + 1)


def test_quota_values_in_kafkas_formats() -> None:
    """Byte rates and connection rates are whole numbers (Kafka's LONG and INT configs),
    the others doubles as Java prints them."""
    assert quota_store.encode_quota("producer_byte_rate", 1024.0) == "1024"
    assert quota_store.encode_quota("connection_creation_rate", 3.0) == "3"
    assert quota_store.encode_quota("request_percentage", 50.0) == "50.0"
    assert quota_store.encode_quota("request_percentage", 12.5) == "12.5"
    assert quota_store.encode_quota("controller_mutation_rate", 1e7) == "1.0E7"
    assert quota_store.encode_quota("controller_mutation_rate", 12345678.5) == "1.23456785E7"
    assert quota_store.encode_quota("controller_mutation_rate", 0.00015) == "1.5E-4"
    assert quota_store.encode_quota("controller_mutation_rate", 0.001) == "0.001"
    assert quota_store.decode_quotas({"controller_mutation_rate": "1.0E7"}) == {
        "controller_mutation_rate": 1e7
    }


def test_entity_names_zookeeper_cannot_store() -> None:
    assert quota_store.zookeeper_problem((("user", ".."),)) is not None
    assert quota_store.zookeeper_problem((("client-id", "."), ("user", "a"))) is not None
    # Sanitized names are safe: '/' and control characters are URL-encoded.
    assert quota_store.zookeeper_problem((("client-id", "a/b\x01"), ("user", None))) is None
