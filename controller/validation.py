"""Checks every metadata backend applies the same way: topic names and replica assignments.

Kafka's rules: a topic name is 1 to 249 characters from ``[a-zA-Z0-9._-]``, not ``.`` or
``..``; two names that differ only by ``.`` versus ``_`` collide (they would share a metric
name) and the second one is refused. Errors are KafkaError with the codes Kafka answers:
INVALID_TOPIC_EXCEPTION, INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from wire.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal: it is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal: longer than {MAX_TOPIC_NAME_LENGTH} characters",
        )
    if _LEGAL.fullmatch(name) is None:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal: only ASCII letters, digits, '.', '_' and '-' "
            "are allowed",
        )


def collision_key(name: str) -> str:
    return name.replace(".", "_")


def check_collision(name: str, existing: Iterable[str]) -> None:
    """Refuse ``name`` if an existing topic differs from it only by '.' versus '_'."""
    key = collision_key(name)
    for other in existing:
        if other != name and collision_key(other) == key:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic {name!r} collides with existing topic {other!r}",
            )


def check_replication_factor(replication_factor: int, brokers: Collection[int]) -> None:
    if replication_factor <= 0:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default",
        )
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): only "
            f"{len(brokers)} broker(s) are registered",
        )


def check_replicas(replicas: Sequence[int], brokers: Collection[int], what: str) -> None:
    if not replicas:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"{what} has no replicas")
    if len(set(replicas)) != len(replicas):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"{what} lists a broker more than once"
        )
    unknown = sorted(set(replicas) - set(brokers))
    if unknown:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"{what} names unknown broker(s) {unknown}"
        )


def check_assignments(assignments: Mapping[int, Sequence[int]], brokers: Collection[int]) -> None:
    """A manual assignment for a new topic: partitions 0..n-1, each with the same number of
    distinct, known brokers."""
    if not assignments:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The assignment is empty")
    if sorted(assignments) != list(range(len(assignments))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Partitions in the assignment must be consecutive and start at 0",
        )
    sizes = {len(replicas) for replicas in assignments.values()}
    if len(sizes) > 1:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "All partitions must have the same number of replicas",
        )
    for partition, replicas in assignments.items():
        check_replicas(replicas, brokers, f"Partition {partition}")
