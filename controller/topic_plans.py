"""What creating a topic or adding partitions produces, decided the same way by every backend
(DESIGN rule 7): the request's checks, the replica placement and the new partitions' states.

A backend passes what it knows of the cluster (the live brokers with their racks, the existing
topics) and persists the returned TopicInfo its own way. Placement is
``decisions.assign_replicas`` from a random first broker, as Kafka's ZooKeeper mode does; a
single node has one broker, so everything lands there. A new partition's first live replica
leads and its live replicas are in sync (``decisions.initial_state``). Errors are KafkaError with
the codes Kafka answers.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Collection, Mapping, Sequence

from controller import decisions
from controller.interface import INTERNAL_TOPICS, PartitionInfo, TopicInfo
from controller.validation import (
    check_assignments,
    check_collision,
    check_replicas,
    check_replication_factor,
    validate_topic_name,
)
from kbroker.config import BrokerConfig, validate_topic_configs
from wire.errors import ErrorCode, KafkaError


def _partitions(
    first: int, replicas: Sequence[tuple[int, ...]], live: set[int]
) -> tuple[PartitionInfo, ...]:
    partitions = []
    for i, assigned in enumerate(replicas):
        state = decisions.initial_state(assigned, live, 0)
        partitions.append(
            PartitionInfo(first + i, state.leader, state.leader_epoch, assigned, state.isr)
        )
    return tuple(partitions)


def _place(
    racks: Mapping[int, str | None], count: int, replication_factor: int, first: int = 0
) -> list[tuple[int, ...]]:
    return decisions.assign_replicas(
        racks,
        count,
        replication_factor,
        start_index=random.randrange(len(racks)),
        first_partition=first,
    )


def plan_topic(
    config: BrokerConfig,
    name: str,
    num_partitions: int,
    replication_factor: int,
    *,
    assignments: Mapping[int, Sequence[int]] | None,
    configs: Mapping[str, str] | None,
    existing: Collection[str],
    racks: Mapping[int, str | None],
    topic_id: uuid.UUID,
) -> TopicInfo:
    """The topic a CreateTopics request asks for (see MetadataBackend.create_topic), given the
    existing topic names and the live brokers' racks."""
    validate_topic_name(name)
    if name in existing:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic {name!r} already exists")
    check_collision(name, existing)
    brokers = sorted(racks)
    if assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were "
                "set; only one may be used",
            )
        check_assignments(assignments, brokers)
        replicas = [tuple(assignments[i]) for i in range(len(assignments))]
    else:
        if num_partitions == -1:
            num_partitions = config.num_partitions
        if replication_factor == -1:
            replication_factor = config.default_replication_factor
        if num_partitions <= 0:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions must be larger than 0, or -1 to use the default",
            )
        check_replication_factor(replication_factor, brokers)
        replicas = _place(racks, num_partitions, replication_factor)
    overrides = dict(configs or {})
    validate_topic_configs(overrides)
    return TopicInfo(
        name=name,
        topic_id=topic_id,
        partitions=_partitions(0, replicas, set(brokers)),
        configs=overrides,
        internal=name in INTERNAL_TOPICS,
    )


def plan_partitions(
    topic: TopicInfo,
    total: int,
    *,
    assignments: Sequence[Sequence[int]] | None,
    racks: Mapping[int, str | None],
) -> TopicInfo:
    """``topic`` grown to ``total`` partitions (see MetadataBackend.create_partitions); the new
    partitions keep the topic's replication factor."""
    current = len(topic.partitions)
    if total < current:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, which is higher than the requested {total}",
        )
    if total == current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions")
    added = total - current
    rf = len(topic.partitions[0].replicas) if topic.partitions else 1
    brokers = sorted(racks)
    if assignments is not None:
        if len(assignments) != added:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {added} but "
                f"{len(assignments)} assignments provided",
            )
        for offset, replicas in enumerate(assignments):
            what = f"Partition {current + offset}"
            check_replicas(replicas, brokers, what)
            if len(replicas) != rf:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"{what}: inconsistent replication factor {len(replicas)}, the topic has {rf}",
                )
        new = [tuple(a) for a in assignments]
    else:
        check_replication_factor(rf, brokers)
        new = _place(racks, added, rf, current)
    return TopicInfo(
        name=topic.name,
        topic_id=topic.topic_id,
        partitions=topic.partitions + _partitions(current, new, set(brokers)),
        configs=dict(topic.configs),
        internal=topic.internal,
    )
