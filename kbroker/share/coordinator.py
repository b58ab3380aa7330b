"""The share coordinator's async shell (KIP-932): ``__share_group_state`` and the pure cores.

The share coordinator of a share partition (group, topic id, partition) is the leader of the
``__share_group_state`` partition that Kafka's hash of ``group:topic id:partition`` picks
(FindCoordinator key type 2). The topic is created on the first look-up, as Kafka does: internal,
``share.coordinator.state.topic.num.partitions`` partitions (default 50), replication factor
``share.coordinator.state.topic.replication.factor`` (3; a single embedded broker uses 1, as
for ``__consumer_offsets``), ``share.coordinator.state.topic.min.isr`` (2, never above the
replication factor) and ``...segment.bytes``. As in Kafka it is not compacted: every update of
a share partition has the same key, and each one counts until the next snapshot. It keeps
everything (``retention.ms=-1``); instead, every ``share.coordinator.state.topic.prune.interval.ms``
the coordinator deletes the records before the oldest latest snapshot of any key, and every
``share.coordinator.cold.partition.snapshot.interval.ms`` it snapshots the states nobody wrote
for that long, so that old snapshots do not hold the deletion back.

When this broker becomes the leader of a partition it loads it (kbroker/state_topic.py,
shared with the group and transaction coordinators) into a ``ShareStateShard``
(kbroker/share/state_shard.py); until then its keys answer COORDINATOR_LOAD_IN_PROGRESS, and
keys of partitions it does not lead NOT_COORDINATOR.

The requests of one key run one after the other: each is decided by the core on the state
replayed so far, its record is written with acks=all (answered once the ISR has it, within
``share.coordinator.write.timeout.ms``) and replayed, then the next one starts. A write the
ISR does not take is reported as Kafka's coordinator runtime reports it
(COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, which callers retry). When a topic is deleted
the coordinator writes tombstones for its share partitions, as Kafka does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from controller.interface import BrokerInfo, TopicInfo
from kbroker.group.offsets_store import partition_for
from kbroker.share.persister_api import SharePartitionState
from kbroker.share.state_records import (
    SHARE_GROUP_STATE_TOPIC,
    SNAPSHOT,
    UPDATE,
    ShareStateKey,
    ShareUpdate,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kbroker.share.state_shard import ShareStateShard, StateRecord
from kbroker.state_topic import KeyValue, StateTopic, StateTopicSettings
from wire.errors import ErrorCode, KafkaError
from wire.records.batch import BatchHeader
from wire.records.record import Record

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)
T = TypeVar("T")

# How Kafka's coordinator runtime reports a write its log refused or the ISR did not take
# (CoordinatorOperationExceptionHelper); anything else is passed on.
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def _encoded(record: StateRecord) -> KeyValue:
    record_type = UPDATE if isinstance(record.value, ShareUpdate) else SNAPSHOT
    value = None if record.value is None else encode_value(record.value)
    return encode_key(record.key, record_type), value


def _tombstone(shard: ShareStateShard, key: ShareStateKey) -> StateRecord:
    return StateRecord(key, None)


@dataclass(slots=True)
class ShardLoader:
    """Replays a partition's records into a new shard (``StateLoader``)."""

    shard: ShareStateShard
    records: int = 0

    def apply_batch(self, header: BatchHeader, records: list[Record]) -> None:
        if header.is_control:
            return
        for record in records:
            decoded = decode_key(record.key) if record.key is not None else None
            if decoded is None:
                continue
            record_type, key = decoded
            if record.value is None:
                if record_type == UPDATE:
                    continue  # Kafka never writes these; only a snapshot tombstone deletes
                self.shard.replay(record.offset, StateRecord(key, None))
            else:
                value = decode_value(record_type, record.value)
                self.shard.replay(record.offset, StateRecord(key, value))
            self.records += 1


