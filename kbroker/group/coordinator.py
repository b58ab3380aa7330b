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
import uuid
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controller.interface import BrokerInfo
from kbroker.config import ConfigError
from kbroker.group import group_configs
from kbroker.group.assignors import ASSIGNORS
from kbroker.group.consumer_heartbeat import ConsumerGroupDescription, ConsumerGroupSettings
from kbroker.group.events import (
    AdminResult,
    ConsumerHeartbeat,
    Effect,
    GroupConfig,
    GroupDescription,
    GroupListing,
    HeartbeatResult,
    InitializeShareState,
    JoinRequest,
    JoinResult,
    LeaveResult,
    MigrationPolicy,
    Record,
    Reply,
    ShareHeartbeat,
    StoreRecords,
    SyncRequest,
    SyncResult,
    TopicPartition,
)
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
from kbroker.group.share_heartbeat import ShareGroupDescription
from kbroker.group.state_machine import GroupStateMachine
from kbroker.group.topics_view import MetadataTopics
from kbroker.state_topic import (
    KeyValue,
    PendingWrite,
    StateLoader,
    StateTopic,
    StateTopicSettings,
    TxnProducer,
)
from kbroker.txn.verification import produce_error
from wire.errors import ErrorCode

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TxnOffsetVerification:
    """How a TxnOffsetCommit's transaction is verified (KIP-890): by whose transactional id,
    whether the coordinator adds the offsets partition (v5 with transaction version 2), and
    whether the request version knows TRANSACTION_ABORTABLE (v4+)."""

    transactional_id: str
    add: bool
    abortable_known: bool


# What the core answers a request with.
Result = JoinResult | SyncResult | HeartbeatResult | LeaveResult | AdminResult

# A JoinGroup/SyncGroup is answered by the core within the rebalance timeout (plus the initial
# delay); this margin only bounds the wait should that ever fail.
WAIT_MARGIN_SECONDS = 30.0

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
    # A TxnOffsetCommit from a fenced producer (its epoch is checked by the partition).
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
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
class _PendingCommit:
    """An OffsetCommit written and waiting for its ISR. ``dropped``: its partitions that a
    tombstone written after it (OffsetDelete, DeleteGroups) has superseded meanwhile, which
    must therefore not be applied."""

    group_id: str
    partitions: frozenset[TopicPartition]
    dropped: set[TopicPartition] = field(default_factory=set)


# group.consumer.assignors takes Kafka's class names too.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _assignor_names(listed: list[str]) -> tuple[str, ...]:
    names = tuple(_ASSIGNOR_CLASSES.get(name, name) for name in listed)
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown or not names:
        raise ConfigError(
            f"Invalid value {','.join(listed)} for configuration group.consumer.assignors: "
            f"the assignors are {', '.join(sorted(ASSIGNORS))}"
        )
    return names


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
        consumer_session_timeout_ms=config.get("group.consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms=config.get("group.consumer.heartbeat.interval.ms"),
        consumer_assignment_interval_ms=config.get("group.consumer.assignment.interval.ms"),
        consumer_max_size=config.get("group.consumer.max.size"),
        consumer_assignors=_assignor_names(config.get("group.consumer.assignors")),
        consumer_migration_policy=MigrationPolicy(config.get("group.consumer.migration.policy")),
        share_session_timeout_ms=config.get("group.share.session.timeout.ms"),
        share_heartbeat_interval_ms=config.get("group.share.heartbeat.interval.ms"),
        share_max_size=config.get("group.share.max.size"),
    )


