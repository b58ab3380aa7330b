"""Single-node metadata without ZooKeeper: this broker is the controller and leads everything.

Every partition has replicas = isr = [broker.id] and leader epoch 0. State lives in the first
log dir and survives restarts. Files:

``<first log dir>/__kbroker_metadata.json`` (UTF-8 JSON object)::

    {
      "version": 1,
      "cluster_id": "<22 characters, base64url of 16 random bytes>",
      "topics": [
        {"name": "t", "topic_id": "<uuid, canonical hex form>", "internal": false,
         "configs": {"retention.ms": "1000"},
         "partitions": [{"partition": 0, "leader": 0, "leader_epoch": 0,
                         "replicas": [0], "isr": [0]}]}
      ],
      "broker_configs": {"log.retention.ms": "1000"},
      "default_broker_configs": {"log.cleaner.threads": "2"},
      "client_quotas": [{"entity": [["user", "alice"]],
                         "quotas": {"producer_byte_rate": 1048576.0}}],
      "scram_credentials": {"alice": {"SCRAM-SHA-256": "salt=...,stored_key=...,..."}},
      "acls": [{"resource_type": "Topic", "name": "t", "pattern_type": "Literal",
                "principal": "User:alice", "host": "*", "operation": "Read",
                "permission_type": "Allow"}],
      "client_metrics": {"producers": {"interval.ms": "1000",
                                       "metrics": "org.apache.kafka.producer."}},
      "group_configs": {"orders": {"consumer.session.timeout.ms": "50000"}},
      "mirror_links": {"eu": {"kbroker.mirror.source.bootstrap": "src:9092"}}
    }

``broker_configs`` are this broker's dynamic configs, ``default_broker_configs`` the
cluster-wide ones (KIP-226; absent in older files). ``client_quotas``
(controller/quota_store.py), ``scram_credentials`` (controller/credential_store.py),
``acls`` (controller/acl_store.py), ``client_metrics``, ``group_configs`` and
``mirror_links`` (controller/named_configs.py) may be absent in older files.

It is replaced whole on every change: written to ``__kbroker_metadata.json.tmp``, fsynced,
renamed over the old file, then the directory is fsynced (DESIGN rule 6), so a crash leaves
either the old or the new state.

``<first log dir>/producer-id-block``: the producer id blocks given out
(controller/producer_id_blocks.py).

``<every log dir>/meta.properties``: Kafka's file, in Java properties syntax, version 0 (the
ZooKeeper-mode layout): ``version=0``, ``broker.id=<id>``, ``cluster.id=<id>``. Written once,
when missing; a stored broker.id that differs from the configured one stops start-up, as in
Kafka.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller import acl_store, credential_store, named_configs, quota_store
from controller.credential_store import CredentialTable, ScramChange
from controller.interface import (
    BrokerInfo,
    Endpoint,
    PartitionInfo,
    TopicInfo,
)
from controller.producer_id_blocks import FileBlockStore, ProducerIdBlock
from controller.quota_store import QuotaChange
from controller.topic_cache import TopicCache
from controller.topic_plans import plan_partitions, plan_topic
from kbroker.config import (
    BrokerConfig,
    ConfigError,
    parse_properties,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from kbroker.quotas import QuotaEntity
from kbroker.security.acls import AclBinding
from kbroker.security.scram import ScramCredential

log = logging.getLogger(__name__)

METADATA_FILE = "__kbroker_metadata.json"
META_PROPERTIES = "meta.properties"
FORMAT_VERSION = 1


class MetadataStoreError(Exception):
    """The stored metadata cannot be read; start-up stops rather than lose topics."""


def random_kafka_uuid() -> uuid.UUID:
    """A random (version 4, never zero) UUID whose base64 form does not start with '-', which
    Kafka avoids so ids can be passed on command lines."""
    while True:
        value = uuid.uuid4()
        if not kafka_uuid_string(value).startswith("-"):
            return value


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's textual form of a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _topic_to_json(topic: TopicInfo) -> dict[str, Any]:
    return {
        "name": topic.name,
        "topic_id": str(topic.topic_id),
        "internal": topic.internal,
        "configs": dict(topic.configs),
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            for p in topic.partitions
        ],
    }


def _topic_from_json(obj: dict[str, Any]) -> TopicInfo:
    return TopicInfo(
        name=obj["name"],
        topic_id=uuid.UUID(obj["topic_id"]),
        internal=bool(obj["internal"]),
        configs={str(k): str(v) for k, v in obj["configs"].items()},
        partitions=tuple(
            PartitionInfo(
                partition=int(p["partition"]),
                leader=int(p["leader"]),
                leader_epoch=int(p["leader_epoch"]),
                replicas=tuple(int(r) for r in p["replicas"]),
                isr=tuple(int(r) for r in p["isr"]),
            )
            for p in obj["partitions"]
        ),
    )


class EmbeddedMetadata(TopicCache):
    """The single-node ``MetadataBackend``."""

    def __init__(self, config: BrokerConfig) -> None:
        super().__init__()
        self._config = config
        self._dir = config.log_dirs[0]
        self._cluster_id = ""
        self._broker_configs: dict[str, str] = {}
        self._default_broker_configs: dict[str, str] = {}
        self._client_quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._scram: dict[str, dict[str, ScramCredential]] = {}
        self._acls: frozenset[AclBinding] = frozenset()
        # Named configs by kind (client-metrics subscriptions, group configs).
        self._named: dict[named_configs.NamedConfigKind, dict[str, dict[str, str]]] = {
            kind: {} for kind in named_configs.KINDS
        }
        # HTTP services this broker serves (the schema registry), by name.
        self._service_urls: dict[str, str] = {}
        self._lock = asyncio.Lock()
        self._me = self._own_info()
        self._producer_id_blocks = FileBlockStore(self._dir)

    # --- reads ---------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def controller_id(self) -> int:
        return self._config.broker_id

    def brokers(self) -> list[BrokerInfo]:
        return [self._me]

    def _own_info(self) -> BrokerInfo:
        advertised = self._config.advertised_listeners
        inter = next(
            (a for a in advertised if a.name == self._config.inter_broker_listener_name),
            advertised[0],
        )
        # One advertised listener is the broker's only address: no endpoint list needed.
        endpoints = (
            tuple(Endpoint(a.name, a.host, a.port) for a in advertised)
            if len(advertised) > 1
            else ()
        )
        return BrokerInfo(
            self._config.broker_id, inter.host, inter.port, self._config.broker_rack, endpoints
        )

    def broker_configs(self) -> dict[str, str]:
        return dict(self._broker_configs)

    def default_broker_configs(self) -> dict[str, str]:
        return dict(self._default_broker_configs)

    def client_quotas(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return self._client_quotas

    def scram_credentials(self) -> CredentialTable:
        return self._scram

    def acls(self) -> frozenset[AclBinding]:
        return self._acls

    def client_metrics(self) -> Mapping[str, Mapping[str, str]]:
        return self._named[named_configs.CLIENT_METRICS]

    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._named[named_configs.GROUPS]

    def mirror_links(self) -> Mapping[str, Mapping[str, str]]:
        return self._named[named_configs.MIRROR_LINKS]

    async def publish_service_url(self, service: str, url: str) -> None:
        self._service_urls[service] = url

    async def service_url(self, service: str, broker_id: int) -> str | None:
        return self._service_urls.get(service) if broker_id == self._config.broker_id else None

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self._load)
        log.info(
            "embedded metadata: cluster id %s, %d topics, in %s",
            self._cluster_id,
            len(self._topics),
            self._dir,
        )

    async def stop(self) -> None:
        """Nothing to flush: every change is persisted before it is acknowledged."""

    def _load(self) -> None:
        for d in self._config.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        stored_ids = self._read_meta_properties()
        path = self._dir / METADATA_FILE
        state: dict[str, Any] | None = None
        if path.exists():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
                topics = [_topic_from_json(t) for t in state["topics"]]
                broker_configs = {str(k): str(v) for k, v in state["broker_configs"].items()}
                default_configs = {
                    str(k): str(v) for k, v in state.get("default_broker_configs", {}).items()
                }
                cluster_id = str(state["cluster_id"])
                # Absent in files written before client quotas existed.
                client_quotas = quota_store.from_json(state.get("client_quotas", []))
                scram = credential_store.from_json(state.get("scram_credentials", {}))
                acls = acl_store.from_json(state.get("acls", []))
                named = {
                    kind: named_configs.from_json(state.get(kind.state_key, {}))
                    for kind in named_configs.KINDS
                }
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise MetadataStoreError(f"cannot read {path}: {e}") from e
            self._publish_topics({t.name: t for t in topics})
            self._broker_configs = broker_configs
            self._default_broker_configs = default_configs
            self._client_quotas = client_quotas
            self._scram = scram
            self._acls = acls
            self._named = named
            stored_ids.add(cluster_id)
        if len(stored_ids) > 1:
            raise MetadataStoreError(
                f"log dirs belong to different clusters: {', '.join(sorted(stored_ids))}"
            )
        self._cluster_id = (
            stored_ids.pop() if stored_ids else kafka_uuid_string(random_kafka_uuid())
        )
        if state is None:
            self._persist(self._topics, self._broker_configs)
        self._write_meta_properties()

    def _read_meta_properties(self) -> set[str]:
        cluster_ids: set[str] = set()
        for d in self._config.log_dirs:
            path = d / META_PROPERTIES
            if not path.exists():
                continue
            props = parse_properties(path.read_text(encoding="utf-8"))
            stored = props.get("broker.id")
            if stored is not None and stored.strip() != str(self._config.broker_id):
                raise ConfigError(
                    f"Configured broker.id {self._config.broker_id} doesn't match stored "
                    f"broker.id {stored.strip()} in {path}"
                )
            if props.get("cluster.id"):
                cluster_ids.add(props["cluster.id"].strip())
        return cluster_ids

    def _write_meta_properties(self) -> None:
        text = (
            "# written by kbroker\n"
            "version=0\n"
            f"broker.id={self._config.broker_id}\n"
            f"cluster.id={self._cluster_id}\n"
        )
        for d in self._config.log_dirs:
            path = d / META_PROPERTIES
            if not path.exists():
                atomic_write(path, text.encode("ascii"))

    def _persist(
        self,
        topics: Mapping[str, TopicInfo],
        broker_configs: Mapping[str, str],
        client_quotas: Mapping[QuotaEntity, Mapping[str, float]] | None = None,
        scram: CredentialTable | None = None,
        acls: frozenset[AclBinding] | None = None,
        named: Mapping[named_configs.NamedConfigKind, named_configs.Table] | None = None,
        default_broker_configs: Mapping[str, str] | None = None,
    ) -> None:
        state: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "cluster_id": self._cluster_id,
            "topics": [_topic_to_json(t) for t in topics.values()],
            "broker_configs": dict(broker_configs),
            "default_broker_configs": dict(
                self._default_broker_configs
                if default_broker_configs is None
                else default_broker_configs
            ),
            "client_quotas": quota_store.to_json(
                self._client_quotas if client_quotas is None else client_quotas
            ),
            "scram_credentials": credential_store.to_json(self._scram if scram is None else scram),
            "acls": acl_store.to_json(self._acls if acls is None else acls),
        }
        for kind, table in (self._named if named is None else named).items():
            state[kind.state_key] = named_configs.to_json(table)
        data = json.dumps(state, indent=1, sort_keys=True).encode("utf-8")
        atomic_write(self._dir / METADATA_FILE, data)

    async def _commit(
        self,
        topics: dict[str, TopicInfo],
        changed: Sequence[tuple[TopicInfo | None, str]],
        broker_configs: dict[str, str] | None = None,
    ) -> None:
        """Persist first, then publish the new state, then tell the listeners."""
        configs = self._broker_configs if broker_configs is None else broker_configs
        await asyncio.to_thread(self._persist, topics, configs)
        self._broker_configs = configs
        self._publish_topics(topics, changed)

    def _racks(self) -> dict[int, str | None]:
        """The only broker, with its rack."""
        return {self._config.broker_id: self._config.broker_rack}

    # --- changes -------------------------------------------------------------------------

    async def alter_client_quotas(self, changes: Sequence[QuotaChange]) -> None:
        async with self._lock:
            table = quota_store.apply_changes(self._client_quotas, changes)
            await asyncio.to_thread(self._persist, self._topics, self._broker_configs, table)
            self._client_quotas = table

    async def alter_scram_credentials(self, changes: Sequence[ScramChange]) -> None:
        async with self._lock:
            table = credential_store.apply_changes(self._scram, changes)
            await asyncio.to_thread(self._persist, self._topics, self._broker_configs, scram=table)
            self._scram = table

    async def alter_acls(self, add: Sequence[AclBinding], remove: Sequence[AclBinding]) -> None:
        async with self._lock:
            acls = acl_store.apply_changes(self._acls, add, remove)
            if acls == self._acls:
                return
            await asyncio.to_thread(self._persist, self._topics, self._broker_configs, acls=acls)
            self._acls = acls

    async def set_client_metrics(self, name: str, configs: Mapping[str, str]) -> None:
        await self._set_named(named_configs.CLIENT_METRICS, name, configs)

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        await self._set_named(named_configs.GROUPS, group_id, configs)

    async def set_mirror_link(self, name: str, configs: Mapping[str, str]) -> None:
        await self._set_named(named_configs.MIRROR_LINKS, name, configs)

    async def _set_named(
        self, kind: named_configs.NamedConfigKind, name: str, configs: Mapping[str, str]
    ) -> None:
        async with self._lock:
            table = named_configs.with_change(self._named[kind], name, configs)
            if table == self._named[kind]:
                return
            named = {**self._named, kind: table}
            await asyncio.to_thread(self._persist, self._topics, self._broker_configs, named=named)
            self._named = named

    # The state file stores any name.
    def quota_entity_refusal(self, key: QuotaEntity) -> str | None:
        return None

    def scram_user_refusal(self, user: str) -> str | None:
        return None

    def acl_refusal(self, acl: AclBinding) -> str | None:
        return None

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        async with self._lock:
            topic = plan_topic(
                self._config,
                name,
                num_partitions,
                replication_factor,
                assignments=assignments,
                configs=configs,
                existing=self._topics,
                racks=self._racks(),
                topic_id=random_kafka_uuid(),
            )
            if not validate_only:
                topics = dict(self._topics)
                topics[name] = topic
                await self._commit(topics, [(topic, name)])
            return topic

    async def delete_topic(self, name: str) -> None:
        async with self._lock:
            self._existing(name)
            topics = dict(self._topics)
            del topics[name]
            await self._commit(topics, [(None, name)])

    async def create_partitions(
        self,
        name: str,
        total: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        async with self._lock:
            grown = plan_partitions(
                self._existing(name), total, assignments=assignments, racks=self._racks()
            )
            if not validate_only:
                topics = dict(self._topics)
                topics[name] = grown
                await self._commit(topics, [(grown, name)])
            return grown

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        async with self._lock:
            topic = self._existing(name)
            validate_topic_configs(configs)
            changed = TopicInfo(
                name=topic.name,
                topic_id=topic.topic_id,
                partitions=topic.partitions,
                configs=dict(configs),
                internal=topic.internal,
            )
            topics = dict(self._topics)
            topics[name] = changed
            await self._commit(topics, [(changed, name)])
            return changed

    async def raise_leader_epoch(
        self, topic: str, partition: int, leader_epoch: int, above: int
    ) -> int | None:
        async with self._lock:
            info = self._topics.get(topic)
            if info is None or partition >= len(info.partitions):
                return None
            current = info.partitions[partition]
            if current.leader != self._config.broker_id or current.leader_epoch != leader_epoch:
                return None
            epoch = max(leader_epoch, above) + 1
            partitions = list(info.partitions)
            partitions[partition] = replace(current, leader_epoch=epoch)
            changed = replace(info, partitions=tuple(partitions))
            topics = dict(self._topics)
            topics[topic] = changed
            await self._commit(topics, [(changed, topic)])
            return epoch

    async def allocate_producer_ids(self) -> ProducerIdBlock:
        async with self._lock:
            return await asyncio.to_thread(self._producer_id_blocks.reserve, self._config.broker_id)

    async def set_broker_configs(self, configs: Mapping[str, str]) -> None:
        """Replace the dynamic broker configs; every topic is reported changed, since their
        effective configs may depend on the broker defaults."""
        async with self._lock:
            validate_dynamic_broker_configs(configs)
            await self._commit(
                dict(self._topics),
                [(t, t.name) for t in self._topics.values()],
                broker_configs=dict(configs),
            )
        self._publish_broker_configs()

    async def set_default_broker_configs(self, configs: Mapping[str, str]) -> None:
        """The cluster-wide defaults; with one broker they apply to it like its own configs
        (which win over them)."""
        async with self._lock:
            validate_dynamic_broker_configs(configs, per_broker=False)
            await asyncio.to_thread(
                self._persist,
                self._topics,
                self._broker_configs,
                default_broker_configs=configs,
            )
            self._default_broker_configs = dict(configs)
            self._publish_topics(self._topics, [(t, t.name) for t in self._topics.values()])
        self._publish_broker_configs()
