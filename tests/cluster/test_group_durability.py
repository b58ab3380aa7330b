"""Committed offsets survive the group coordinator's kill -9 right after the commit returns.

The coordinator answers an OffsetCommit only once the whole ISR of its __consumer_offsets
partition has the commit (acks=all), so the follower elected after the kill serves it.
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from helpers import create_topic, full_isr, partition_view, wait_for
from local_cluster import LocalCluster

from kbroker.client import KafkaClient
from kbroker.group.offsets_store import OFFSETS_TOPIC, partition_for
from wire.errors import ErrorCode

pytestmark = pytest.mark.slow

TOPIC = "durable-commits"
GROUP = "durable-group"
COMMITS = 50


def _addresses(cluster: LocalCluster) -> list[tuple[str, int]]:
    return [(b.host, b.port) for b in cluster.brokers.values() if b.running()]


async def _commit_then_kill(cluster: LocalCluster, coordinator: int) -> None:
    """Commit increasing offsets; SIGKILL the coordinator as soon as the last one returns."""
    async with KafkaClient(_addresses(cluster), timeout=30) as client:
        for offset in range(1, COMMITS + 1):
            errors = await client.commit(GROUP, {(TOPIC, 0): (offset, f"m{offset}")})
            assert errors == {(TOPIC, 0): ErrorCode.NONE}
        pid = cluster.brokers[coordinator].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)


async def _committed(cluster: LocalCluster) -> dict[tuple[str, int], tuple[int, str]]:
    async with KafkaClient(_addresses(cluster), timeout=90) as client:
        return await client.committed(GROUP)


def test_commit_survives_coordinator_kill(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC)
    index = partition_for(GROUP, 3)
    # Looking the group up (FindCoordinator) creates the offsets topic if it is missing.
    assert asyncio.run(_committed(cluster)) == {}
    view = wait_for(lambda: full_isr(cluster, OFFSETS_TOPIC, index), 90, "a full ISR")
    coordinator = view.leader
    asyncio.run(_commit_then_kill(cluster, coordinator))
    cluster.brokers[coordinator].kill()
    try:
        wait_for(
            lambda: (
                (v := partition_view(cluster, OFFSETS_TOPIC, index)) is not None
                and v.leader not in (-1, coordinator)
            ),
            60,
            "a new coordinator",
        )
        assert asyncio.run(_committed(cluster)) == {(TOPIC, 0): (COMMITS, f"m{COMMITS}")}
    finally:
        cluster.brokers[coordinator].start(timeout=60)
        wait_for(lambda: full_isr(cluster, OFFSETS_TOPIC, index), 90, "the ISR to heal")
