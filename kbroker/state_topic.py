"""Coordinator state kept in an internal topic: one mechanism for every coordinator.

The group coordinator keeps its groups and offsets in ``__consumer_offsets``, the transaction
coordinator its transactional ids in ``__transaction_state`` and the share coordinator the
share partitions' state in ``__share_group_state``. They work the same way, as in Kafka (its
``CoordinatorLoader`` / ``TransactionStateManager``):

- the topic is created on demand (internal, compacted unless the coordinator says otherwise,
  the coordinator's own partition count, replication factor, segment size and
  min.insync.replicas); in a cluster with fewer live brokers than the replication factor it
  is not created until enough are alive;
- the broker that leads a partition of the topic coordinates the keys hashed to it: when it
  becomes the leader it loads the partition (replaying every committed record below the high
  watermark, in log order; a leader whose high watermark still lags waits until it reaches the
  log end it had when the load began), and when it stops leading it unloads it;
- writes go through the partition like a Produce with acks=all (kbroker/acks_all.py): refused
  while the ISR is below min.insync.replicas, and finished once the high watermark passes the
  batch or the write timeout runs out. The outcomes of one partition's writes are reported in
  log order, so a write replicated later never overtakes an earlier one in memory.

A coordinator supplies a ``StateOwner``: it is told when a partition begins loading (and
returns a ``StateLoader`` that receives the partition's batches), when the load completes, and
when the partition is unloaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from controller.interface import BrokerInfo, TopicInfo
from kbroker.acks_all import await_replication, check_min_insync
from kbroker.producer_state import VerificationGuard
from wire.errors import DecodeError, ErrorCode, KafkaError
from wire.records.batch import BatchHeader, iter_batches
from wire.records.record import Record, build_batch, decode_batch

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.partition import Partition

log = logging.getLogger(__name__)

# Bytes read per step when loading a partition; the loop yields between steps.
LOAD_CHUNK_BYTES = 1 << 20
# A load waiting for the high watermark looks again at least this often.
LOAD_WAIT_SECONDS = 1.0

KeyValue = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transactional producer a coordinator's write belongs to (TxnOffsetCommit), with the
    guard of its verification when the write opens its transaction here (KIP-890)."""

    producer_id: int
    producer_epoch: int
    verification: VerificationGuard | None = None


@dataclass(frozen=True, slots=True)
class StateTopicSettings:
    name: str
    num_partitions: int
    replication_factor: int
    segment_bytes: int
    # None: the broker's min.insync.replicas.
    min_insync_replicas: int | None
    write_timeout_ms: int
    # False: created on the first look-up of a coordinator (Kafka creates
    # __transaction_state on the first FindCoordinator for a transactional id).
    create_on_start: bool = True
    # __share_group_state is not compacted: its updates share their key and each one counts.
    # It keeps everything (retention.ms -1) and its coordinator deletes what no key needs.
    cleanup_policy: str = "compact"
    retention_ms: int | None = None


class StateLoader(Protocol):
    def apply_batch(self, header: BatchHeader, records: list[Record]) -> None:
        """One batch of the partition, in log order (control batches included)."""


class StateOwner(Protocol):
    def begin_load(self, index: int) -> StateLoader: ...

    def complete_load(self, index: int, loader: StateLoader) -> None: ...

    def unload(self, index: int) -> None: ...


@dataclass(slots=True)
class PendingWrite:
    """A write appended to a state partition and waiting for its ISR. ``done`` resolves once
    its outcome has been reported; ``before`` is the previous write of that partition."""

    partition: Partition
    last_offset: int
    before: asyncio.Future[None] | None
    done: asyncio.Future[None]


