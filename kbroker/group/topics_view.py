"""The consumer group protocol's view of the cluster's topics (consumer_heartbeat.TopicsView),
over the broker's metadata: a topic's id, partition count and the racks of each partition's
replicas, and a version that changes with every topic created, deleted or changed, so that
regex subscriptions are evaluated again and groups rebalance when their topics change."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from controller.interface import MetadataBackend, TopicInfo
from kbroker.group.assignors import TopicSpec


class MetadataTopics:
    def __init__(self, metadata: MetadataBackend) -> None:
        self._metadata = metadata
        self.version = 0
        self._specs: dict[str, tuple[TopicInfo, TopicSpec]] = {}
        metadata.add_listener(self._changed)

    def _changed(self, topic: TopicInfo | None, name: str) -> None:
        self.version += 1
        self._specs.pop(name, None)

    def topic(self, name: str) -> TopicSpec | None:
        info = self._metadata.topic(name)
        if info is None:
            return None
        kept = self._specs.get(name)
        if kept is not None and kept[0] is info:
            return kept[1]
        racks = {b.broker_id: b.rack for b in self._metadata.brokers() if b.rack}
        spec = TopicSpec(
            info.topic_id,
            name,
            len(info.partitions),
            {
                p.partition: frozenset(racks[r] for r in p.replicas if r in racks)
                for p in info.partitions
            },
        )
        self._specs[name] = (info, spec)
        return spec

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        info = self._metadata.topic_by_id(topic_id)
        return info.name if info is not None else None

    def names(self) -> Iterable[str]:
        return [name for name, info in self._metadata.topics().items() if not info.internal]
