"""A refresh reads a partition's state znode again only when its watch fired, a write of
this broker's changed it, or the connection came back; everything else is the last read's
(controller/zk_backend.py)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from controller import zk_backend, zk_paths
from controller.interface import Endpoint
from controller.zk_backend import ZkMetadata
from controller.zk_paths import PartitionState
from kbroker.config import BrokerConfig


def _backend(tmp_path: Path, zookeeper: str) -> ZkMetadata:
    config = BrokerConfig.from_properties(
        {"broker.id": "1", "log.dirs": str(tmp_path / "1"), "zookeeper.connect": zookeeper}
    )
    return ZkMetadata(config)


def _count_state_reads(backend: ZkMetadata, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The state znodes the backend reads from now on (the real reads still happen)."""
    reads: list[str] = []
    real = backend._zk.get_async

    def get_async(path: str, watch: object = None) -> object:
        if path.endswith("/state"):
            reads.append(path)
        return real(path, watch=watch)

    monkeypatch.setattr(backend._zk, "get_async", get_async)
    return reads


async def _until(check: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not seen in time"
        await asyncio.sleep(0.02)


async def test_only_changed_states_are_read_again(
    tmp_path: Path, zookeeper: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _backend(tmp_path, zookeeper)
    await backend.start()
    other = KazooClient(hosts=zookeeper)
    other.start()
    try:
        await backend.register([Endpoint("PLAINTEXT", "127.0.0.1", 9092)])
        await backend.create_topic("t", 20, 1)
        await backend.refresh()
        reads = _count_state_reads(backend, monkeypatch)
        await backend.refresh()
        assert reads == []
        # Another client (a controller elsewhere) changes one partition's state: its watch
        # fires and only that znode is read again.
        path = zk_paths.state_path("t", 7)
        state = zk_paths.decode_state(other.get(path)[0])
        moved = PartitionState(state.leader, state.leader_epoch + 1, state.isr, 5)
        other.set(path, zk_paths.encode_state(moved))
        await _until(lambda: backend.topic("t").partitions[7].leader_epoch == moved.leader_epoch)  # type: ignore[union-attr]
        assert set(reads) == {path}
        # A write of this broker's (an ISR change as leader) is read back at once.
        reads.clear()
        isr = await backend.alter_isr("t", 3, 0, (1,))
        assert isr == (1,)
        assert reads[:1] == [zk_paths.state_path("t", 3)]
        # After the connection comes back, or every FULL_READ_SECONDS, everything is read.
        reads.clear()
        backend._on_state("CONNECTED")
        await backend.refresh()
        assert len(reads) >= 20
        reads.clear()
        monkeypatch.setattr(zk_backend, "FULL_READ_SECONDS", 0.0)
        await backend.refresh()
        assert len(reads) >= 20
    finally:
        other.stop()
        other.close()
        await backend.stop()


async def test_a_leader_raises_its_own_epoch_conditionally(tmp_path: Path, zookeeper: str) -> None:
    """A promoted mirror's leader raises its partition's epoch above the source's
    (kbroker/mirror/manager.py), with the same conditional write as an ISR change."""
    backend = _backend(tmp_path, zookeeper)
    await backend.start()
    try:
        await backend.register([Endpoint("PLAINTEXT", "127.0.0.1", 9092)])
        await backend.create_topic("m", 1, 1)
        await backend.refresh()
        assert await backend.raise_leader_epoch("m", 0, 0, 5) == 6
        info = backend.topic("m")
        assert info is not None and info.partitions[0].leader_epoch == 6
        assert info.partitions[0].isr == (1,)
        # No longer at epoch 0: nothing written.
        assert await backend.raise_leader_epoch("m", 0, 0, 9) is None
        assert backend.topic("m").partitions[0].leader_epoch == 6  # type: ignore[union-attr]
    finally:
        await backend.stop()
