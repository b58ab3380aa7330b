"""The replicas this broker hosts: roles from the metadata, fetchers, ISR upkeep, checkpoints.

The metadata backend is the only source of roles: for every partition with this broker among
its replicas, the partition's state (leader, leader epoch, ISR) decides whether it leads or
follows; ``apply`` is called with each topic after every metadata change. A follower joins the
fetcher of its leader's broker (replication/fetcher.py), which truncates it first.

As leader, ISR shrinks (a follower not caught up within replica.lag.time.max.ms, checked every
half of it) and expansions (a follower that caught up) are written through ``IsrWriter``, a
conditional write on the partition state's version (never a blind one): a write that loses
against the controller or a newer leader fails, and the fresher state arrives through the
metadata. A shrink is applied only once written; an expansion is applied at once (the
"maximal ISR"), so the high watermark never passes a follower that is about to join.

High watermarks are checkpointed per log dir every
replica.high.watermark.checkpoint.interval.ms and at shutdown (replication/checkpoints.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol

from controller.interface import TopicInfo
from kbroker.log.log_config import LogConfig
from kbroker.log.log_manager import LogManager
from kbroker.partition import NO_LEADER, Partition
from replication.checkpoints import read_high_watermarks, write_high_watermarks
from replication.fetcher import FetchSettings, LeaderFetcher

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class IsrWriter(Protocol):
    async def alter_isr(
        self, topic: str, partition: int, leader_epoch: int, isr: tuple[int, ...]
    ) -> tuple[int, ...] | None:
        """Write a new ISR if the partition is still led by this broker at ``leader_epoch``
        and its state did not change meanwhile; returns the ISR stored afterwards (the new
        one when written), None when this broker no longer leads at that epoch."""
        ...


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        notify: Callable[[TopicPartition], None],
        *,
        lag_max_ms: int,
        checkpoint_interval_ms: int,
        fetch_settings: FetchSettings,
        address_of: Callable[[int], tuple[str, int] | None],
        isr_writer: IsrWriter | None,
        clock: Callable[[], float],
        on_storage_error: Callable[[TopicPartition, OSError], None] = lambda _key, _exc: None,
        on_log_dir_error: Callable[[Path, OSError], None] = lambda _dir, _exc: None,
    ) -> None:
        self.broker_id = broker_id
        self._logs = logs
        self._notify = notify
        self._lag_max_ms = lag_max_ms
        self._checkpoint_interval_ms = checkpoint_interval_ms
        self._fetch_settings = fetch_settings
        self._address_of = address_of
        self._isr_writer = isr_writer
        self._clock = clock
        self.partitions: dict[TopicPartition, Partition] = {}
        self._fetchers: dict[int, LeaderFetcher] = {}
        self._isr_updates: set[TopicPartition] = set()
        self._tasks: list[asyncio.Task[None]] = []
        # Background tasks (fetcher stops, ISR writes), kept so they are not collected early.
        self._background: set[asyncio.Task[None]] = set()
        self._checkpointed: dict[TopicPartition, int] = {}
        self._on_storage_error = on_storage_error
        self._on_log_dir_error = on_log_dir_error
        # Replicas whose log directory failed (KIP-112): not served, not followed, not
        # recreated, until the broker restarts.
        self.offline: set[TopicPartition] = set()

    def _now_ms(self) -> float:
        return self._clock() * 1000

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        return self._address_of(broker_id)

    def replica(self, key: TopicPartition) -> Partition | None:
        return self.partitions.get(key)

    def storage_failed(self, key: TopicPartition, exc: OSError) -> None:
        """A write to this replica's log failed (a follower's append, say)."""
        self._on_storage_error(key, exc)

    def take_offline(self, keys: list[TopicPartition]) -> None:
        """Stop serving and following replicas whose log directory failed."""
        for key in keys:
            if key in self.partitions:
                self._unfollow(key)
                del self.partitions[key]
            self.offline.add(key)
            self._notify(key)

    def leader(self, topic: str, index: int) -> Partition | None:
        """The partition if this broker leads it."""
        partition = self.partitions.get((topic, index))
        return partition if partition is not None and partition.is_leader else None

    # Lifecycle ---------------------------------------------------------------------------

    def load_checkpoints(self) -> None:
        self._checkpointed = read_high_watermarks(self._logs.dirs)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._checkpoint_periodically())]
        if self._isr_writer is not None:
            self._tasks.append(loop.create_task(self._check_isr_periodically()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for task in list(self._background):
            task.cancel()
        for fetcher in list(self._fetchers.values()):
            await fetcher.stop()
        self._fetchers.clear()
        self.checkpoint()
        self.partitions.clear()

    def checkpoint(self) -> None:
        """Write the high-watermark checkpoints; a directory whose write failed is reported
        (it goes offline, as in Kafka) and written again at the next checkpoint."""
        hws = {key: p.high_watermark for key, p in self.partitions.items()}
        if hws == self._checkpointed:
            return
        failures = write_high_watermarks(self._logs, hws)
        for directory, exc in failures:
            self._on_log_dir_error(directory, exc)
        if not failures:
            self._checkpointed = hws

    async def _checkpoint_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._checkpoint_interval_ms / 1000)
            self.checkpoint()

    # Roles -------------------------------------------------------------------------------

    def apply(self, topic: TopicInfo, config: LogConfig) -> None:
        """Take on the roles the metadata gives this broker for ``topic``'s partitions."""
        now_ms = self._now_ms()
        for info in topic.partitions:
            key = (topic.name, info.partition)
            if key in self.offline:
                continue
            if self.broker_id not in info.replicas:
                if key in self.partitions:
                    self._drop(key, delete=True)
                continue
            plog = self._logs.get_or_create(topic.name, info.partition, config)
            partition = self.partitions.get(key)
            if partition is None:
                partition = Partition(
                    topic.name,
                    info.partition,
                    plog,
                    self.broker_id,
                    self._notify,
                    high_watermark=self._checkpointed.get(key, 0),
                )
                self.partitions[key] = partition
            if info.leader == self.broker_id:
                self._unfollow(key)
                if partition.make_leader(info.leader_epoch, info.replicas, info.isr, now_ms):
                    log.info("leading %s-%d at epoch %d", *key, info.leader_epoch)
                self._notify(key)
            elif info.leader_epoch < partition.leader_epoch:
                # A stale view (an older epoch than one already applied): ignore it.
                continue
            else:
                if partition.make_follower(info.leader, info.leader_epoch, info.replicas, info.isr):
                    self._unfollow(key)
                    if info.leader != NO_LEADER:
                        self._follow(key, info.leader)

    def remove_topic(self, name: str) -> None:
        for key in [k for k in self.partitions if k[0] == name]:
            self._drop(key, delete=True)

    def _drop(self, key: TopicPartition, *, delete: bool) -> None:
        self._unfollow(key)
        del self.partitions[key]
        if delete:
            self._logs.delete(*key)
        self._notify(key)

    def _follow(self, key: TopicPartition, leader_id: int) -> None:
        fetcher = self._fetchers.get(leader_id)
        if fetcher is None:
            fetcher = LeaderFetcher(self, leader_id, self._fetch_settings)
            self._fetchers[leader_id] = fetcher
            fetcher.start()
        fetcher.add(key)

    def _unfollow(self, key: TopicPartition) -> None:
        for leader_id, fetcher in list(self._fetchers.items()):
            if key in fetcher.keys:
                fetcher.remove(key)
                if not fetcher.keys:
                    del self._fetchers[leader_id]
                    self._spawn(fetcher.stop())

    # Leader side -------------------------------------------------------------------------

    def follower_fetched(self, partition: Partition, replica: int, fetch_offset: int) -> None:
        """A follower fetched ``partition`` at ``fetch_offset``: its progress moves the high
        watermark and may bring it back into the ISR."""
        partition.on_follower_fetch(replica, fetch_offset, self._now_ms())
        # Only registered brokers may join (not one that is shutting down or gone).
        joining = {r for r in partition.isr_to_expand() if self._address_of(r) is not None}
        if joining and self._isr_writer is not None:
            isr = tuple(sorted(set(partition.isr) | joining))
            # The maximal ISR (see the module docstring) is applied before the write.
            partition.apply_isr(isr)
            self._write_isr(partition, isr)

    def _write_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        if partition.key in self._isr_updates or self._isr_writer is None:
            return
        self._isr_updates.add(partition.key)
        self._spawn(self._alter(self._isr_writer, partition, isr))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _alter(self, writer: IsrWriter, partition: Partition, isr: tuple[int, ...]) -> None:
        epoch = partition.leader_epoch
        try:
            stored = await writer.alter_isr(partition.topic, partition.index, epoch, isr)
        except Exception:
            log.exception("ISR change of %s-%d failed", partition.topic, partition.index)
            stored = None
        finally:
            self._isr_updates.discard(partition.key)
        if stored is not None and partition.is_leader and partition.leader_epoch == epoch:
            if stored == isr:
                log.info("ISR of %s-%d is now %s", partition.topic, partition.index, list(isr))
            partition.apply_isr(stored)

    def check_isr(self) -> None:
        """Shrink the ISR of led partitions whose followers lag (one pass)."""
        now_ms = self._now_ms()
        for partition in list(self.partitions.values()):
            if not partition.is_leader:
                continue
            lagging = partition.isr_to_shrink(now_ms, self._lag_max_ms)
            if lagging:
                isr = tuple(b for b in partition.isr if b not in lagging)
                self._write_isr(partition, isr)

    async def _check_isr_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._lag_max_ms / 2000)
            self.check_isr()
