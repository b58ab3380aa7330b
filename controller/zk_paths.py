"""ZooKeeper paths and znode payloads, in the layout Kafka's ZooKeeper mode uses.

Pure (no kazoo, no IO): paths are built here and payloads are encoded to and decoded from
UTF-8 JSON bytes here, so the formats are tested without a server.

Znodes (all payloads UTF-8 JSON unless said otherwise):

- ``/cluster/id``: ``{"version": "1", "id": "<cluster id>"}``, created once.
- ``/controller`` (ephemeral): ``{"version": 1, "brokerid": <id>, "timestamp": "<ms>"}``.
- ``/controller_epoch``: the decimal epoch as text; +1 on every controller election. Its znode
  version fences a stale controller: controller writes are transactions that check it.
- ``/brokers/ids/<id>`` (ephemeral): ``{"version": 4, "host": h, "port": p,
  "endpoints": ["INTERNAL://h:p", "EXTERNAL://h2:p2"], "listener_security_protocol_map":
  {"INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"}, "rack": r | null, "jmx_port": -1,
  "timestamp": "<ms>"}``: one endpoint per advertised listener (IPv6 hosts in brackets);
  host and port repeat the inter-broker listener's endpoint.
- ``/brokers/topics/<topic>``: ``{"version": 3, "topic_id": "<Kafka base64 uuid>",
  "partitions": {"0": [1, 2, 3], ...}, "adding_replicas": {"0": [3]},
  "removing_replicas": {"0": [1]}}``; during a reassignment (KIP-455) a partition's list is
  the target replicas followed by the original ones being removed.
- ``/brokers/topics/<topic>/partitions/<n>/state``: ``{"version": 1, "controller_epoch": c,
  "leader": l, "leader_epoch": e, "isr": [...]}``; changed only by conditional writes on
  the znode version (leader: ISR changes; controller: elections, in a transaction with the
  controller epoch check).
- ``/config/topics/<topic>``: ``{"version":1,"config":{"name":"value"}}``, compact as
  Kafka writes it (controller/config_znodes.py: the other entity configs and the change
  notifications).
- ``/config/brokers/<id>``: the same shape, for dynamic broker configs (KIP-226), and
  ``/config/brokers/<default>`` for the cluster-wide ones.
- ``/config/client-metrics/<name>`` and ``/config/groups/<group>``: the same shape, for
  client-metrics subscriptions (KIP-714) and group configs (controller/named_configs.py).
- ``/latest_producer_id_block``: the last producer id block given out
  (controller/producer_id_blocks.py).
- ``/log_dir_event_notification/log_dir_event_<sequence>``: ``{"version":1,"broker":<id>,
  "event":1}``, compact, written by a broker whose log directory failed (event 1: Kafka's
  LogDirFailure, KIP-112); the controller deletes it once it has acted.
- ``/kbroker/offline_replicas/<id>`` (ephemeral, kbroker's own): ``{"version": 1,
  "log_dirs": [...], "partitions": [["topic", 0], ...]}``, the broker's failed log
  directories and the replicas that were in them. Kafka's controller learns these from the
  broker's LeaderAndIsr answers (KAFKA_STORAGE_ERROR); kbroker's brokers get no
  LeaderAndIsr, so the broker says it here, for the session it lives in: a broker that
  restarts starts with every directory it can open online again.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.interface import Endpoint

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
BROKER_CONFIGS = "/config/brokers"
LOG_DIR_EVENTS = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = f"{LOG_DIR_EVENTS}/log_dir_event_"
# Kafka's LogDirEventNotificationHandler event type for a failed directory.
LOG_DIR_FAILURE = 1
OFFLINE_REPLICAS = "/kbroker/offline_replicas"
# Created at start so watches and children listings never hit a missing parent.
PERSISTENT_PATHS = (
    BROKER_IDS,
    TOPICS,
    TOPIC_CONFIGS,
    BROKER_CONFIGS,
    LOG_DIR_EVENTS,
    OFFLINE_REPLICAS,
    "/cluster",
    # Client quotas (controller/quota_store.py).
    "/config/users",
    "/config/clients",
    "/config/ips",
    "/config/changes",
    # Client-metrics subscriptions, group configs and mirror links
    # (controller/named_configs.py).
    "/config/client-metrics",
    "/config/groups",
    "/config/kbroker-mirror-links",
)


# kbroker's own: where a broker serves an HTTP service (the schema registry), an ephemeral
# znode per broker holding its URL; Kafka's tools never look there.
SERVICES = "/kbroker/services"


def service_path(service: str, broker_id: int) -> str:
    return f"{SERVICES}/{service}/{broker_id}"


def offline_replicas_path(broker_id: int) -> str:
    return f"{OFFLINE_REPLICAS}/{broker_id}"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def broker_config_path(broker_id: int) -> str:
    return f"{BROKER_CONFIGS}/{broker_id}"


DEFAULT_BROKER_CONFIG_PATH = f"{BROKER_CONFIGS}/<default>"


def dump_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True).encode("utf-8")


# ZooKeeper refuses these characters in a path (its PathUtils.validatePath), and every
# character outside the Basic Multilingual Plane (a UTF-16 surrogate pair for Java).
_REFUSED_RANGES = ((0x00, 0x1F), (0x7F, 0x9F), (0xD800, 0xF8FF), (0xFFF0, 0x10FFFF))


def znode_name_problem(name: str) -> str | None:
    """Why ZooKeeper cannot take `name` as one component of a path, or None."""
    if name in ("", ".", ".."):
        return f"{name!r} is not a znode name"
    if "/" in name:
        return f"{name!r} contains '/'"
    for index, char in enumerate(name):
        code = ord(char)
        if any(low <= code <= high for low, high in _REFUSED_RANGES):
            return f"{name!r} contains a character ZooKeeper refuses at {index}"
    return None


def kafka_json(obj: Any) -> bytes:
    """JSON as Kafka's ZooKeeper mode writes it: compact, its fields in the order given."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


