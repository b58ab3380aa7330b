"""An in-process broker for the share group APIs, with its own share coordinator keeping the
share-partition state in ``__share_group_state``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from tests.group.conftest import free_port


@pytest.fixture
async def share_broker(tmp_path: Path) -> AsyncIterator[Broker]:
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "log.dirs": str(tmp_path / "data"),
        "offsets.topic.num.partitions": "3",
        "share.coordinator.state.topic.num.partitions": "3",
    }
    broker = Broker(BrokerConfig.from_properties(props))
    await broker.start()
    await broker.group_coordinator.wait_loaded()
    yield broker
    await broker.stop()
