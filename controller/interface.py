"""The cluster-metadata interface every backend implements (DESIGN rule 7).

Handlers and the broker only talk to a ``MetadataBackend``; whether it is the embedded
single-node backend or the ZooKeeper one is invisible to them. Failures are raised as
``KafkaError`` with the protocol's error codes (INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG,
INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION, ...).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from controller.credential_store import CredentialTable, ScramChange
    from controller.producer_id_blocks import ProducerIdBlock
    from controller.quota_store import QuotaChange
    from kbroker.quotas import QuotaEntity
    from kbroker.security.acls import AclBinding

# Kafka's internal topics (Topic.INTERNAL_TOPICS), and kbroker's __audit (kbroker/audit/):
# internal, so that listings of "all topics" (a mirror's --topic-regex among them) leave it out.
INTERNAL_TOPICS = frozenset(
    {"__consumer_offsets", "__transaction_state", "__share_group_state", "__audit"}
)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One advertised listener of a broker: clients connecting through the listener named
    ``listener`` are told to use ``host:port``."""

    listener: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker. ``host``/``port`` are its inter-broker endpoint (what replication uses);
    ``endpoints`` lists every advertised listener (empty when only one address is known)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()

    def through(self, listener: str | None) -> BrokerInfo | None:
        """This broker as a client connected through ``listener`` must see it: host and port
        of the endpoint with that listener name. None (no listener known) or no endpoint list
        keeps the broker as it is; a broker that does not advertise the listener is not
        reachable through it and gives None, as Kafka leaves such brokers out of its answers."""
        if listener is None or not self.endpoints:
            return self
        for endpoint in self.endpoints:
            if endpoint.listener == listener:
                return replace(self, host=endpoint.host, port=endpoint.port)
        return None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionInfo, ...]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


# Called after a topic is created, changed or deleted: (the topic, or None once deleted; name).
TopicListener = Callable[[TopicInfo | None, str], None]


class MetadataBackend(Protocol):
    """Cluster metadata: brokers, topics and their partitions, topic and broker configs."""

    @property
    def cluster_id(self) -> str: ...

    def controller_id(self) -> int: ...

    def brokers(self) -> list[BrokerInfo]: ...

    def topics(self) -> dict[str, TopicInfo]: ...

    def topic(self, name: str) -> TopicInfo | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

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
        """Create a topic. -1 partitions / replication factor mean the broker defaults;
        ``assignments`` (partition -> replica broker ids) excludes both. With ``validate_only``
        nothing changes and the returned TopicInfo is what would have been created."""
        ...

    async def delete_topic(self, name: str) -> None: ...

    async def create_partitions(
        self,
        name: str,
        total: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Grow ``name`` to ``total`` partitions; ``assignments`` lists the new partitions'
        replicas in order."""
        ...

    async def raise_leader_epoch(
        self, topic: str, partition: int, leader_epoch: int, above: int
    ) -> int | None:
        """This broker leads the partition at ``leader_epoch``: lead it on (same replicas and
        ISR) at a new epoch above both ``leader_epoch`` and ``above``, written conditionally
        as an ISR change is; returns the new epoch, None when this broker no longer leads at
        ``leader_epoch`` (a promoted mirror's partition, kbroker/mirror/manager.py)."""
        ...

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """Replace the topic's config overrides."""
        ...

    def broker_configs(self) -> dict[str, str]:
        """This broker's dynamic config overrides (KIP-226 DYNAMIC_BROKER_CONFIG)."""
        ...

    def default_broker_configs(self) -> dict[str, str]:
        """The cluster-wide dynamic broker configs (KIP-226 DYNAMIC_DEFAULT_BROKER_CONFIG)."""
        ...

    async def set_broker_configs(self, configs: Mapping[str, str]) -> None:
        """Replace this broker's dynamic config overrides."""
        ...

    async def set_default_broker_configs(self, configs: Mapping[str, str]) -> None:
        """Replace the cluster-wide dynamic broker configs."""
        ...

    def add_broker_config_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after the dynamic broker configs (this broker's or the cluster
        defaults) changed, whoever changed them."""
        ...

    async def allocate_producer_ids(self) -> ProducerIdBlock:
        """A block of producer ids no broker of the cluster was given before, recorded
        durably before return (controller/producer_id_blocks.py)."""
        ...

    def client_quotas(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        """Client quotas by entity (controller/quota_store.py); read-only, and the same
        object until the quotas change."""
        ...

    async def alter_client_quotas(self, changes: Sequence[QuotaChange]) -> None:
        """Apply quota changes (a None value removes the key), persisted before return."""
        ...

    def quota_entity_refusal(self, key: QuotaEntity) -> str | None:
        """Why this backend cannot store the entity (its names), or None."""
        ...

    def scram_credentials(self) -> CredentialTable:
        """SCRAM credentials by user and mechanism (controller/credential_store.py)."""
        ...

    async def alter_scram_credentials(self, changes: Sequence[ScramChange]) -> None:
        """Add, replace or delete credentials, persisted before return."""
        ...

    def scram_user_refusal(self, user: str) -> str | None:
        """Why this backend cannot store credentials of the user (its name), or None."""
        ...

    def acls(self) -> frozenset[AclBinding]:
        """Every ACL (controller/acl_store.py); the same object until ACLs change."""
        ...

    async def alter_acls(self, add: Sequence[AclBinding], remove: Sequence[AclBinding]) -> None:
        """Add and remove ACLs, persisted before return; adding an ACL that exists and
        removing one that does not change nothing."""
        ...

    def client_metrics(self) -> Mapping[str, Mapping[str, str]]:
        """Client-metrics subscriptions' configs by name (controller/named_configs.py);
        read-only, and the same object until they change."""
        ...

    async def set_client_metrics(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace one subscription's configs (none: remove it), persisted before return."""
        ...

    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        """Groups' configs by group id (controller/named_configs.py); read-only, and the
        same object until they change."""
        ...

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace one group's configs (none: remove them), persisted before return."""
        ...

    def mirror_links(self) -> Mapping[str, Mapping[str, str]]:
        """Mirror links' configs by link name (kbroker/mirror/link_configs.py); read-only,
        and the same object until they change."""
        ...

    async def set_mirror_link(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace one link's configs (none: remove the link), persisted before return."""
        ...

    async def publish_service_url(self, service: str, url: str) -> None:
        """Tell the other brokers where this broker serves an HTTP service (the schema
        registry's writer receives the writes of the others there); gone with the broker."""
        ...

    async def service_url(self, service: str, broker_id: int) -> str | None:
        """Where a live broker serves ``service``, if it published it."""
        ...

    def acl_refusal(self, acl: AclBinding) -> str | None:
        """Why this backend cannot store the ACL (its resource name), or None."""
        ...

    def add_listener(self, callback: TopicListener) -> None: ...
