"""The topics a metadata backend has published, and the listeners told of every change.

Both backends keep the current topics in memory (the embedded one after persisting a change,
the ZooKeeper one after each refresh) and answer reads from here; ``_publish_topics`` swaps in
a new state and then calls every listener with each changed topic (None once deleted).
``_publish_broker_configs`` tells the broker-config listeners that the dynamic broker configs
changed. A failing listener is logged and does not stop the others.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping

from controller.interface import TopicInfo, TopicListener
from wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


class TopicCache:
    """The topic reads of ``MetadataBackend``, shared by the backends."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._listeners: list[TopicListener] = []
        self._config_listeners: list[Callable[[], None]] = []

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def add_listener(self, callback: TopicListener) -> None:
        self._listeners.append(callback)

    def add_broker_config_listener(self, callback: Callable[[], None]) -> None:
        self._config_listeners.append(callback)

    def _publish_broker_configs(self) -> None:
        for callback in self._config_listeners:
            try:
                callback()
            except Exception:
                log.exception("broker config listener failed")

    def _existing(self, name: str) -> TopicInfo:
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist")
        return topic

    def _publish_topics(
        self,
        topics: Mapping[str, TopicInfo],
        changed: Iterable[tuple[TopicInfo | None, str]] = (),
    ) -> None:
        self._topics = dict(topics)
        self._by_id = {t.topic_id: t for t in self._topics.values()}
        for info, name in changed:
            for callback in self._listeners:
                try:
                    callback(info, name)
                except Exception:
                    log.exception("metadata listener failed for topic %s", name)
