"""The group coordinator's async shell around the pure ``GroupStateMachine``.

It owns what the pure core must not do: waiting (JoinGroup and SyncGroup requests park on a
future until the core answers them), the timer that fires the core's deadlines, writing
records to ``__consumer_offsets`` through the partition log (before any answer that depends on
them is released), loading a partition's groups when this broker becomes its leader, and the
periodic offset expiry (offsets.retention.check.interval.ms).

Offset commits and group metadata are written as Kafka's coordinator writes them, with acks=all
(kbroker/acks_all.py): refused while the ISR is below min.insync.replicas, and answered only
once the high watermark passes the written batch or offsets.commit.timeout.ms runs out. The
outcomes of one partition's writes are applied in log order, so a commit replicated later can
never be overtaken in memory by an earlier one. Tombstones (expiry, DeleteGroups,
OffsetDelete) are appended without waiting, as in Kafka: one that is lost is written again by
the next expiry pass or delete. While a commit waits, expiry spares its partitions and its
group (the newer offset is on its way), and a tombstone appended meanwhile wins over it in
memory as it does in the log, where it follows the commit.

Loading a partition reads only records below the high watermark, so uncommitted records are
never served; a new leader whose high watermark still lags its log end offset keeps loading
until the watermark reaches the log end offset it had when the load began.

The coordinator of a group is the leader of ``__consumer_offsets`` partition
``abs(hash(group)) % partitions``; the topic is created at start-up (compacted, internal) and,
in a cluster that was too small for offsets.topic.replication.factor at start-up, on the first
FindCoordinator once enough brokers are alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controller.interface import BrokerInfo, TopicInfo
from kbroker.acks_all import await_replication, check_min_insync
from kbroker.group.offsets_store import (
    OFFSETS_TOPIC,
    GroupKey,
    LoadedState,
    OffsetKey,
    OffsetValue,
    encode_key,
    encode_value,
    partition_for,
)
from kbroker.group.state_machine import (
    Effect,
    GroupConfig,
    GroupDescription,
    GroupListing,
    GroupStateMachine,
    JoinRequest,
    JoinResult,
    Record,
    Reply,
    SyncRequest,
    SyncResult,
    TopicPartition,
)
from wire.errors import DecodeError, ErrorCode, KafkaError
from wire.records.batch import iter_batches
from wire.records.record import Record as LogRecord
from wire.records.record import build_batch, decode_batch

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.partition import Partition

log = logging.getLogger(__name__)

# Bytes read per step when loading a partition; the loop yields between steps.
LOAD_CHUNK_BYTES = 1 << 20
# A JoinGroup/SyncGroup is answered by the core within the rebalance timeout (plus the initial
# delay); this margin only bounds the wait should that ever fail.
WAIT_MARGIN_SECONDS = 30.0
# A load waiting for the high watermark looks again at least this often.
LOAD_WAIT_SECONDS = 1.0

# How a failed write of offsets is reported to clients (Kafka's mapping in the coordinator:
# the storage errors mean "try the coordinator again / elsewhere").
_COMMIT_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}
# The same for group metadata (the SyncGroup that completes a rebalance): Kafka answers a
# write the ISR did not take in time with REBALANCE_IN_PROGRESS, so the members join again.
_GROUP_STORE_ERRORS = {
    **_COMMIT_ERRORS,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def _reported(error: ErrorCode, mapping: dict[ErrorCode, ErrorCode]) -> ErrorCode:
    """The error a client sees for a storage error (NONE stays NONE)."""
    if error == ErrorCode.NONE:
        return error
    return mapping.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)


@dataclass(slots=True)
class _PendingWrite:
    """A write appended to an offsets partition and waiting for its ISR. ``done`` resolves
    once its outcome has been applied; ``before`` is the previous write of that partition."""

    partition: Partition
    last_offset: int
    before: asyncio.Future[None] | None
    done: asyncio.Future[None]


@dataclass(slots=True)
class _PendingCommit:
    """An OffsetCommit written and waiting for its ISR. ``dropped``: its partitions that a
    tombstone written after it (OffsetDelete, DeleteGroups) has superseded meanwhile, which
    must therefore not be applied."""

    group_id: str
    partitions: frozenset[TopicPartition]
    dropped: set[TopicPartition] = field(default_factory=set)


def group_config(broker: Broker) -> GroupConfig:
    """The pure core's settings, from the broker's configuration."""
    config = broker.config
    return GroupConfig(
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        max_size=config.get("group.max.size"),
        offset_metadata_max_bytes=config.get("offset.metadata.max.bytes"),
        offsets_retention_ms=config.get("offsets.retention.minutes") * 60_000,
    )


class GroupCoordinator:
    """Drives the group state machine for the offsets partitions this broker leads."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.core = GroupStateMachine(
            group_config(broker),
            lambda: int(broker.clock() * 1000),
            broker.config.offsets_topic_num_partitions,
        )
        self._waiters: dict[int, asyncio.Future[JoinResult | SyncResult]] = {}
        self._next_token = 0
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._loads: dict[int, asyncio.Task[None]] = {}
        # (groups with state, groups with offsets) per partition loaded since the last summary.
        self._loaded_summary: dict[int, tuple[int, int]] = {}
        self._create_lock = asyncio.Lock()
        self._running = False
        # The last write of each offsets partition still waiting for its ISR.
        self._last_write: dict[int, asyncio.Future[None]] = {}
        # Group metadata writes waiting for their ISR before the core hears the outcome.
        self._store_tasks: set[asyncio.Task[None]] = set()
        # OffsetCommits written but not applied yet, by group.
        self._pending_commits: dict[str, list[_PendingCommit]] = {}
        self._commit_timeout_ms: int = broker.config.get("offsets.commit.timeout.ms")

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._running = True
        self._broker.metadata.add_listener(self._on_topic_change)
        await self._ensure_offsets_topic()
        self._update_ownership()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run_timers()),
            loop.create_task(self._expire_periodically()),
        ]

    async def stop(self) -> None:
        """Stop coordinating: pending JoinGroup/SyncGroup requests are answered with
        NOT_COORDINATOR, so their clients look for the coordinator again."""
        self._running = False
        tasks = [*self._tasks, *self._loads.values(), *self._store_tasks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self._loads.clear()
        for partition in sorted(self.core.owned_partitions()):
            self._perform(self.core.unload(partition))

    async def wait_loaded(self) -> None:
        """Until every partition being loaded is loaded (for tests and start-up)."""
        while self._loads:
            await asyncio.gather(*self._loads.values(), return_exceptions=True)

    # --- the offsets topic and its partitions ---------------------------------------------

    async def _ensure_offsets_topic(self) -> TopicInfo | None:
        metadata = self._broker.metadata
        topic = metadata.topic(OFFSETS_TOPIC)
        if topic is not None:
            return topic
        config = self._broker.config
        async with self._create_lock:
            topic = metadata.topic(OFFSETS_TOPIC)
            if topic is not None:
                return topic
            alive = len(metadata.brokers())
            replication = config.offsets_topic_replication_factor
            if config.zookeeper_connect is None:
                # The embedded backend is a cluster of one: a factor above 1 can never be met.
                replication = min(replication, alive)
            elif alive < replication:
                log.warning(
                    "%s not created: %d brokers alive, offsets.topic.replication.factor is %d",
                    OFFSETS_TOPIC,
                    alive,
                    replication,
                )
                return None
            try:
                return await metadata.create_topic(
                    OFFSETS_TOPIC,
                    config.offsets_topic_num_partitions,
                    replication,
                    configs={
                        "cleanup.policy": "compact",
                        "compression.type": "producer",
                        "segment.bytes": str(config.get("offsets.topic.segment.bytes")),
                    },
                )
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc)
                return metadata.topic(OFFSETS_TOPIC)

    def _on_topic_change(self, topic: TopicInfo | None, name: str) -> None:
        if name == OFFSETS_TOPIC and self._running:
            self._update_ownership()

    def _update_ownership(self) -> None:
        """Load the offsets partitions this broker now leads, unload those it no longer does."""
        topic = self._broker.metadata.topic(OFFSETS_TOPIC)
        me = self._broker.config.broker_id
        led: set[int] = set()
        if topic is not None:
            self.core.num_offsets_partitions = len(topic.partitions)
            led = {
                p.partition
                for p in topic.partitions
                if p.leader == me and self._broker.partition(OFFSETS_TOPIC, p.partition) is not None
            }
        owned = self.core.owned_partitions()
        for partition in sorted(owned - led):
            task = self._loads.pop(partition, None)
            if task is not None:
                task.cancel()
            self._perform(self.core.unload(partition))
            log.info("no longer coordinating %s-%d", OFFSETS_TOPIC, partition)
        for partition in sorted(led - owned):
            self.core.begin_load(partition)
            self._loads[partition] = asyncio.get_running_loop().create_task(self._load(partition))

    async def _load(self, index: int) -> None:
        try:
            state = LoadedState()
            partition = self._broker.partition(OFFSETS_TOPIC, index)
            if partition is None:
                self._perform(self.core.unload(index))
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
                    if not header.is_control:
                        for record in decode_batch(data, pos)[1]:
                            state.apply(record.key, record.value)
                    offset = header.next_offset
                    moved = True
                if not moved:
                    break
                await asyncio.sleep(0)
            self.core.complete_load(index, state)
            self._loaded_summary[index] = (len(state.groups), len(state.offsets))
            log.debug(
                "loaded %s-%d: %d groups with state, %d with offsets",
                OFFSETS_TOPIC,
                index,
                len(state.groups),
                len(state.offsets),
            )
        except (DecodeError, KafkaError, OSError):
            # Leave the partition loading (clients retry) rather than serve partial state.
            log.exception("cannot load %s-%d", OFFSETS_TOPIC, index)
        finally:
            if self._loads.get(index) is asyncio.current_task():
                del self._loads[index]
                if not self._loads:
                    self._log_load_summary()

    def _log_load_summary(self) -> None:
        """One INFO line for a round of loads (all 50 partitions at start-up, say)."""
        if not self._loaded_summary:
            return
        log.info(
            "loaded %d %s partitions: %d groups with state, %d with offsets",
            len(self._loaded_summary),
            OFFSETS_TOPIC,
            sum(groups for groups, _ in self._loaded_summary.values()),
            sum(offsets for _, offsets in self._loaded_summary.values()),
        )
        self._loaded_summary.clear()

    # --- effects --------------------------------------------------------------------------

    def _perform(self, effects: list[Effect]) -> None:
        pending = list(effects)
        while pending:
            effect = pending.pop(0)
            if isinstance(effect, Reply):
                waiter = self._waiters.pop(effect.token, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(effect.result)
                continue
            write = self._start_write(effect.group_id, [(GroupKey(effect.group_id), effect.value)])
            if isinstance(write, ErrorCode):
                error = _reported(write, _GROUP_STORE_ERRORS)
                pending[0:0] = self.core.group_stored(effect.store_id, error)
            else:
                self._spawn(self._finish_store(effect.store_id, write))
        self._wake.set()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._store_tasks.add(task)
        task.add_done_callback(self._store_tasks.discard)

    async def _finish_store(self, store_id: int, write: _PendingWrite) -> None:
        error = _reported(await self._finish_write(write), _GROUP_STORE_ERRORS)
        self._perform(self.core.group_stored(store_id, error))

    def _append(
        self, group_id: str, records: list[Record], *, acks_all: bool
    ) -> tuple[Partition, int] | ErrorCode:
        """Append records of one group to its offsets partition: the partition and the last
        offset written, or the storage error."""
        index = partition_for(group_id, self.core.num_offsets_partitions)
        partition = self._broker.partition(OFFSETS_TOPIC, index)
        if partition is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        now = int(self._broker.clock() * 1000)
        batch = build_batch(
            [
                LogRecord(
                    offset=i,
                    timestamp=now,
                    key=encode_key(key),
                    value=encode_value(value),
                    headers=[],
                )
                for i, (key, value) in enumerate(records)
            ]
        )
        try:
            if acks_all:
                check_min_insync(partition)
            result = partition.append(bytearray(batch), log_append_time_ms=None)
        except KafkaError as exc:
            log.warning("write to %s-%d failed: %s", OFFSETS_TOPIC, index, exc)
            return exc.code
        return partition, result.last_offset

    def _start_write(self, group_id: str, records: list[Record]) -> _PendingWrite | ErrorCode:
        """Append with acks=all; the write then waits in ``_finish_write``."""
        appended = self._append(group_id, records, acks_all=True)
        if isinstance(appended, ErrorCode):
            return appended
        partition, last_offset = appended
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        before = self._last_write.get(partition.index)
        self._last_write[partition.index] = done
        return _PendingWrite(partition, last_offset, before, done)

    async def _finish_write(self, write: _PendingWrite) -> ErrorCode:
        """Wait until the ISR has the write and every earlier write of its partition has been
        applied (the caller applies this one right after, before yielding); the storage
        error."""
        try:
            (error,) = await await_replication(
                self._broker, [(write.partition, write.last_offset)], self._commit_timeout_ms
            )
            if write.before is not None:
                await asyncio.shield(write.before)
        finally:
            if not write.done.done():
                write.done.set_result(None)
            if self._last_write.get(write.partition.index) is write.done:
                del self._last_write[write.partition.index]
        if error != ErrorCode.NONE:
            log.warning(
                "write to %s-%d not replicated: %s",
                OFFSETS_TOPIC,
                write.partition.index,
                error.name,
            )
        return error

    async def store(self, group_id: str, records: list[Record]) -> ErrorCode:
        """Write offsets of one group with acks=all; the error to report."""
        if not records:
            return ErrorCode.NONE
        write = self._start_write(group_id, records)
        if isinstance(write, ErrorCode):
            return _reported(write, _COMMIT_ERRORS)
        return _reported(await self._finish_write(write), _COMMIT_ERRORS)

    def append(self, group_id: str, records: list[Record]) -> ErrorCode:
        """Append tombstones of one group without waiting for the ISR; the error to report.
        Pending commits of the offsets they delete are not applied when they complete."""
        if not records:
            return ErrorCode.NONE
        for commit in self._pending_commits.get(group_id, ()):
            for key, _ in records:
                if isinstance(key, GroupKey):
                    commit.dropped.update(commit.partitions)
                else:
                    commit.dropped.add((key.topic, key.partition))
        appended = self._append(group_id, records, acks_all=False)
        return (
            _reported(appended, _COMMIT_ERRORS)
            if isinstance(appended, ErrorCode)
            else ErrorCode.NONE
        )

    def _append_all(self, records: Iterable[Record]) -> None:
        by_group: dict[str, list[Record]] = {}
        for record in records:
            by_group.setdefault(record[0].group, []).append(record)
        for group_id, group_records in by_group.items():
            self.append(group_id, group_records)

    async def _wait(
        self, token: int, effects: list[Effect], timeout_ms: int
    ) -> JoinResult | SyncResult:
        future: asyncio.Future[JoinResult | SyncResult] = asyncio.get_running_loop().create_future()
        self._waiters[token] = future
        self._perform(effects)
        try:
            return await asyncio.wait_for(future, timeout_ms / 1000 + WAIT_MARGIN_SECONDS)
        finally:
            self._waiters.pop(token, None)

    def _token(self) -> int:
        self._next_token += 1
        return self._next_token

    # --- timers ---------------------------------------------------------------------------

    async def _run_timers(self) -> None:
        while True:
            deadline = self.core.next_deadline()
            timeout = None
            if deadline is not None:
                timeout = max(0.0, deadline / 1000 - self._broker.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._perform(self.core.tick())
            # Cleared after the tick: its own effects need no second look.
            self._wake.clear()

    async def _expire_periodically(self) -> None:
        interval = self._broker.config.get("offsets.retention.check.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            self.expire_offsets()

    def expire_offsets(self) -> None:
        pending = {
            group_id: {tp for commit in commits for tp in commit.partitions}
            for group_id, commits in self._pending_commits.items()
        }
        records = self.core.expire_offsets(pending)
        if records:
            log.info("expired %d offsets and groups", len(records))
        self._append_all(records)

    # --- requests -------------------------------------------------------------------------

    async def find_coordinator(self, key: str) -> tuple[ErrorCode, BrokerInfo | None]:
        topic = await self._ensure_offsets_topic()
        if topic is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        leader = topic.partitions[partition_for(key, len(topic.partitions))].leader
        for info in self._broker.metadata.brokers():
            if info.broker_id == leader:
                return ErrorCode.NONE, info
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None

    async def join(self, req: JoinRequest) -> JoinResult:
        token = self._token()
        wait_ms = req.rebalance_timeout_ms + self.core.config.initial_rebalance_delay_ms
        result = await self._wait(token, self.core.join(token, req), wait_ms)
        assert isinstance(result, JoinResult)
        return result

    async def sync(self, req: SyncRequest) -> SyncResult:
        # Answered by the group's rebalance timeout at the latest, which the request does not
        # carry; the longest session timeout bounds the wait instead.
        token = self._token()
        bound = self.core.config.max_session_timeout_ms
        result = await self._wait(token, self.core.sync(token, req), bound)
        assert isinstance(result, SyncResult)
        return result

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self.core.heartbeat(group_id, member_id, group_instance_id, generation_id)
        self._wake.set()
        return error

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        error, errors, effects = self.core.leave(group_id, members)
        self._perform(effects)
        return error, errors

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        version: int,
        offsets: dict[TopicPartition, OffsetValue],
    ) -> dict[TopicPartition, ErrorCode]:
        """Validate, persist with acks=all, then apply; one error per partition."""
        error = self.core.validate_commit(
            group_id, member_id, group_instance_id, generation_id, version
        )
        self._wake.set()
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        errors: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        metadata = self._broker.metadata
        for tp, value in offsets.items():
            topic = metadata.topic(tp[0])
            if topic is None or not 0 <= tp[1] < len(topic.partitions):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            errors[tp] = self.core.check_offset_metadata(value.metadata)
            if errors[tp] == ErrorCode.NONE:
                accepted[tp] = value
        if not accepted:
            return errors
        commit = _PendingCommit(group_id, frozenset(accepted))
        self._pending_commits.setdefault(group_id, []).append(commit)
        try:
            stored = await self.store(
                group_id,
                [(OffsetKey(group_id, t, p), value) for (t, p), value in accepted.items()],
            )
        finally:
            pending = self._pending_commits[group_id]
            pending.remove(commit)
            if not pending:
                del self._pending_commits[group_id]
        if stored != ErrorCode.NONE:
            errors.update(dict.fromkeys(accepted, stored))
            return errors
        self.core.apply_offsets(
            group_id, {tp: v for tp, v in accepted.items() if tp not in commit.dropped}
        )
        return errors

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetValue | None]]:
        error = self.core.coordinator_error(group_id)
        if error is not None:
            return error, {}
        return ErrorCode.NONE, self.core.committed(group_id, partitions)

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error, errors, records = self.core.delete_offsets(group_id, partitions)
        stored = self.append(group_id, records)
        if stored != ErrorCode.NONE:
            return stored, {}
        return error, errors

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        errors, records = self.core.delete_groups(group_ids)
        # Commits still waiting for their ISR precede these tombstones in the log: delete
        # their partitions too, or a reload would bring them back.
        deleted = {key.group for key, _ in records if isinstance(key, GroupKey)}
        known = {key for key, _ in records if isinstance(key, OffsetKey)}
        for group_id in deleted:
            for commit in self._pending_commits.get(group_id, ()):
                for topic, index in sorted(commit.partitions):
                    key = OffsetKey(group_id, topic, index)
                    if key not in known:
                        known.add(key)
                        records.append((key, None))
        self._append_all(records)
        self._wake.set()
        return errors

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupDescription | None]:
        error = self.core.coordinator_error(group_id)
        if error is not None:
            return error, None
        return ErrorCode.NONE, self.core.describe(group_id)

    def list_groups(self) -> tuple[ErrorCode, list[GroupListing]]:
        """Groups of every loaded partition; COORDINATOR_LOAD_IN_PROGRESS while one loads."""
        if self._loads:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        return ErrorCode.NONE, self.core.list_groups()
