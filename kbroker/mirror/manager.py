"""Which mirror topics this broker follows: those with a partition it leads.

The manager reconciles at start, whenever the metadata says a topic changed (created,
configs altered, leaders moved), and once a second in any case: a mirror topic (a
``kbroker.mirror.source.bootstrap`` config, kbroker/mirror/topic_configs.py) that is not
promoted and has partitions led here gets a MirrorTopic (kbroker/mirror/link.py) following
exactly those partitions; its fetchers stop when leadership moves away, the topic is deleted
or promoted, and start again on the new leader, from its own log end. A change of the
source (bootstrap, source topic, client properties) restarts the topic's fetchers. The
leader of a mirror's partition 0 also keeps its partition count and copied configs like
the source topic's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from controller.interface import TopicInfo
from kbroker.client import KafkaClient
from kbroker.metrics import Exposition
from kbroker.mirror.link import MirrorTopic, PartitionStatus
from kbroker.mirror.link_configs import fetch_rate
from kbroker.mirror.link_follower import LinkFollower
from kbroker.mirror.metrics import expose_mirrors
from kbroker.mirror.partition_core import Backoff
from kbroker.mirror.secrets import SecretError, decode_secrets, encoder_from
from kbroker.mirror.throttle import LinkThrottle
from kbroker.mirror.topic_configs import ACTIVE, PAUSED, MirrorSpec, mirror_spec, synced_configs
from kbroker.partition import Partition
from replication.fetcher import make_settings
from wire.errors import KafkaError

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

RECONCILE_SECONDS = 1.0
LOCAL_TIMEOUT_SECONDS = 30.0
# The retry backoff of Kafka's clients (retry.backoff.ms, retry.backoff.max.ms, KIP-580).
BACKOFF = Backoff(initial_ms=100, max_ms=1000)


class MirrorManager:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.broker_id = broker.config.broker_id
        self._topics: dict[str, MirrorTopic] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # password.encoder.secret is a static config, as in Kafka.
        self._encoder = encoder_from(broker.config.get)
        self._links = LinkFollower(broker, self._encoder)
        # Topics whose secrets do not decode, logged once.
        self._undecodable: set[str] = set()
        # Link name -> its fetch rate cap, shared by the link's topics followed here.
        self._throttles: dict[str, LinkThrottle] = {}

    # MirrorHost ------------------------------------------------------------------------

    def leading(self, topic: str, index: int) -> Partition | None:
        info = self._broker.metadata.topic(topic)
        spec = None if info is None else mirror_spec(topic, info.configs)
        if spec is None or spec.state != ACTIVE:
            return None
        partition = self._broker.partitions.get((topic, index))
        return partition if partition is not None and partition.is_leader else None

    def storage_failed(self, partition: Partition, exc: OSError) -> None:
        self._broker.log_dir_failed(partition.log.directory.parent, exc)

    def local_client(self, client_id: str) -> KafkaClient:
        broker = self._broker
        address = next(
            (b.host, b.port) for b in broker.metadata.brokers() if b.broker_id == self.broker_id
        )
        return KafkaClient(
            [address],
            client_id=client_id,
            timeout=LOCAL_TIMEOUT_SECONDS,
            security=broker.inter_broker_security,
        )

    async def follow_source_topic(
        self, topic: str, partitions: int, overrides: Mapping[str, str] | None
    ) -> None:
        info = self._broker.metadata.topic(topic)
        if info is None:
            return
        if len(info.partitions) < partitions:
            log.info(
                "mirror %s: the source has %d partitions, %d here: adding the others",
                topic,
                partitions,
                len(info.partitions),
            )
            try:
                await self._broker.metadata.create_partitions(topic, partitions)
            except KafkaError as exc:
                # The partitions there are still followed; the others wait for a retry.
                log.warning("mirror %s: partitions not added: %s", topic, exc)
        synced = None if overrides is None else synced_configs(info.configs, overrides)
        if synced is not None:
            log.info("mirror %s: taking the source's configs %s", topic, overrides)
            try:
                await self._broker.metadata.set_topic_configs(topic, synced)
            except KafkaError as exc:
                log.warning("mirror %s: source configs not taken: %s", topic, exc)

    # Life ------------------------------------------------------------------------------

    def start(self) -> None:
        self._broker.metadata.add_listener(self._on_topic_change)
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._links.start()

    async def stop(self) -> None:
        await self._links.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        topics, self._topics = self._topics, {}
        for mirror in topics.values():
            await mirror.stop()

    def apply_link_records(self) -> None:
        """Put the links' fetch caps in force now: at every reconcile, and at once on the
        broker that took a change of a link record (the others learn of it at their next
        reconcile, within RECONCILE_SECONDS)."""
        records = self._broker.metadata.mirror_links()
        for link, throttle in self._throttles.items():
            throttle.set_rate(fetch_rate(records.get(link, {})))

    def statuses(self) -> dict[str, list[PartitionStatus]]:
        """The fetcher state of every mirror partition led here (metrics, console)."""
        return {name: mirror.statuses() for name, mirror in sorted(self._topics.items())}

    def expose(self, out: Exposition) -> None:
        expose_mirrors(out, self.statuses())

    def _on_topic_change(self, topic: TopicInfo | None, name: str) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self._reconcile()
            except Exception:
                # One bad topic must not stop the others from being followed.
                log.exception("mirror topics: reconcile failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RECONCILE_SECONDS):
                    await self._wake.wait()

    def _wanted(self) -> dict[str, tuple[MirrorSpec, set[int]]]:
        led: dict[str, set[int]] = {}
        for (topic, index), partition in self._broker.partitions.items():
            if partition.is_leader:
                led.setdefault(topic, set()).add(index)
        wanted: dict[str, tuple[MirrorSpec, set[int]]] = {}
        for name, indexes in led.items():
            info = self._broker.metadata.topic(name)
            if info is None or mirror_spec(name, info.configs) is None:
                continue
            try:
                spec = mirror_spec(name, decode_secrets(info.configs, self._encoder))
            except SecretError as exc:
                if name not in self._undecodable:
                    self._undecodable.add(name)
                    log.error("mirror %s: not followed, its source secrets: %s", name, exc)
                continue
            self._undecodable.discard(name)
            if spec is not None and spec.following:
                wanted[name] = (spec, indexes)
        return wanted

    async def _raise_promoted_epochs(self) -> None:
        """A promoted mirror's partition led here whose log holds a higher leader epoch (the
        source's) than its own takes an epoch above it, so that local batches never go back
        in epochs (KIP-101: the epoch history must grow); until then Produce answers
        NOT_LEADER_OR_FOLLOWER (kbroker/partition.py), which producers retry."""
        for (topic, index), partition in list(self._broker.partitions.items()):
            if not partition.is_leader:
                continue
            highest = partition.log.latest_epoch()
            if highest <= partition.leader_epoch:
                continue
            info = self._broker.metadata.topic(topic)
            spec = None if info is None else mirror_spec(topic, info.configs)
            if spec is None or spec.following:
                continue
            epoch = await self._broker.metadata.raise_leader_epoch(
                topic, index, partition.leader_epoch, highest
            )
            log.info(
                "mirror %s-%d promoted: leader epoch %d -> %s, above the source's %d",
                topic,
                index,
                partition.leader_epoch,
                epoch,
                highest,
            )

    async def _reconcile(self) -> None:
        await self._raise_promoted_epochs()
        wanted = self._wanted()
        for link in {spec.link for spec, _ in wanted.values()}:
            self._throttles.setdefault(link, LinkThrottle())
        self.apply_link_records()
        for name, mirror in list(self._topics.items()):
            entry = wanted.get(name)
            if entry is None or entry[0].runner_key() != mirror.spec.runner_key():
                del self._topics[name]
                await mirror.stop()
                log.info("mirror %s: stopped following on broker %d", name, self.broker_id)
        for name, (spec, indexes) in wanted.items():
            mirror = self._topics.get(name)
            if mirror is None:
                mirror = MirrorTopic(
                    self,
                    name,
                    spec,
                    make_settings(self._broker.config.get),
                    BACKOFF,
                    self._throttles[spec.link],
                )
                self._topics[name] = mirror
                mirror.start()
                log.info(
                    "mirror %s: following %s from %s (link %s)",
                    name,
                    spec.source_topic,
                    spec.bootstrap,
                    spec.link,
                )
            mirror.set_paused(spec.state == PAUSED)
            mirror.set_partitions(indexes)