def kafka_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader and ISR of one partition, as stored in its state znode."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def encode_state(state: PartitionState) -> bytes:
    return dump_json(
        {
            "version": 1,
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_state(data: bytes) -> PartitionState:
    obj = _load(data)
    return PartitionState(
        leader=int(obj["leader"]),
        leader_epoch=int(obj["leader_epoch"]),
        isr=tuple(int(b) for b in obj["isr"]),
        controller_epoch=int(obj["controller_epoch"]),
    )


@dataclass(frozen=True, slots=True)
class Assignment:
    """A topic znode: replicas per partition and the reassignments in progress."""

    topic_id: uuid.UUID
    replicas: list[tuple[int, ...]]
    adding: dict[int, tuple[int, ...]]
    removing: dict[int, tuple[int, ...]]


def encode_assignment(
    topic_id: uuid.UUID,
    replicas: Sequence[Sequence[int]],
    adding: Mapping[int, Sequence[int]] | None = None,
    removing: Mapping[int, Sequence[int]] | None = None,
) -> bytes:
    return dump_json(
        {
            "version": 3,
            "topic_id": kafka_uuid(topic_id),
            "partitions": {str(i): list(r) for i, r in enumerate(replicas)},
            "adding_replicas": {str(p): list(r) for p, r in (adding or {}).items() if r},
            "removing_replicas": {str(p): list(r) for p, r in (removing or {}).items() if r},
        }
    )


def decode_topic(data: bytes) -> Assignment:
    obj = _load(data)

    def lists(key: str) -> dict[int, tuple[int, ...]]:
        return {int(k): tuple(int(b) for b in v) for k, v in (obj.get(key) or {}).items()}

    partitions = lists("partitions")
    return Assignment(
        topic_id=parse_kafka_uuid(obj["topic_id"]),
        replicas=[partitions[i] for i in sorted(partitions)],
        adding=lists("adding_replicas"),
        removing=lists("removing_replicas"),
    )


def decode_assignment(data: bytes) -> tuple[uuid.UUID, list[tuple[int, ...]]]:
    """(topic id, replicas per partition in partition order)."""
    topic = decode_topic(data)
    return topic.topic_id, topic.replicas


LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"


def encode_config(config: Mapping[str, str]) -> bytes:
    return kafka_json({"version": 1, "config": dict(config)})


def decode_config(data: bytes) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in _load(data).get("config", {}).items()}


def _endpoint_url(endpoint: Endpoint) -> str:
    # IPv6 addresses are bracketed, as in a listeners property.
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.listener}://{host}:{endpoint.port}"


_ENDPOINT_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


def _parse_endpoint(url: str) -> Endpoint:
    m = _ENDPOINT_RE.match(url)
    if m is None:
        raise ValueError(f"bad broker endpoint {url!r}")
    return Endpoint(m.group(1), m.group(2).strip("[]"), int(m.group(3)))


def encode_broker(
    host: str,
    port: int,
    rack: str | None,
    timestamp_ms: int,
    endpoints: Sequence[Endpoint] | None = None,
) -> bytes:
    """``host``/``port`` are the inter-broker endpoint; ``endpoints`` every advertised
    listener (only PLAINTEXT ones are supported), by default a PLAINTEXT one at host:port."""
    listed = list(endpoints) if endpoints else [Endpoint("PLAINTEXT", host, port)]
    return dump_json(
        {
            "version": 4,
            "host": host,
            "port": port,
            "endpoints": [_endpoint_url(e) for e in listed],
            "listener_security_protocol_map": {e.listener: "PLAINTEXT" for e in listed},
            "rack": rack,
            "jmx_port": -1,
            "timestamp": str(timestamp_ms),
        }
    )


def decode_broker(data: bytes) -> tuple[str, int, str | None]:
    """(host, port, rack)."""
    obj = _load(data)
    return str(obj["host"]), int(obj["port"]), obj.get("rack")


def decode_broker_endpoints(data: bytes) -> tuple[Endpoint, ...]:
    """The registration's advertised listeners, in order."""
    return tuple(_parse_endpoint(str(url)) for url in _load(data).get("endpoints", ()))


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return dump_json({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    return int(_load(data)["brokerid"])


def encode_cluster_id(cluster_id: str) -> bytes:
    return dump_json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_load(data)["id"])


def encode_log_dir_event(broker_id: int) -> bytes:
    return kafka_json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE})


def decode_log_dir_event(data: bytes) -> tuple[int, int]:
    """(broker id, event type)."""
    obj = _load(data)
    return int(obj["broker"]), int(obj["event"])


@dataclass(frozen=True, slots=True)
class OfflineReplicas:
    """A broker's failed log directories and the replicas that were there."""

    log_dirs: tuple[str, ...]
    partitions: frozenset[tuple[str, int]]


def encode_offline_replicas(offline: OfflineReplicas) -> bytes:
    return dump_json(
        {
            "version": 1,
            "log_dirs": list(offline.log_dirs),
            "partitions": [[t, p] for t, p in sorted(offline.partitions)],
        }
    )


def decode_offline_replicas(data: bytes) -> OfflineReplicas:
    obj = _load(data)
    return OfflineReplicas(
        log_dirs=tuple(str(d) for d in obj["log_dirs"]),
        partitions=frozenset((str(t), int(p)) for t, p in obj["partitions"]),
    )
