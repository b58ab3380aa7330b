"""An in-process broker for the share group APIs, with the share-partition state kept by an
in-memory persister (the share coordinator's own tests cover __share_group_state)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.share.persister_api import SharePartitionState
from tests.group.conftest import free_port
from wire.errors import ErrorCode

Key = tuple[str, uuid.UUID, int]


class MemoryPersister:
    """The SharePersister interface over a dict: what was written is what is read."""

    def __init__(self) -> None:
        self.states: dict[Key, SharePartitionState] = {}
        self.writes = 0

    async def initialize(
        self, group_id: str, partitions: Sequence[tuple[uuid.UUID, int, int, int]]
    ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        for topic_id, partition, state_epoch, start_offset in partitions:
            self.states[(group_id, topic_id, partition)] = SharePartitionState(
                state_epoch, start_offset, ()
            )
        return {(t, p): ErrorCode.NONE for t, p, _, _ in partitions}

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> SharePartitionState:
        return self.states.get((group_id, topic_id, partition), SharePartitionState(0, -1, ()))

    async def write(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state: SharePartitionState
    ) -> None:
        self.writes += 1
        self.states[(group_id, topic_id, partition)] = state

    async def delete(
        self, group_id: str, partitions: Sequence[tuple[uuid.UUID, int]]
    ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        for topic_id, partition in partitions:
            self.states.pop((group_id, topic_id, partition), None)
        return dict.fromkeys(partitions, ErrorCode.NONE)

    async def read_summary(
        self, group_id: str, partitions: Sequence[tuple[uuid.UUID, int]], leader_epoch: int = -1
    ) -> dict[tuple[uuid.UUID, int], SharePartitionState | ErrorCode]:
        return {
            (t, p): self.states.get((group_id, t, p), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for t, p in partitions
        }


@pytest.fixture
async def share_broker(tmp_path: Path) -> AsyncIterator[Broker]:
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "log.dirs": str(tmp_path / "data"),
        "offsets.topic.num.partitions": "3",
    }
    broker = Broker(BrokerConfig.from_properties(props))
    broker.share_persister = MemoryPersister()
    await broker.start()
    await broker.group_coordinator.wait_loaded()
    yield broker
    await broker.stop()
