"""Entity config znodes and change notifications as Kafka 3.9's ZooKeeper mode keeps them
(its AdminZkClient), checked against what kafka-configs.sh writes
(tests/cluster/test_kafka_tools.py). Pure: controller/zk_backend.py does the IO.

- ``/config/<entity path>`` holds ``{"version":1,"config":{"name":"value"}}``
  (controller/zk_paths.py encodes it); the entity path is ``users/<user>``,
  ``clients/<client id>``, ``users/<user>/clients/<client id>``, ``ips/<ip>``, ``topics/<topic>`` or
  ``brokers/<id>``, names sanitized as controller/quota_store.py does.
- each change is followed by a sequential ``/config/changes/config_change_<seq>`` znode
  ``{"version":2,"entity_path":"users/alice"}``, which Kafka's brokers watch.
- a quota entity (users, clients, ips) or a client-metrics subscription left without config
  and without children loses its znode. So do the parents that held only it:
  ``users/<user>/clients`` when that client id was its only child, and then
  ``users/<user>`` too when it has no config of its own and no other child.
- change notifications, these and the ACL ones (controller/acl_store.py), are deleted 15
  minutes after their creation by every broker, as Kafka's brokers purge them
  (ZkNodeChangeNotificationListener), so that the sequence nodes do not pile up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from controller import acl_store
from controller.zk_paths import kafka_json

CONFIG_ROOT = "/config"
CHANGES = "/config/changes"
CHANGE_PREFIX = f"{CHANGES}/config_change_"
CHANGE_VERSION = 2
QUOTA_ROOTS = frozenset({"users", "clients", "ips"})
# Entities whose znode goes once their config is empty: quotas as in Kafka's ZooKeeper mode,
# and client-metrics subscriptions (kbroker's own in ZooKeeper mode: a subscription without
# config is none, as KRaft deletes the resource).
EMPTIED_ROOTS = QUOTA_ROOTS | {"client-metrics"}
NOTIFICATION_ROOTS = (CHANGES, acl_store.LITERAL_CHANGES, acl_store.EXTENDED_CHANGES)
NOTIFICATION_LIFETIME_MS = 15 * 60 * 1000


def config_path(entity_path: str) -> str:
    return f"{CONFIG_ROOT}/{entity_path}"


def encode_change(entity_path: str) -> bytes:
    return kafka_json({"version": CHANGE_VERSION, "entity_path": entity_path})


def node_to_delete(
    entity_path: str,
    children: Callable[[str], Sequence[str]],
    config: Callable[[str], Mapping[str, str]],
) -> str | None:
    """The znode to delete (with what is below it) now that the entity at `entity_path`
    has no config left; None when its znode stays, holding an empty config.

    `children` lists a znode's children (none for a missing znode), `config` reads one's
    config."""
    root = entity_path.split("/", 1)[0]
    path = config_path(entity_path)
    if root not in EMPTIED_ROOTS or children(path):
        return None
    parts = entity_path.split("/")
    if len(parts) != 4:
        return path
    # users/<user>/clients/<client id>
    clients = config_path("/".join(parts[:3]))
    if list(children(clients)) != [parts[3]]:
        return path
    user = config_path("/".join(parts[:2]))
    if not config(user) and list(children(user)) == ["clients"]:
        return user
    return clients


def expired(created_ms: int, now_ms: float) -> bool:
    """Whether a change notification created at `created_ms` (its znode's ctime) is due
    for deletion."""
    return now_ms - created_ms > NOTIFICATION_LIFETIME_MS
