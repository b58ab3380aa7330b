"""A failed log directory in a ZooKeeper cluster (KIP-112's second half): the broker writes
its offline replicas and Kafka's log directory event notification, and the controller, woken
by the notification alone, moves the leaderships of those replicas to other in-sync replicas,
drops them from the ISR and deletes the notification; the broker's other replicas keep their
roles. A new session of the broker (a restart) starts with nothing offline.

Three ZooKeeper backends in one process against a real ZooKeeper; the replication itself is
in tests/cluster/test_log_dir_failure.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from controller import zk_backend, zk_paths
from controller.interface import Endpoint, PartitionInfo
from controller.zk_backend import ZkMetadata
from kbroker.config import BrokerConfig


def _backend(tmp_path: Path, zookeeper: str, broker_id: int) -> ZkMetadata:
    config = BrokerConfig.from_properties(
        {
            "broker.id": str(broker_id),
            "log.dirs": str(tmp_path / str(broker_id)),
            "zookeeper.connect": zookeeper,
        }
    )
    return ZkMetadata(config)


async def _until(check: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not seen in time"
        await asyncio.sleep(0.05)


def _partition(backend: ZkMetadata, index: int) -> PartitionInfo:
    topic = backend.topic("t")
    assert topic is not None
    return topic.partitions[index]


def _roles(backend: ZkMetadata, index: int) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    p = _partition(backend, index)
    return p.leader, p.leader_epoch, p.isr, p.offline_replicas


async def test_the_controller_moves_the_failed_replicas_and_nothing_else(
    tmp_path: Path, zookeeper: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No safety-net refresh: only the notification can wake the controller.
    monkeypatch.setattr(zk_backend, "SAFETY_REFRESH_SECONDS", 3600.0)
    backends = {i: _backend(tmp_path, zookeeper, i) for i in (2, 1, 3)}
    zk = KazooClient(hosts=zookeeper)
    zk.start(timeout=30)
    restarted: ZkMetadata | None = None
    try:
        for broker_id, backend in backends.items():
            await backend.start()
            # Broker 2 registers first and becomes the controller.
            await backend.register([Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id)])
        controller, failing, other = backends[2], backends[1], backends[3]
        assert controller.is_controller()
        await _until(lambda: {b.broker_id for b in controller.brokers()} == {1, 2, 3})
        await controller.create_topic(
            "t", -1, -1, assignments={0: [1, 2, 3], 1: [1, 3, 2], 2: [3, 1, 2]}
        )
        await _until(lambda: other.topic("t") is not None and failing.topic("t") is not None)
        events_before = zk.exists(zk_paths.LOG_DIR_EVENTS).cversion

        # Broker 1's directory with t-0 (which it leads) and t-2 (which it follows) failed;
        # t-1, which it leads too, is in its healthy directory.
        failing.log_dirs_failed(["/data/b"], [("t", 0), ("t", 2)])

        await _until(lambda: _roles(other, 0)[0] == 2)
        for backend in backends.values():
            await _until(lambda b=backend: _roles(b, 2)[2] == (3, 2))
            assert _roles(backend, 0) == (2, 1, (2, 3), (1,))
            assert _roles(backend, 1) == (1, 0, (1, 3, 2), ())
            assert _roles(backend, 2) == (3, 0, (3, 2), (1,))
        # One notification, made and then deleted by the controller, as Kafka's does.
        await _until(lambda: zk.get_children(zk_paths.LOG_DIR_EVENTS) == [])
        assert zk.exists(zk_paths.LOG_DIR_EVENTS).cversion == events_before + 2
        data, _ = zk.get(zk_paths.offline_replicas_path(1))
        assert zk_paths.decode_offline_replicas(data).partitions == {("t", 0), ("t", 2)}
        # Nothing elects the failed replica, not even a preferred election on request.
        codes = await controller.elect_leaders([("t", 0)], unclean=False)
        assert _roles(controller, 0)[0] == 2 and codes[("t", 0)] != 0

        # A restart: the old session's offline replicas are gone with it.
        await failing.stop()
        restarted = _backend(tmp_path, zookeeper, 1)
        await restarted.start()
        await restarted.register([Endpoint("PLAINTEXT", "127.0.0.1", 9001)])
        await _until(
            lambda: _roles(other, 0)[3] == () and 1 in {b.broker_id for b in other.brokers()}
        )
        assert zk.exists(zk_paths.offline_replicas_path(1)) is None
    finally:
        for backend in (*backends.values(), restarted):
            if backend is not None:
                await backend.stop()
        zk.stop()
        zk.close()
