"""The broker process: metadata, logs, partitions, the listener, and their lifecycle.

Start-up order: metadata (so the topics are known), logs (recovery), the
partitions this broker leads, then the listener. Shutdown runs the other way:
stop accepting and finish requests in progress, then flush and close the logs
with the clean-shutdown marker, then metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable

from controller.embedded import EmbeddedMetadata
from controller.interface import MetadataBackend, TopicInfo
from kbroker.config import BrokerConfig, effective_topic_config
from kbroker.dispatch import Dispatcher
from kbroker.group.coordinator import GroupCoordinator
from kbroker.log.log_config import LogConfig
from kbroker.log.log_manager import LogManager
from kbroker.partition import Partition
from kbroker.producer_ids import ProducerIdAllocator
from kbroker.purgatory import Purgatory
from kbroker.server.connection import ConnectionLimits
from kbroker.server.listener import KafkaServer

log = logging.getLogger(__name__)

# How often logs with a flush.ms setting are checked.
FLUSH_CHECK_SECONDS = 1.0


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.metadata: MetadataBackend = EmbeddedMetadata(config)
        self.logs = LogManager(list(config.log_dirs), clock=clock)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_purgatory = Purgatory()
        self.producer_ids = ProducerIdAllocator(config.log_dirs[0])
        self.dispatcher = Dispatcher(self)
        self.group_coordinator = GroupCoordinator(self)
        self._server = KafkaServer(
            self.dispatcher.handle,
            self.dispatcher.reject_version,
            ConnectionLimits(max_frame_bytes=config.socket_request_max_bytes),
        )
        self._flusher: asyncio.Task[None] | None = None
        self._stopped = False
        self.port = 0

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    async def start(self) -> int:
        """Start serving; returns the port the listener is bound to."""
        await self.metadata.start()
        self.logs.open_all()
        for topic in self.metadata.topics().values():
            self._host_topic(topic)
        self.metadata.add_listener(self._on_topic_change)
        # After the topics are hosted: creates __consumer_offsets and loads its partitions.
        await self.group_coordinator.start()
        _, host, port = self.config.listeners[0]
        self.port = await self._server.start(host, port)
        self._flusher = asyncio.get_running_loop().create_task(self._flush_periodically())
        log.info(
            "kbroker %d started: %d partitions, cluster id %s",
            self.config.broker_id,
            len(self.partitions),
            self.metadata.cluster_id,
        )
        return self.port

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        log.info("shutting down")
        # First, so JoinGroup/SyncGroup requests parked in the coordinator are answered
        # (NOT_COORDINATOR) and their connections can finish.
        await self.group_coordinator.stop()
        await self._server.close()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        self.partitions.clear()
        self.logs.shutdown()
        await self.metadata.stop()
        log.info("shut down cleanly")

    def _host_topic(self, topic: TopicInfo) -> None:
        config = LogConfig.from_topic_config(
            effective_topic_config(topic.configs, self.config, self.metadata.broker_configs())
        )
        for info in topic.partitions:
            if info.leader != self.config.broker_id:
                continue
            existing = self.partitions.get((topic.name, info.partition))
            if existing is not None:
                existing.log.update_config(config)
                existing.leader_epoch = info.leader_epoch
                existing.isr = info.isr
                continue
            partition_log = self.logs.get_or_create(topic.name, info.partition, config)
            self.partitions[(topic.name, info.partition)] = Partition(
                topic.name,
                info.partition,
                partition_log,
                info.leader_epoch,
                info.isr,
                self._partition_changed,
            )

    def _on_topic_change(self, topic: TopicInfo | None, name: str) -> None:
        if topic is not None:
            self._host_topic(topic)
            return
        for key in [key for key in self.partitions if key[0] == name]:
            del self.partitions[key]
            self.logs.delete(*key)
            self.fetch_purgatory.notify(key)

    def _partition_changed(self, key: tuple[str, int]) -> None:
        self.fetch_purgatory.notify(key)

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_CHECK_SECONDS)
            self.logs.flush_due()


async def serve(config: BrokerConfig) -> None:
    """Run a broker until SIGINT or SIGTERM, then shut it down gracefully."""
    broker = Broker(config)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    await broker.start()
    try:
        await stopping.wait()
    finally:
        await broker.stop()


def run_broker(config: BrokerConfig) -> None:
    asyncio.run(serve(config))