@dataclass(slots=True)
class _KeyLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class ShareCoordinator:
    """The share coordinator for the ``__share_group_state`` partitions this broker leads."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        get = broker.config.get
        self.state = StateTopic(
            broker,
            StateTopicSettings(
                name=SHARE_GROUP_STATE_TOPIC,
                num_partitions=get("share.coordinator.state.topic.num.partitions"),
                replication_factor=get("share.coordinator.state.topic.replication.factor"),
                segment_bytes=get("share.coordinator.state.topic.segment.bytes"),
                min_insync_replicas=get("share.coordinator.state.topic.min.isr"),
                write_timeout_ms=get("share.coordinator.write.timeout.ms"),
                create_on_start=False,
                cleanup_policy="delete",
                retention_ms=-1,
            ),
            self,
        )
        self._updates_per_snapshot = get("share.coordinator.snapshot.update.records.per.snapshot")
        self._cold_interval_ms = get("share.coordinator.cold.partition.snapshot.interval.ms")
        self._prune_interval_ms = get("share.coordinator.state.topic.prune.interval.ms")
        self._shards: dict[int, ShareStateShard] = {}
        # (share partitions, records) per partition loaded since the last summary line.
        self._loaded_summary: dict[int, tuple[int, int]] = {}
        self._locks: dict[ShareStateKey, _KeyLock] = {}
        self._pruned: dict[int, int] = {}
        # Topic ids by name, to know which topic a deletion took away.
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def _now_ms(self) -> int:
        return int(self._broker.clock() * 1000)

    def _partitions_of(self, topic_id: uuid.UUID) -> int | None:
        topic = self._broker.metadata.topic_by_id(topic_id)
        return None if topic is None else len(topic.partitions)

    def _new_shard(self) -> ShareStateShard:
        return ShareStateShard(self._updates_per_snapshot, self._partitions_of, self._now_ms)

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        metadata = self._broker.metadata
        self._topic_ids = {name: t.topic_id for name, t in metadata.topics().items()}
        metadata.add_listener(self._on_topic_change)
        await self.state.start()
        self._spawn(self._every(self._cold_interval_ms, self.snapshot_cold_states))
        self._spawn(self._every(self._prune_interval_ms, self.prune))

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.state.stop()

    async def wait_loaded(self) -> None:
        await self.state.wait_loaded()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:
                log.exception("share coordinator: periodic %s failed", job.__name__)

    # --- the state topic's partitions (StateOwner) ---------------------------------------

    def begin_load(self, index: int) -> ShardLoader:
        return ShardLoader(self._new_shard())

    def complete_load(self, index: int, loader: object) -> None:
        assert isinstance(loader, ShardLoader)
        self._shards[index] = loader.shard
        log.debug(
            "loaded %s-%d: %d share partitions from %d records",
            SHARE_GROUP_STATE_TOPIC,
            index,
            len(loader.shard),
            loader.records,
        )
        self._loaded_summary[index] = (len(loader.shard), loader.records)
        if not self.state.loading:
            # One INFO line for a round of loads (all partitions at start-up, say).
            log.info(
                "loaded %d %s partitions: %d share partitions from %d records",
                len(self._loaded_summary),
                SHARE_GROUP_STATE_TOPIC,
                sum(shares for shares, _ in self._loaded_summary.values()),
                sum(records for _, records in self._loaded_summary.values()),
            )
            self._loaded_summary.clear()

    def unload(self, index: int) -> None:
        self._shards.pop(index, None)
        self._pruned.pop(index, None)

    # --- routing --------------------------------------------------------------------------

    def partition_of(self, key: ShareStateKey) -> int:
        """The ``__share_group_state`` partition of ``key``: Kafka's
        ``Utils.abs(key.hashCode) % partitions`` over ``group:topic id:partition``."""
        return partition_for(key.coordinator_key(), self.state.partition_count())

    async def find_coordinator(self, key: ShareStateKey) -> tuple[ErrorCode, BrokerInfo | None]:
        """The broker coordinating ``key`` (creating the topic if needed)."""
        return await self.state.coordinator_of(self.partition_of(key))

    def _shard(self, index: int) -> ShareStateShard:
        shard = self._shards.get(index)
        if shard is not None:
            return shard
        if index in self.state.owned():
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        raise KafkaError(ErrorCode.NOT_COORDINATOR)

    @contextlib.asynccontextmanager
    async def _serialized(self, key: ShareStateKey) -> AsyncIterator[None]:
        """One request of ``key`` at a time, in arrival order."""
        entry = self._locks.setdefault(key, _KeyLock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[key]

    async def _run(
        self, key: ShareStateKey, decide: Callable[[ShareStateShard], tuple[T, StateRecord | None]]
    ) -> T:
        """Decide on the key's state, store the record if any, then answer."""
        index = self.partition_of(key)
        self._shard(index)
        async with self._serialized(key):
            shard = self._shard(index)
            answer, record = decide(shard)
            if record is not None:
                await self._store(index, shard, record)
            return answer

    async def _store(self, index: int, shard: ShareStateShard, record: StateRecord) -> None:
        write = self.state.start_write(index, [_encoded(record)])
        if isinstance(write, ErrorCode):
            raise KafkaError(_WRITE_ERRORS.get(write, write))
        error = await self.state.finish_write(write)
        if error != ErrorCode.NONE:
            raise KafkaError(_WRITE_ERRORS.get(error, error))
        if self._shards.get(index) is shard:
            shard.replay(write.last_offset, record)

    # --- requests (errors raised as KafkaError) -------------------------------------------

    async def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> None:
        await self._run(key, lambda s: (None, s.initialize(key, state_epoch, start_offset)))

    async def read(self, key: ShareStateKey, leader_epoch: int) -> SharePartitionState:
        return await self._run(key, lambda s: s.read(key, leader_epoch))

    async def write(self, key: ShareStateKey, state: SharePartitionState) -> None:
        await self._run(key, lambda s: (None, s.write(key, state)))

    async def delete(self, key: ShareStateKey) -> None:
        await self._run(key, lambda s: (None, s.delete(key)))

    async def read_summary(self, key: ShareStateKey) -> SharePartitionState:
        return await self._run(key, lambda s: (s.read_summary(key), None))

    # --- housekeeping ---------------------------------------------------------------------

    async def _rewrite(
        self,
        index: int,
        keys: list[ShareStateKey],
        what: str,
        make: Callable[[ShareStateShard, ShareStateKey], StateRecord],
    ) -> None:
        """Write ``make``'s record for each key still in ``index``'s shard, each in turn with
        the key's requests."""
        for key in keys:
            async with self._serialized(key):
                shard = self._shards.get(index)
                if shard is None or shard.state(key) is None:
                    continue
                try:
                    await self._store(index, shard, make(shard, key))
                except KafkaError as exc:
                    log.warning("%s of %s not written: %s", what, key, exc)
                    return

    async def snapshot_cold_states(self) -> None:
        for index, shard in list(self._shards.items()):
            keys = shard.cold_keys(self._cold_interval_ms)
            await self._rewrite(index, keys, "cold snapshot", ShareStateShard.snapshot_of)

    async def prune(self) -> None:
        """Delete the records of each led partition that no key needs any more."""
        for index, shard in list(self._shards.items()):
            offset = shard.redundant_offset()
            if offset is None or self._pruned.get(index) == offset:
                continue
            partition = self._broker.partition(SHARE_GROUP_STATE_TOPIC, index)
            if partition is None:
                continue
            partition.delete_records_before(min(offset, partition.high_watermark))
            self._pruned[index] = offset
            log.debug("pruned %s-%d before offset %d", SHARE_GROUP_STATE_TOPIC, index, offset)

    def _on_topic_change(self, topic: TopicInfo | None, name: str) -> None:
        if topic is not None:
            self._topic_ids[name] = topic.topic_id
            return
        topic_id = self._topic_ids.pop(name, None)
        if topic_id is None or name == SHARE_GROUP_STATE_TOPIC:
            return
        for index, shard in list(self._shards.items()):
            keys = shard.keys_of_topic(topic_id)
            if keys:
                self._spawn(self._rewrite(index, keys, "tombstone", _tombstone))