class StateTopic:
    """One internal topic of coordinator state: its creation, the partitions this broker leads
    (loaded into the owner), and writes that wait for the ISR."""

    def __init__(self, broker: Broker, settings: StateTopicSettings, owner: StateOwner) -> None:
        self._broker = broker
        self.settings = settings
        self._owner = owner
        self.name = settings.name
        self.num_partitions = settings.num_partitions
        self._owned: set[int] = set()
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._last_write: dict[int, asyncio.Future[None]] = {}
        self._create_lock = asyncio.Lock()
        self._running = False

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._running = True
        self._broker.metadata.add_listener(self._on_topic_change)
        if self.settings.create_on_start:
            await self.ensure_topic()
        self._update_ownership()

    async def stop(self) -> None:
        self._running = False
        loads = list(self._loads.values())
        for task in loads:
            task.cancel()
        for task in loads:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loads.clear()
        for index in sorted(self._owned):
            self._owner.unload(index)
        self._owned.clear()

    async def wait_loaded(self) -> None:
        """Until every partition being loaded is loaded (for tests and start-up)."""
        while self._loads:
            await asyncio.gather(*self._loads.values(), return_exceptions=True)

    @property
    def loading(self) -> bool:
        return bool(self._loads)

    def owned(self) -> set[int]:
        return set(self._owned)

    # --- the topic ------------------------------------------------------------------------

    async def ensure_topic(self) -> TopicInfo | None:
        metadata = self._broker.metadata
        topic = metadata.topic(self.name)
        if topic is not None:
            return topic
        async with self._create_lock:
            topic = metadata.topic(self.name)
            if topic is not None:
                return topic
            alive = len(metadata.brokers())
            replication = self.settings.replication_factor
            if self._broker.config.zookeeper_connect is None:
                # The embedded backend is a cluster of one: a factor above 1 can never be met.
                replication = min(replication, alive)
            elif alive < replication:
                log.warning(
                    "%s not created: %d brokers alive, its replication factor is %d",
                    self.name,
                    alive,
                    replication,
                )
                return None
            configs = {
                "cleanup.policy": self.settings.cleanup_policy,
                "compression.type": "producer",
                "segment.bytes": str(self.settings.segment_bytes),
            }
            if self.settings.retention_ms is not None:
                configs["retention.ms"] = str(self.settings.retention_ms)
            if self.settings.min_insync_replicas is not None:
                # Never above the replication factor actually used (a single embedded broker
                # could otherwise never write its own state).
                min_isr = min(self.settings.min_insync_replicas, replication)
                configs["min.insync.replicas"] = str(min_isr)
            try:
                return await metadata.create_topic(
                    self.name, self.settings.num_partitions, replication, configs=configs
                )
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.warning("cannot create %s: %s", self.name, exc)
                return metadata.topic(self.name)

    async def coordinator_of(self, index_of: int | None) -> tuple[ErrorCode, BrokerInfo | None]:
        """The broker leading partition ``index_of`` (None: unknown), creating the topic if
        needed; COORDINATOR_NOT_AVAILABLE when there is none."""
        topic = await self.ensure_topic()
        if topic is None or index_of is None or not 0 <= index_of < len(topic.partitions):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        leader = topic.partitions[index_of].leader
        for info in self._broker.metadata.brokers():
            if info.broker_id == leader:
                return ErrorCode.NONE, info
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None

    def partition_count(self) -> int:
        """The topic's partition count once it exists, the configured one before."""
        topic = self._broker.metadata.topic(self.name)
        return len(topic.partitions) if topic is not None else self.num_partitions

    # --- leadership -----------------------------------------------------------------------

    def _on_topic_change(self, topic: TopicInfo | None, name: str) -> None:
        if name == self.name and self._running:
            self._update_ownership()

    def _update_ownership(self) -> None:
        """Load the partitions this broker now leads, unload those it no longer does."""
        topic = self._broker.metadata.topic(self.name)
        me = self._broker.config.broker_id
        led: set[int] = set()
        if topic is not None:
            self.num_partitions = len(topic.partitions)
            led = {
                p.partition
                for p in topic.partitions
                if p.leader == me and self._broker.partition(self.name, p.partition) is not None
            }
        for index in sorted(self._owned - led):
            task = self._loads.pop(index, None)
            if task is not None:
                task.cancel()
            self._owned.discard(index)
            self._owner.unload(index)
            log.info("no longer coordinating %s-%d", self.name, index)
        for index in sorted(led - self._owned):
            self._owned.add(index)
            loader = self._owner.begin_load(index)
            self._loads[index] = asyncio.get_running_loop().create_task(self._load(index, loader))

    async def _load(self, index: int, loader: StateLoader) -> None:
        try:
            partition = self._broker.partition(self.name, index)
            if partition is None:
                self._owned.discard(index)
                self._owner.unload(index)
                return
            partition_log = partition.log
            offset = partition_log.log_start_offset
            target = partition_log.log_end_offset
            while offset < target:
                committed = partition.high_watermark
                if offset >= committed:
                    # Records past the high watermark are not committed yet; this leader's own
                    # log end is, once the ISR has caught up with it.
                    await self._broker.fetch_purgatory.wait([partition.key], LOAD_WAIT_SECONDS)
                    continue
                region = partition_log.read(
                    offset, LOAD_CHUNK_BYTES, max_offset=committed, min_one_batch=True
                )
                if region is None:
                    break
                data = region.read()
                moved = False
                for pos, header in iter_batches(data):
                    loader.apply_batch(header, decode_batch(data, pos)[1])
                    offset = header.next_offset
                    moved = True
                if not moved:
                    break
                await asyncio.sleep(0)
        except (DecodeError, KafkaError, OSError):
            # Leave the partition loading (clients retry) rather than serve partial state.
            log.exception("cannot load %s-%d", self.name, index)
            if self._loads.get(index) is asyncio.current_task():
                del self._loads[index]
            return
        # Not cancelled since the last await: this broker still leads the partition.
        if self._loads.get(index) is asyncio.current_task():
            del self._loads[index]
        self._owner.complete_load(index, loader)

    # --- writes ---------------------------------------------------------------------------

    def append(
        self,
        index: int,
        records: Sequence[KeyValue],
        *,
        acks_all: bool,
        producer: TxnProducer | None = None,
    ) -> tuple[Partition, int] | ErrorCode:
        """Append records to partition ``index``: the partition and the last offset written,
        or the storage error. ``acks_all`` refuses the write while the ISR is too small.
        ``producer`` makes the batch part of that producer's transaction, as a TxnOffsetCommit
        is; its epoch is checked like a producer's, its sequence is not."""
        partition = self._broker.partition(self.name, index)
        if partition is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        now = int(self._broker.clock() * 1000)
        entries = [
            Record(offset=i, timestamp=now, key=key, value=value, headers=[])
            for i, (key, value) in enumerate(records)
        ]
        if producer is None:
            batch = build_batch(entries)
        else:
            batch = build_batch(
                entries,
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                base_sequence=0,
                transactional=True,
            )
        try:
            if acks_all:
                check_min_insync(partition)
            result = partition.append(
                bytearray(batch),
                log_append_time_ms=None,
                from_coordinator=producer is not None,
                verification=producer.verification if producer is not None else None,
            )
        except KafkaError as exc:
            log.warning("write to %s-%d failed: %s", self.name, index, exc)
            return exc.code
        except OSError as exc:
            # The log directory refused the write: it goes offline (KIP-112), and the
            # coordinator answers as for any storage error.
            self._broker.log_dir_failed(partition.log.directory.parent, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        return partition, result.last_offset

    def start_write(
        self,
        index: int,
        records: Sequence[KeyValue],
        producer: TxnProducer | None = None,
    ) -> PendingWrite | ErrorCode:
        """Append with acks=all; the write then waits in ``finish_write``."""
        appended = self.append(index, records, acks_all=True, producer=producer)
        if isinstance(appended, ErrorCode):
            return appended
        partition, last_offset = appended
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        before = self._last_write.get(index)
        self._last_write[index] = done
        return PendingWrite(partition, last_offset, before, done)

    async def finish_write(self, write: PendingWrite) -> ErrorCode:
        """Wait until the ISR has the write and every earlier write of its partition has been
        reported (the caller applies this one right after, before yielding); the storage
        error."""
        index = write.partition.index
        try:
            (error,) = await await_replication(
                self._broker, [(write.partition, write.last_offset)], self.settings.write_timeout_ms
            )
            if write.before is not None:
                await asyncio.shield(write.before)
        finally:
            if not write.done.done():
                write.done.set_result(None)
            if self._last_write.get(index) is write.done:
                del self._last_write[index]
        if error != ErrorCode.NONE:
            log.warning("write to %s-%d not replicated: %s", self.name, index, error.name)
        return error

    async def write(
        self,
        index: int,
        records: Sequence[KeyValue],
        producer: TxnProducer | None = None,
    ) -> ErrorCode:
        """Append with acks=all and wait; the storage error."""
        started = self.start_write(index, records, producer)
        if isinstance(started, ErrorCode):
            return started
        return await self.finish_write(started)
