"""The share partitions this broker leads, and the share sessions of the consumers that fetch
from it (KIP-932): the async shell around the pure SharePartition and ShareSessions.

A share partition is loaded on first use: its state is read through the share persister
(kbroker/share/persister_api.py) as the partition's leader at its leader epoch; a start offset
of -1 (never set) is chosen by the group's ``share.auto.offset.reset`` (earliest, latest, or
``by_duration:`` a duration back from now). A change of leader, or of leader epoch, loads it
again. Acknowledgements, releases and expired locks change its state, which is written back
(one write at a time per partition, the latest state each time) before an acknowledgement is
answered: an acknowledged record is never delivered again, even after a crash; a record
acquired but not acknowledged when the leader dies is delivered again (at least once).

Reading: from the partition's next fetch offset up to the high watermark, or the last stable
offset for a ``share.isolation.level`` of read_committed (whose aborted transactions' records
are archived, never delivered); the batches' headers say what may be acquired, and the
response carries the whole batches that hold acquired records (the client keeps only those).
A fetch that acquires nothing waits, up to its MaxWaitMs, for new records or records made
available again (both notify the broker's fetch purgatory).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.group import group_configs
from kbroker.group.group_configs import BY_DURATION, duration_ms
from kbroker.handlers.common import leader_partition
from kbroker.metrics import Exposition
from kbroker.partition import Partition
from kbroker.share.persister_api import (
    PersisterError,
    SharePartitionState,
    StateBatch,
)
from kbroker.share.sessions import SharePartitionKey, ShareSessions
from kbroker.share.share_partition import (
    AckBatch,
    Acquired,
    AcquireMode,
    LogBatch,
    RecordState,
    Run,
    SharePartition,
)
from wire.errors import ErrorCode, KafkaError
from wire.records.batch import iter_batches
from wire.records.isolation import AbortedFilter

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

READ_COMMITTED = "read_committed"


@dataclass(slots=True)
class _Loaded:
    """One share partition of one group, as this broker leads it."""

    sp: SharePartition
    topic: str
    partition: Partition
    leader_epoch: int
    state_epoch: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The state written last, and whether a newer one is due.
    dirty: bool = False
    writing: asyncio.Task[None] | None = None


@dataclass(slots=True)
class FetchedPartition:
    """What a ShareFetch answers for one partition."""

    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: bytes = b""
    acquired: list[Acquired] = field(default_factory=list)
    ack_error: ErrorCode = ErrorCode.NONE
    ack_message: str | None = None


class SharePartitionManager:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._loaded: dict[tuple[str, uuid.UUID, int], _Loaded] = {}
        self._load_locks: dict[tuple[str, uuid.UUID, int], asyncio.Lock] = {}
        self.sessions = ShareSessions(broker.config.get("group.share.max.share.sessions"))
        self._timer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        # Releases of the records of sessions whose connection closed, under way.
        self._releasing: set[asyncio.Task[None]] = set()
        self._stopped = False

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._timer = asyncio.get_running_loop().create_task(self._expire_locks())

    async def stop(self) -> None:
        self._stopped = True
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)
        if self._timer is not None:
            # Woken as well as cancelled: Python 3.11's asyncio.wait_for drops a cancellation
            # that arrives as the event it waits on is set (a release just before the stop),
            # and the loop then ends by seeing _stopped.
            self._wake.set()
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
        for loaded in self._loaded.values():
            if loaded.writing is not None:
                with contextlib.suppress(Exception):
                    await loaded.writing

    # --- settings -------------------------------------------------------------------------

    def _setting(self, group_id: str, name: str) -> object:
        overrides = self._broker.metadata.group_configs().get(group_id, {})
        return group_configs.effective(name, overrides, self._broker.config.get)

    def lock_duration_ms(self, group_id: str) -> int:
        value = self._setting(group_id, "share.record.lock.duration.ms")
        assert isinstance(value, int)
        return value

    # --- loading --------------------------------------------------------------------------

    async def _load(self, group_id: str, key: SharePartitionKey) -> _Loaded:
        """The share partition, loaded (again) if this broker's leadership changed."""
        topic_id, index = key
        info = self._broker.metadata.topic_by_id(topic_id)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
        partition = leader_partition(self._broker, info.name, index)
        if (loaded := self._current(group_id, key, partition)) is not None:
            return loaded
        # One load at a time per share partition: members fetching together must share one
        # state, or each would acquire the same records from a copy of its own.
        lock = self._load_locks.setdefault((group_id, topic_id, index), asyncio.Lock())
        async with lock:
            if (loaded := self._current(group_id, key, partition)) is not None:
                return loaded
            return await self._read_state(group_id, key, info.name, partition)

    def _current(
        self, group_id: str, key: SharePartitionKey, partition: Partition
    ) -> _Loaded | None:
        """The share partition as loaded, if this broker's leadership has not changed."""
        loaded = self._loaded.get((group_id, *key))
        if (
            loaded is not None
            and loaded.partition is partition
            and loaded.leader_epoch == partition.leader_epoch
        ):
            return loaded
        return None

    async def _read_state(
        self, group_id: str, key: SharePartitionKey, topic: str, partition: Partition
    ) -> _Loaded:
        """Load the share partition's state through the persister, as its leader."""
        topic_id, index = key
        leader_epoch = partition.leader_epoch
        try:
            state = await self._broker.share_persister.read(group_id, topic_id, index, leader_epoch)
        except PersisterError as exc:
            raise KafkaError(_load_error(exc.code), exc.message or None) from None
        log_start = partition.log.log_start_offset
        start = state.start_offset
        if start < 0:
            start = self._reset_offset(group_id, partition)
        runs = [
            Run(b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count)
            for b in state.batches
            if b.delivery_state != RecordState.ACQUIRED
        ]
        max_delivery = self._setting(group_id, "share.delivery.count.limit")
        max_in_flight = self._setting(group_id, "share.partition.max.record.locks")
        assert isinstance(max_delivery, int) and isinstance(max_in_flight, int)
        sp = SharePartition(start, runs, max_delivery=max_delivery, max_in_flight=max_in_flight)
        sp.move_start(log_start)
        loaded = _Loaded(sp, topic, partition, leader_epoch, state.state_epoch)
        self._loaded[(group_id, topic_id, index)] = loaded
        # A start offset chosen by share.auto.offset.reset is not written until something
        # else is, as on Kafka 4.3: a partition never acknowledged keeps start offset -1, and
        # kafka-share-groups.sh shows it as "-".
        if state.start_offset >= 0 and sp.start_offset != state.start_offset:
            loaded.dirty = True
        return loaded

    def _reset_offset(self, group_id: str, partition: Partition) -> int:
        """Where a share partition without a start offset begins (share.auto.offset.reset)."""
        reset = self._setting(group_id, "share.auto.offset.reset")
        assert isinstance(reset, str)
        if reset == "earliest":
            return partition.log.log_start_offset
        if reset.startswith(BY_DURATION):
            back = duration_ms(reset[len(BY_DURATION) :]) or 0
            found = partition.log.offset_for_timestamp(int(time.time() * 1000) - back)
            if found is not None:
                return found[0]
        return partition.high_watermark

    # --- fetching -------------------------------------------------------------------------

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        keys: Sequence[SharePartitionKey],
        *,
        max_wait_ms: int,
        max_bytes: int,
        max_records: int,
        mode: AcquireMode,
    ) -> dict[SharePartitionKey, FetchedPartition]:
        """Acquire records of ``keys`` for a member, waiting up to ``max_wait_ms`` for some."""
        deadline = time.monotonic() + max(max_wait_ms, 0) / 1000
        while True:
            out = await self._fetch_once(group_id, member_id, keys, max_bytes, max_records, mode)
            got = any(p.acquired for p in out.values())
            errors = any(p.error != ErrorCode.NONE for p in out.values())
            remaining = deadline - time.monotonic()
            if got or errors or remaining <= 0 or not keys:
                return out
            waits: list[object] = [p.partition.key for p in self._loaded_of(group_id, keys)]
            waits.append(self._released_key(group_id))
            await self._broker.fetch_purgatory.wait(waits, remaining)

    def _loaded_of(self, group_id: str, keys: Iterable[SharePartitionKey]) -> list[_Loaded]:
        found = (self._loaded.get((group_id, t, p)) for t, p in keys)
        return [loaded for loaded in found if loaded is not None]

    @staticmethod
    def _released_key(group_id: str) -> tuple[str, str]:
        """The purgatory key notified when a group's records become available again."""
        return ("share-released", group_id)

    async def _fetch_once(
        self,
        group_id: str,
        member_id: str,
        keys: Sequence[SharePartitionKey],
        max_bytes: int,
        max_records: int,
        mode: AcquireMode,
    ) -> dict[SharePartitionKey, FetchedPartition]:
        out: dict[SharePartitionKey, FetchedPartition] = {}
        budget_bytes = max_bytes
        budget_records = max_records
        lock_ms = self.lock_duration_ms(group_id)
        read_committed = self._setting(group_id, "share.isolation.level") == READ_COMMITTED
        for key in keys:
            answer = FetchedPartition(*key)
            out[key] = answer
            if budget_records <= 0 or budget_bytes <= 0:
                continue
            try:
                loaded = await self._load(group_id, key)
            except KafkaError as exc:
                answer.error, answer.message = exc.code, exc.message
                continue
            async with loaded.lock:
                records, acquired = self._acquire(
                    loaded, member_id, budget_bytes, budget_records, mode, lock_ms, read_committed
                )
            answer.records, answer.acquired = records, acquired
            budget_bytes -= len(records)
            budget_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
        self._wake.set()
        return out

    def _acquire(
        self,
        loaded: _Loaded,
        member_id: str,
        max_bytes: int,
        max_records: int,
        mode: AcquireMode,
        lock_ms: int,
        read_committed: bool,
    ) -> tuple[bytes, list[Acquired]]:
        partition = loaded.partition
        sp = loaded.sp
        sp.move_start(partition.log.log_start_offset)
        start = sp.next_fetch_offset()
        upper = partition.last_stable_offset if read_committed else partition.high_watermark
        found = partition.log.read_with_end(start, max_bytes, max_offset=upper, min_one_batch=True)
        if found is None:
            return b"", []
        region, end_offset = found
        data = region.read()
        aborted = (
            AbortedFilter(
                (t.producer_id, t.first_offset)
                for t in partition.log.aborted_transactions(start, end_offset)
            )
            if read_committed
            else None
        )
        batches: list[LogBatch] = []
        spans: list[tuple[int, int, int, int]] = []  # base, last, position, size
        for position, header in iter_batches(data):
            # The filter sees every batch, control ones included: an ABORT marker is how it
            # learns that a producer's aborted transaction ended.
            dropped = aborted is not None and aborted.drop(
                header, memoryview(data)[position : position + header.size]
            )
            skip = header.is_control or dropped
            batches.append(LogBatch(header.base_offset, header.last_offset, skip))
            spans.append((header.base_offset, header.last_offset, position, header.size))
        acquired = sp.acquire(
            member_id, batches, max_records, mode, int(time.time() * 1000), lock_ms
        )
        if not acquired:
            return b"", []
        first = acquired[0].first_offset
        last = acquired[-1].last_offset
        chosen = [(p, s) for base, end, p, s in spans if end >= first and base <= last]
        begin = chosen[0][0]
        finish = chosen[-1][0] + chosen[-1][1]
        return data[begin:finish], acquired

    # --- acknowledging --------------------------------------------------------------------

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        acks: dict[SharePartitionKey, list[AckBatch]],
        renew: bool,
    ) -> dict[SharePartitionKey, tuple[ErrorCode, str | None]]:
        """Apply acknowledgements, each partition's all or none, and store the states they
        changed before answering."""
        out: dict[SharePartitionKey, tuple[ErrorCode, str | None]] = {}
        lock_ms = self.lock_duration_ms(group_id)
        written: list[tuple[SharePartitionKey, _Loaded]] = []
        for key, batches in acks.items():
            try:
                loaded = await self._load(group_id, key)
                async with loaded.lock:
                    loaded.sp.acknowledge(
                        member_id, batches, int(time.time() * 1000), lock_ms, renew
                    )
                    loaded.dirty = True
            except KafkaError as exc:
                out[key] = (exc.code, exc.message)
                continue
            written.append((key, loaded))
        for key, loaded in written:
            out[key] = await self._store(group_id, key, loaded)
        self._notify_released(group_id)
        return out

    async def release(
        self, group_id: str, member_id: str, keys: Iterable[SharePartitionKey]
    ) -> None:
        """A member's session ended: what it holds becomes available to the others."""
        for key in keys:
            loaded = self._loaded.get((group_id, *key))
            if loaded is None:
                continue
            async with loaded.lock:
                if loaded.sp.release_member(member_id):
                    loaded.dirty = True
            await self._store(group_id, key, loaded)
        self._notify_released(group_id)

    def connection_closed(self, connection_id: int) -> None:
        """A client's connection closed: the share sessions it opened end and their members'
        acquired records become available to the others at once, as Kafka 4.3 releases them
        (a consumer that crashed does not hold its records until their locks expire). The
        delivery count stays as it is: the delivery happened."""
        if self._stopped:
            return
        for session in self.sessions.connection_closed(connection_id):
            task = asyncio.get_running_loop().create_task(
                self.release(session.group_id, session.member_id, session.partitions)
            )
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    def _notify_released(self, group_id: str) -> None:
        self._broker.fetch_purgatory.notify(self._released_key(group_id))
        self._wake.set()

    async def _store(
        self, group_id: str, key: SharePartitionKey, loaded: _Loaded
    ) -> tuple[ErrorCode, str | None]:
        """Write the partition's state if it changed; the error to report."""
        while loaded.dirty:
            loaded.dirty = False
            written = loaded.sp.state_to_write()
            state = SharePartitionState(
                state_epoch=loaded.state_epoch,
                start_offset=written.start_offset,
                batches=tuple(
                    StateBatch(r.first, r.last, int(r.state), r.delivery_count)
                    for r in written.runs
                ),
                leader_epoch=loaded.leader_epoch,
                delivery_complete_count=written.delivery_complete_count,
            )
            try:
                await self._broker.share_persister.write(group_id, key[0], key[1], state)
                loaded.sp.written(written)
            except PersisterError as exc:
                loaded.dirty = True
                if exc.code in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
                    # Another writer has the partition: load it again at the next use.
                    self._loaded.pop((group_id, *key), None)
                return exc.code, exc.message or None
        return ErrorCode.NONE, None

    # --- expired locks --------------------------------------------------------------------

    async def _expire_locks(self) -> None:
        while not self._stopped:
            deadlines = [
                d
                for loaded in self._loaded.values()
                if (d := loaded.sp.next_deadline()) is not None
            ]
            now_ms = int(time.time() * 1000)
            timeout = None if not deadlines else max(0.0, (min(deadlines) - now_ms) / 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()
            now_ms = int(time.time() * 1000)
            for (group_id, topic_id, index), loaded in list(self._loaded.items()):
                if loaded.sp.next_deadline() is None or loaded.sp.next_deadline() > now_ms:
                    continue
                if loaded.sp.expire_locks(now_ms):
                    loaded.dirty = True
                    self._notify_released(group_id)
                    self._spawn_store(group_id, (topic_id, index), loaded)

    def _spawn_store(self, group_id: str, key: SharePartitionKey, loaded: _Loaded) -> None:
        if loaded.writing is not None and not loaded.writing.done():
            return
        loaded.writing = asyncio.get_running_loop().create_task(
            self._store_quietly(group_id, key, loaded)
        )

    async def _store_quietly(self, group_id: str, key: SharePartitionKey, loaded: _Loaded) -> None:
        error, message = await self._store(group_id, key, loaded)
        if error != ErrorCode.NONE:
            log.warning(
                "share group %s, %s: state not stored: %s %s",
                group_id,
                key,
                error.name,
                message or "",
            )

    def forget_group(self, group_id: str) -> None:
        """The group's share-partition state changed elsewhere (its offsets were altered or
        deleted): load it again at the next use."""
        for key in [k for k in self._loaded if k[0] == group_id]:
            del self._loaded[key]

    # --- describing -----------------------------------------------------------------------

    def expose(self, out: Exposition) -> None:
        """Share groups' metrics, for the share partitions this broker leads."""
        rows = [
            ((("group", group_id), ("topic", loaded.topic), ("partition", str(index))), loaded)
            for (group_id, _, index), loaded in sorted(
                self._loaded.items(), key=lambda item: (item[0][0], item[1].topic, item[0][2])
            )
        ]
        out.family(
            "kbroker_share_group_lag",
            "gauge",
            "Records from the share-partition start offset to the high watermark not yet "
            "acknowledged or archived (KIP-1226).",
        )
        for labels, loaded in rows:
            lag = loaded.partition.high_watermark - loaded.sp.start_offset - _done(loaded.sp)
            out.sample("kbroker_share_group_lag", labels, max(lag, 0))
        out.family("kbroker_share_records_in_flight", "gauge", "In-flight records by state.")
        for labels, loaded in rows:
            for state, count in loaded.sp.counts().items():
                state_label = ("state", state.name.lower())
                out.sample("kbroker_share_records_in_flight", (*labels, state_label), count)
        counters = (
            ("kbroker_share_records_delivered_total", "Records handed out.", "delivered"),
            (
                "kbroker_share_records_redelivered_total",
                "Records handed out again (a delivery after the first).",
                "redelivered",
            ),
            (
                "kbroker_share_lock_expiries_total",
                "Records whose acquisition lock expired.",
                "lock_expired",
            ),
        )
        for name, help_text, attribute in counters:
            out.family(name, "counter", help_text)
            for labels, loaded in rows:
                out.sample(name, labels, getattr(loaded.sp, attribute))


def _done(sp: SharePartition) -> int:
    counts = sp.counts()
    return counts[RecordState.ACKNOWLEDGED] + counts[RecordState.ARCHIVED]


def _load_error(code: ErrorCode) -> ErrorCode:
    """A persister error as a client should see it while its partition loads."""
    if code in _UNREACHABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return code


_UNREACHABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
