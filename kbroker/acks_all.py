"""The acks=all rule: a leader's write counts once every in-sync replica has it.

Shared by the Produce handler (acks=-1) and the group coordinator, which writes offset commits
and group metadata to ``__consumer_offsets`` the same way Kafka's coordinator does. Before
appending, a partition whose ISR is smaller than its min.insync.replicas refuses the write
(NOT_ENOUGH_REPLICAS). After appending, the writer waits in the broker's purgatory until the
high watermark passes the last offset written; the outcome is NOT_ENOUGH_REPLICAS_AFTER_APPEND
when the ISR shrank below min.insync.replicas meanwhile, NOT_LEADER_OR_FOLLOWER when this broker
no longer hosts that replica as it was, REQUEST_TIMED_OUT when the deadline passes first.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.partition import Partition


def effective_min_insync(partition: Partition) -> int:
    """min.insync.replicas, capped at the partition's replica count as Kafka caps it
    (Partition.effectiveMinIsr): Kafka 3.9 and 4.3 both take acks=all writes to a topic of
    one replica whose min.insync.replicas is 2."""
    needed = partition.log.config.min_insync_replicas
    return min(needed, len(partition.replicas)) if partition.replicas else needed


def check_min_insync(partition: Partition) -> None:
    """Raise NOT_ENOUGH_REPLICAS when the ISR is smaller than the effective min.insync.replicas."""
    needed = effective_min_insync(partition)
    if len(partition.isr) < needed:
        raise KafkaError(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"{len(partition.isr)} in-sync replicas, min.insync.replicas is {needed}",
        )


def replication_error(broker: Broker, partition: Partition, last_offset: int) -> ErrorCode | None:
    """None while the write up to ``last_offset`` waits for the ISR; otherwise its outcome."""
    if broker.partition(partition.topic, partition.index) is not partition:
        # This broker no longer leads that replica (broker.partition returns leaders only).
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if partition.high_watermark <= last_offset:
        return None
    if len(partition.isr) < effective_min_insync(partition):
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return ErrorCode.NONE


async def await_replication(
    broker: Broker, writes: Sequence[tuple[Partition, int]], timeout_ms: int
) -> list[ErrorCode]:
    """Wait for each (partition, last offset written) to be replicated; one outcome each."""
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    outcomes: list[ErrorCode | None] = [None] * len(writes)
    waiting = list(range(len(writes)))
    while waiting:
        pending = []
        for i in waiting:
            partition, last_offset = writes[i]
            outcomes[i] = replication_error(broker, partition, last_offset)
            if outcomes[i] is None:
                pending.append(i)
        waiting = pending
        remaining = deadline - time.monotonic()
        if not waiting or remaining <= 0:
            break
        if not await broker.fetch_purgatory.wait([writes[i][0].key for i in waiting], remaining):
            for i in waiting:
                partition, last_offset = writes[i]
                outcomes[i] = replication_error(broker, partition, last_offset)
            break
    return [ErrorCode.REQUEST_TIMED_OUT if o is None else o for o in outcomes]