class GroupCoordinator:
    """Drives the group state machine for the offsets partitions this broker leads."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        config = broker.config
        self.state = StateTopic(
            broker,
            StateTopicSettings(
                name=OFFSETS_TOPIC,
                num_partitions=config.offsets_topic_num_partitions,
                replication_factor=config.offsets_topic_replication_factor,
                segment_bytes=config.get("offsets.topic.segment.bytes"),
                min_insync_replicas=None,
                write_timeout_ms=config.get("offsets.commit.timeout.ms"),
            ),
            self,
        )
        self.topics = MetadataTopics(broker.metadata)
        self.core = GroupStateMachine(
            group_config(broker),
            lambda: int(broker.clock() * 1000),
            config.offsets_topic_num_partitions,
            topics=self.topics,
            consumer_settings=self._consumer_settings,
            share_settings=self._share_settings,
        )
        self._waiters: dict[int, asyncio.Future[Result]] = {}
        self._next_token = 0
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # (groups with state, groups with offsets) per partition loaded since the last summary.
        self._loaded_summary: dict[int, tuple[int, int]] = {}
        # Group metadata writes waiting for their ISR before the core hears the outcome.
        self._store_tasks: set[asyncio.Task[None]] = set()
        # OffsetCommits written but not applied yet, by group.
        self._pending_commits: dict[str, list[_PendingCommit]] = {}

    def _share_settings(self, group_id: str) -> ConsumerGroupSettings:
        """A share group's session timeout and heartbeat interval: its GROUP configs, else the
        broker's group.share.* settings."""
        overrides = self._broker.metadata.group_configs().get(group_id, {})
        value = self._broker.config.get
        return ConsumerGroupSettings(
            group_configs.effective("share.session.timeout.ms", overrides, value),
            group_configs.effective("share.heartbeat.interval.ms", overrides, value),
        )

    def _consumer_settings(self, group_id: str) -> ConsumerGroupSettings:
        """A consumer group's session timeout, heartbeat and assignment intervals: its GROUP
        configs, else the broker's group.consumer.* settings."""
        overrides = self._broker.metadata.group_configs().get(group_id, {})
        value = self._broker.config.get
        return ConsumerGroupSettings(
            group_configs.effective("consumer.session.timeout.ms", overrides, value),
            group_configs.effective("consumer.heartbeat.interval.ms", overrides, value),
            group_configs.effective("consumer.assignment.interval.ms", overrides, value),
        )

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        await self.state.start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run_timers()),
            loop.create_task(self._expire_periodically()),
        ]

    async def stop(self) -> None:
        """Stop coordinating: pending JoinGroup/SyncGroup requests are answered with
        NOT_COORDINATOR, so their clients look for the coordinator again."""
        tasks = [*self._tasks, *self._store_tasks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.state.stop()

    async def wait_loaded(self) -> None:
        """Until every partition being loaded is loaded (for tests and start-up)."""
        await self.state.wait_loaded()

    # --- the offsets topic's partitions (StateOwner) -------------------------------------

    def begin_load(self, index: int) -> LoadedState:
        self.core.num_offsets_partitions = self.state.num_partitions
        self.core.begin_load(index)
        return LoadedState()

    def complete_load(self, index: int, loader: StateLoader) -> None:
        assert isinstance(loader, LoadedState)
        self.core.complete_load(index, loader)
        self._loaded_summary[index] = (len(loader.groups), len(loader.offsets))
        log.debug(
            "loaded %s-%d: %d groups with state, %d with offsets",
            OFFSETS_TOPIC,
            index,
            len(loader.groups),
            len(loader.offsets),
        )
        if not self.state.loading:
            self._log_load_summary()

    def unload(self, index: int) -> None:
        self.core.num_offsets_partitions = self.state.num_partitions
        self._perform(self.core.unload(index))

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
            if isinstance(effect, InitializeShareState):
                self._spawn(self._initialize_share_state(effect))
                continue
            if isinstance(effect, StoreRecords):
                records = list(effect.records)
                stored = self.core.records_stored
            else:
                records = [(GroupKey(effect.group_id), effect.value)]
                stored = self.core.group_stored
            write = self._start_write(effect.group_id, records)
            if isinstance(write, ErrorCode):
                pending[0:0] = stored(effect.store_id, _reported(write, _GROUP_STORE_ERRORS))
            else:
                self._spawn(self._finish_store(effect.store_id, write, stored))
        self._wake.set()

    async def _initialize_share_state(self, effect: InitializeShareState) -> None:
        """Set up share-partition state at the share coordinator (start offset -1: the
        leader applies share.auto.offset.reset), then tell the core."""
        requests = [
            (topic_id, partition, effect.state_epoch, -1)
            for topic_id, partition in effect.partitions
        ]
        try:
            outcome = await self._broker.share_persister.initialize(effect.group_id, requests)
        except Exception:
            log.exception("initializing share partitions of group %s failed", effect.group_id)
            outcome = dict.fromkeys(effect.partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self._perform(self.core.share_state_initialized(effect.group_id, outcome))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._store_tasks.add(task)
        task.add_done_callback(self._store_tasks.discard)

    async def _finish_store(
        self,
        store_id: int,
        write: PendingWrite,
        stored: Callable[[int, ErrorCode], list[Effect]],
    ) -> None:
        error = _reported(await self.state.finish_write(write), _GROUP_STORE_ERRORS)
        self._perform(stored(store_id, error))

    def _index(self, group_id: str) -> int:
        return partition_for(group_id, self.core.num_offsets_partitions)

    @staticmethod
    def _encoded(records: list[Record]) -> list[KeyValue]:
        return [(encode_key(key), encode_value(value)) for key, value in records]

    def _start_write(self, group_id: str, records: list[Record]) -> PendingWrite | ErrorCode:
        return self.state.start_write(self._index(group_id), self._encoded(records))

    async def store(
        self, group_id: str, records: list[Record], producer: TxnProducer | None = None
    ) -> ErrorCode:
        """Write offsets of one group with acks=all (in ``producer``'s transaction when
        given); the error to report."""
        if not records:
            return ErrorCode.NONE
        error = await self.state.write(self._index(group_id), self._encoded(records), producer)
        return _reported(error, _COMMIT_ERRORS)

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
        appended = self.state.append(self._index(group_id), self._encoded(records), acks_all=False)
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

    async def _wait(self, token: int, effects: list[Effect], timeout_ms: int) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
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
        return await self.state.coordinator_of(partition_for(key, self.state.partition_count()))

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

    async def consumer_heartbeat(self, req: ConsumerHeartbeat) -> HeartbeatResult:
        """ConsumerGroupHeartbeat (KIP-848): answered once the group's records are stored."""
        token = self._token()
        effects = self.core.consumer_heartbeat(token, req)
        bound = self._broker.config.get("offsets.commit.timeout.ms")
        result = await self._wait(token, effects, bound)
        assert isinstance(result, HeartbeatResult)
        return result

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        return self.core.describe_consumer_group(group_id)

    async def share_heartbeat(self, req: ShareHeartbeat) -> HeartbeatResult:
        """ShareGroupHeartbeat (KIP-932): answered once the group's records are stored."""
        token = self._token()
        effects = self.core.share_heartbeat(token, req)
        bound = self._broker.config.get("offsets.commit.timeout.ms")
        result = await self._wait(token, effects, bound)
        assert isinstance(result, HeartbeatResult)
        return result

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        return self.core.describe_share_group(group_id)

    async def change_share_partitions(
        self,
        group_id: str,
        initialized: list[tuple[uuid.UUID, int]],
        removed_topics: list[uuid.UUID],
    ) -> AdminResult:
        """Record a share group's partitions set up or deleted (kbroker/share/offsets.py)."""
        token = self._token()
        effects = self.core.change_share_partitions(token, group_id, initialized, removed_topics)
        bound = self._broker.config.get("offsets.commit.timeout.ms")
        result = await self._wait(token, effects, bound)
        assert isinstance(result, AdminResult)
        return result

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self.core.heartbeat(group_id, member_id, group_instance_id, generation_id)
        self._wake.set()
        return error

    async def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup: answered at once for a classic group, once the members' removal is
        stored for a consumer group (KIP-848's classic members)."""
        token = self._token()
        bound = self._broker.config.get("offsets.commit.timeout.ms")
        result = await self._wait(token, self.core.leave(token, group_id, members), bound)
        assert isinstance(result, LeaveResult)
        return result.error, list(result.member_errors)

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
        errors, accepted = self._check_offsets(group_id, member_id, generation_id, offsets)
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

    def _check_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetValue],
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetValue]]:
        """Per partition: UNKNOWN_TOPIC_OR_PARTITION or OFFSET_METADATA_TOO_LARGE; the offsets
        that pass. A consumer group member's commit at an older epoch that may not commit one
        of them commits none: every partition of a known topic gets the epoch error."""
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
        error = self.core.assignment_epoch_error(group_id, member_id, generation_id, accepted)
        if error != ErrorCode.NONE:
            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return {tp: unknown if e == unknown else error for tp, e in errors.items()}, {}
        return errors, accepted

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetValue],
        verification: TxnOffsetVerification | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: written in the producer's transaction, pending until its marker
        reaches the group's offsets partition (``complete_txn``). With ``verification``
        (KIP-890) a commit that opens the transaction on that partition is first verified
        with the transaction coordinator."""
        error = self.core.validate_txn_commit(group_id, member_id, group_instance_id, generation_id)
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        errors, accepted = self._check_offsets(group_id, member_id, generation_id, offsets)
        if not accepted:
            return errors
        producer = TxnProducer(producer_id, producer_epoch)
        if verification is not None:
            checked = await self._verify(group_id, producer, verification)
            if isinstance(checked, ErrorCode):
                errors.update(dict.fromkeys(accepted, checked))
                return errors
            producer = checked
        stored = await self.store(
            group_id,
            [(OffsetKey(group_id, t, p), value) for (t, p), value in accepted.items()],
            producer,
        )
        if stored == ErrorCode.NONE:
            self.core.add_pending_txn_offsets(group_id, producer_id, accepted)
        errors.update(dict.fromkeys(accepted, stored))
        return errors

    async def _verify(
        self, group_id: str, producer: TxnProducer, verification: TxnOffsetVerification
    ) -> TxnProducer | ErrorCode:
        """The producer with its verification guard, or the error to answer (KIP-890)."""
        index = self._index(group_id)
        partition = self._broker.partition(OFFSETS_TOPIC, index)
        if partition is None or not partition.is_leader:
            return producer  # the write answers it
        producers = partition.log.producers
        if not producers.needs_verification(producer.producer_id, producer.producer_epoch):
            return producer
        guard = producers.begin_verification(producer.producer_id, producer.producer_epoch)
        answers = await self._broker.txn_verifier.check(
            verification.transactional_id,
            producer.producer_id,
            producer.producer_epoch,
            [(OFFSETS_TOPIC, index)],
            add=verification.add,
        )
        error = produce_error(
            answers.get((OFFSETS_TOPIC, index), ErrorCode.UNKNOWN_SERVER_ERROR),
            verification.abortable_known,
        )
        if error is not None:
            producers.end_verification(guard)
            return error.code
        return TxnProducer(producer.producer_id, producer.producer_epoch, guard)

    def complete_txn(self, producer_id: int, partition: int, commit: bool) -> None:
        """A transaction marker was written to offsets partition ``partition`` (the
        WriteTxnMarkers handler's hook)."""
        self.core.complete_txn(producer_id, partition, commit)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        member: tuple[str | None, int] = (None, -1),
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetValue | None]]:
        """``member``: the (member id, member epoch) of an OffsetFetch v9+ (KIP-848)."""
        error = self.core.coordinator_error(group_id)
        if error is not None:
            return error, {}
        error = self.core.validate_fetch(group_id, *member)
        if error != ErrorCode.NONE:
            return error, {}
        return ErrorCode.NONE, self.core.committed(group_id, partitions)

    def unstable_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> set[TopicPartition]:
        """Of ``partitions``, those with a transactional commit awaiting its marker."""
        return self.core.unstable(group_id, partitions)

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error, errors, records = self.core.delete_offsets(group_id, partitions)
        stored = self.append(group_id, records)
        if stored != ErrorCode.NONE:
            return stored, {}
        return error, errors

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """DeleteGroups; a share group's share-partition state is deleted first (KIP-932),
        and the group stays if that fails."""
        failed: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            partitions = (
                self.core.share_partitions(group_id)
                if self.core.is_empty_share_group(group_id)
                else []
            )
            if partitions:
                outcome = await self._broker.share_persister.delete(group_id, partitions)
                errors_seen = [e for e in outcome.values() if e != ErrorCode.NONE]
                if errors_seen:
                    failed[group_id] = errors_seen[0]
        errors, records = self.core.delete_groups([g for g in group_ids if g not in failed])
        errors.update(failed)
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

    def rebalances(self) -> dict[str, int]:
        """Rebalances of the groups this broker has coordinated since it started, per group
        type (kbroker/group/state_machine.py counts them)."""
        return dict(self.core.rebalances)

    def list_groups(self) -> tuple[ErrorCode, list[GroupListing]]:
        """Groups of every loaded partition; COORDINATOR_LOAD_IN_PROGRESS while one loads."""
        if self.state.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        return ErrorCode.NONE, self.core.list_groups()
