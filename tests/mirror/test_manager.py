"""The mirror manager keeping a mirror topic like its source topic."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from controller.interface import PartitionInfo, TopicInfo
from kbroker.mirror.manager import MirrorManager
from wire.errors import ErrorCode, KafkaError


class RefusingMetadata:
    """A metadata backend that refuses CreatePartitions and records config changes."""

    def __init__(self, topic: TopicInfo) -> None:
        self._topic = topic
        self.configs_set: list[Mapping[str, str]] = []

    def topic(self, name: str) -> TopicInfo | None:
        return self._topic if name == self._topic.name else None

    async def create_partitions(self, name: str, total: int) -> TopicInfo:
        raise KafkaError(ErrorCode.POLICY_VIOLATION, "no more partitions here")

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        self.configs_set.append(dict(configs))
        return self._topic


def test_refused_partitions_do_not_stop_the_config_sync() -> None:
    topic = TopicInfo(
        name="orders",
        topic_id=uuid.uuid4(),
        partitions=(PartitionInfo(0, 1, 0, (1,), (1,)),),
        configs={"kbroker.mirror.source.bootstrap": "src:9092", "retention.ms": "1"},
    )
    metadata = RefusingMetadata(topic)
    broker: Any = SimpleNamespace(
        config=SimpleNamespace(broker_id=1, get=lambda name: None), metadata=metadata
    )
    manager = MirrorManager(broker)
    asyncio.run(manager.follow_source_topic("orders", 3, {"retention.ms": "2"}))
    assert metadata.configs_set == [
        {"kbroker.mirror.source.bootstrap": "src:9092", "retention.ms": "2"}
    ]
