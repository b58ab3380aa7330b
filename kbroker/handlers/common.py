"""Look-ups and checks that several handlers share.

KIP-951: a NOT_LEADER_OR_FOLLOWER (or fenced epoch) answer to Produce v10+ or Fetch v12+
carries the current leader and its epoch, and the response the leaders' endpoints (Fetch from
v16), so clients move to the new leader without a Metadata round trip.

Broker addresses in answers are those of the listener the request came through
(``client_brokers``): Metadata, DescribeCluster, FindCoordinator and the KIP-951 endpoints.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from controller.interface import BrokerInfo
from kbroker.server.connection import LISTENER_NAME
from wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.partition import Partition

# The protocol's "no epoch given" value (KIP-320).
NO_EPOCH = -1
# Fetch and ListOffsets isolation level of read_committed consumers (KIP-98).
READ_COMMITTED = 1


def topic_name(broker: Broker, name: str, topic_id: uuid.UUID, by_id: bool) -> str | None:
    """The topic a request names: ``name``, or in the versions that name topics by id (KIP-516)
    the name of ``topic_id``, None when the broker does not know that id."""
    if not by_id:
        return name
    info = broker.metadata.topic_by_id(topic_id)
    return info.name if info is not None else None


def leader_partition(broker: Broker, topic: str, index: int) -> Partition:
    """The partition this broker leads, or the error a client should act on."""
    partition = broker.partition(topic, index)
    if partition is not None:
        return partition
    if (topic, index) in broker.replica_manager.offline:
        # Its log directory failed (KIP-112): the client retries, finding a new leader.
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR)
    info = broker.metadata.topic(topic)
    if info is None or not 0 <= index < len(info.partitions):
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)


def check_leader_epoch(partition: Partition, requested: int) -> None:
    """KIP-320: a client whose epoch is behind ours is fenced; one ahead of us
    knows of a leader change we have not seen yet."""
    if requested == NO_EPOCH or requested == partition.leader_epoch:
        return
    if requested < partition.leader_epoch:
        raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
    raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)


# Errors after which a client should look for the partition's current leader.
LEADER_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def current_leader(broker: Broker, topic: str, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) as the metadata knows them; (-1, -1) when unknown."""
    info = broker.metadata.topic(topic)
    if info is None or not 0 <= index < len(info.partitions):
        return -1, -1
    partition = info.partitions[index]
    return partition.leader, partition.leader_epoch


def client_brokers(broker: Broker) -> list[BrokerInfo]:
    """The live brokers with the addresses of the listener the request came through; brokers
    without an endpoint for it are left out, as Kafka does."""
    listener = LISTENER_NAME.get()
    seen = (b.through(listener) for b in broker.metadata.brokers())
    return [b for b in seen if b is not None]


def broker_endpoints(broker: Broker, broker_ids: set[int]) -> list[BrokerInfo]:
    if not broker_ids:  # the common case: no leader moved, so no Produce/Fetch hints
        return []
    return [b for b in client_brokers(broker) if b.broker_id in broker_ids]
