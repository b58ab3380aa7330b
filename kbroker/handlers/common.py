"""Look-ups and checks that several handlers share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.partition import Partition

# The protocol's "no epoch given" value (KIP-320).
NO_EPOCH = -1


def leader_partition(broker: Broker, topic: str, index: int) -> Partition:
    """The partition this broker leads, or the error a client should act on."""
    partition = broker.partition(topic, index)
    if partition is not None:
        return partition
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
