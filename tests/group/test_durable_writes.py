"""The coordinator's writes to __consumer_offsets follow acks=all (with expiry and deletes
staying consistent with commits still waiting), a partition loads only what is committed, and
start-up logs one summary line.

An in-process broker leads every offsets partition alone; a test gives one partition a second,
imaginary ISR member (replica 99) whose fetches the test drives, so the high watermark moves
only when the test says.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from kbroker import state_topic as state_topic_module
from kbroker.broker import Broker
from kbroker.group import coordinator as coordinator_module
from kbroker.group.events import JoinRequest, JoinResult, SyncRequest, SyncResult
from kbroker.group.offsets_store import OFFSETS_TOPIC, OffsetKey, OffsetValue
from kbroker.partition import Partition
from tests.group.conftest import StartBroker
from wire.errors import ErrorCode

TOPIC = "events"
GROUP = "g"
FOLLOWER = 99


def _offset(offset: int, expire_timestamp: int = -1) -> OffsetValue:
    return OffsetValue(
        offset=offset,
        metadata="",
        commit_timestamp=0,
        leader_epoch=-1,
        expire_timestamp=expire_timestamp,
    )


def _partition(broker: Broker, group: str = GROUP) -> Partition:
    partition = broker.partition(OFFSETS_TOPIC, broker.group_coordinator.core.partition_for(group))
    assert partition is not None
    return partition


def _add_lagging_follower(partition: Partition) -> None:
    """Make replica 99 an ISR member that has fetched nothing yet."""
    me = partition.broker_id
    partition.make_leader(
        partition.leader_epoch, (me, FOLLOWER), (me, FOLLOWER), time.time() * 1000
    )


def _follower_catches_up(partition: Partition) -> None:
    partition.on_follower_fetch(FOLLOWER, partition.log.log_end_offset, time.time() * 1000)


def _committed(broker: Broker, group: str = GROUP) -> int | None:
    value = broker.group_coordinator.core.committed(group, [(TOPIC, 0)])[(TOPIC, 0)]
    return None if value is None else value.offset


def _all_committed(broker: Broker) -> dict[tuple[str, int], int]:
    committed = broker.group_coordinator.core.committed(GROUP, None)
    return {tp: value.offset for tp, value in committed.items() if value is not None}


async def _commit(
    broker: Broker, offset: int, partition: int = 0, expire_timestamp: int = -1
) -> ErrorCode:
    errors = await broker.group_coordinator.commit_offsets(
        GROUP, "", None, -1, 2, {(TOPIC, partition): _offset(offset, expire_timestamp)}
    )
    return errors[(TOPIC, partition)]


async def _reload(broker: Broker) -> None:
    """Unload and load the group's offsets partition again, from the log."""
    coordinator = broker.group_coordinator
    index = _partition(broker).index
    coordinator.core.unload(index)
    await asyncio.wait_for(coordinator.state._load(index, coordinator.begin_load(index)), 5)


@pytest.fixture
async def broker(start_broker: StartBroker) -> Broker:
    b = await start_broker(**{"offsets.commit.timeout.ms": "500"})
    await b.metadata.create_topic(TOPIC, 2, 1)
    return b


async def test_commit_waits_for_the_isr(broker: Broker) -> None:
    partition = _partition(broker)
    _add_lagging_follower(partition)
    commit = asyncio.create_task(_commit(broker, 7))
    await asyncio.sleep(0.1)
    assert not commit.done()
    assert _committed(broker) is None
    _follower_catches_up(partition)
    assert await asyncio.wait_for(commit, 5) == ErrorCode.NONE
    assert _committed(broker) == 7
    assert partition.high_watermark == partition.log.log_end_offset


async def test_commit_not_replicated_in_time_is_not_applied(broker: Broker) -> None:
    _add_lagging_follower(_partition(broker))
    assert await _commit(broker, 7) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert _committed(broker) is None


async def test_commit_refused_below_min_insync_replicas(start_broker: StartBroker) -> None:
    broker = await start_broker(**{"min.insync.replicas": "2"})
    await broker.metadata.create_topic(TOPIC, 1, 1)
    # Two replicas, one in sync: min.insync.replicas=2 applies (Kafka caps it at the replica
    # count, so a one-replica partition would take the write).
    partition = _partition(broker)
    me = partition.broker_id
    partition.make_leader(partition.leader_epoch, (me, FOLLOWER), (me,), time.time() * 1000)
    end = partition.log.log_end_offset
    assert await _commit(broker, 7) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert _partition(broker).log.log_end_offset == end
    assert _committed(broker) is None


async def test_outcomes_are_applied_in_log_order(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The later commit's wait ends first; the earlier one must not overwrite it."""
    finished: dict[int, asyncio.Event] = {}

    async def controlled(
        broker_: Broker, writes: list[tuple[Partition, int]], timeout_ms: int
    ) -> list[ErrorCode]:
        ((_, last_offset),) = writes
        finished[last_offset] = asyncio.Event()
        await finished[last_offset].wait()
        return [ErrorCode.NONE]

    monkeypatch.setattr(state_topic_module, "await_replication", controlled)
    first = asyncio.create_task(_commit(broker, 1))
    second = asyncio.create_task(_commit(broker, 2))
    await asyncio.sleep(0.05)
    earlier, later = sorted(finished)
    finished[later].set()
    await asyncio.sleep(0.05)
    assert not second.done()
    finished[earlier].set()
    assert await first == await second == ErrorCode.NONE
    assert _committed(broker) == 2


async def _join_then_sync_with_lagging_isr(broker: Broker) -> asyncio.Task[JoinResult | SyncResult]:
    """A one-member group joins; its SyncGroup starts once replica 99 lags in the ISR."""
    coordinator = broker.group_coordinator
    join = JoinRequest(
        group_id=GROUP,
        member_id="",
        group_instance_id=None,
        client_id="c",
        client_host="/127.0.0.1",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=(("range", b""),),
        require_known_member_id=False,
    )
    joined = await coordinator.join(join)
    assert isinstance(joined, JoinResult) and joined.error == ErrorCode.NONE
    _add_lagging_follower(_partition(broker))
    sync = SyncRequest(
        group_id=GROUP,
        member_id=joined.member_id,
        group_instance_id=None,
        generation_id=joined.generation_id,
        protocol_type=None,
        protocol_name=None,
        assignments=((joined.member_id, b"mine"),),
    )
    task = asyncio.create_task(coordinator.sync(sync))
    await asyncio.sleep(0.1)
    return task


async def test_sync_group_answers_after_the_isr_has_the_assignment(broker: Broker) -> None:
    sync = await _join_then_sync_with_lagging_isr(broker)
    assert not sync.done()
    _follower_catches_up(_partition(broker))
    result = await asyncio.wait_for(sync, 5)
    assert isinstance(result, SyncResult)
    assert (result.error, result.assignment) == (ErrorCode.NONE, b"mine")


async def test_sync_group_not_replicated_in_time_asks_for_a_rebalance(broker: Broker) -> None:
    result = await asyncio.wait_for(await _join_then_sync_with_lagging_isr(broker), 5)
    assert isinstance(result, SyncResult)
    assert result.error == ErrorCode.REBALANCE_IN_PROGRESS


async def test_load_reads_only_below_the_high_watermark(broker: Broker) -> None:
    coordinator = broker.group_coordinator
    assert await _commit(broker, 5) == ErrorCode.NONE
    partition = _partition(broker)
    _add_lagging_follower(partition)
    # Appended but not replicated: not committed yet.
    assert coordinator.append(GROUP, [(OffsetKey(GROUP, TOPIC, 0), _offset(9))]) == ErrorCode.NONE
    index = partition.index
    coordinator.core.unload(index)
    load = asyncio.create_task(coordinator.state._load(index, coordinator.begin_load(index)))
    await asyncio.sleep(0.1)
    assert coordinator.core.coordinator_error(GROUP) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    _follower_catches_up(partition)
    await asyncio.wait_for(load, 5)
    assert coordinator.core.coordinator_error(GROUP) is None
    assert _committed(broker) == 9


async def test_start_up_logs_one_summary_line(
    start_broker: StartBroker, caplog: pytest.LogCaptureFixture
) -> None:
    broker = await start_broker()
    await broker.metadata.create_topic(TOPIC, 1, 1)
    assert await _commit(broker, 3) == ErrorCode.NONE
    await broker.stop()
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger=coordinator_module.__name__)
    await start_broker()
    records = [r for r in caplog.records if r.name == coordinator_module.__name__]
    info = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert info == [f"loaded 3 {OFFSETS_TOPIC} partitions: 0 groups with state, 1 with offsets"]
    per_partition = [r for r in records if r.getMessage().startswith(f"loaded {OFFSETS_TOPIC}-")]
    assert len(per_partition) == 3
    assert {r.levelno for r in per_partition} == {logging.DEBUG}


async def test_commit_fails_when_leadership_moves_while_waiting(broker: Broker) -> None:
    partition = _partition(broker)
    _add_lagging_follower(partition)
    commit = asyncio.create_task(_commit(broker, 7))
    await asyncio.sleep(0.05)
    partition.make_follower(
        FOLLOWER, partition.leader_epoch + 1, (partition.broker_id, FOLLOWER), (FOLLOWER,)
    )
    assert await asyncio.wait_for(commit, 5) == ErrorCode.NOT_COORDINATOR
    assert _committed(broker) is None


@pytest.mark.parametrize("pending_partition", [0, 1])
async def test_expiry_spares_pending_commits_and_their_group(
    broker: Broker, pending_partition: int
) -> None:
    """Partition 0's offset has expired. A commit waiting for the ISR keeps its partition
    (0) from expiring, or (1) keeps the group, left without other offsets, from deletion."""
    assert await _commit(broker, 1, expire_timestamp=1) == ErrorCode.NONE
    partition = _partition(broker)
    _add_lagging_follower(partition)
    commit = asyncio.create_task(_commit(broker, 2, partition=pending_partition))
    await asyncio.sleep(0.05)
    broker.group_coordinator.expire_offsets()
    _follower_catches_up(partition)
    assert await asyncio.wait_for(commit, 5) == ErrorCode.NONE
    assert _all_committed(broker) == {(TOPIC, pending_partition): 2}
    await _reload(broker)
    assert _all_committed(broker) == {(TOPIC, pending_partition): 2}


async def test_offset_deleted_while_its_commit_waits_stays_deleted(broker: Broker) -> None:
    assert await _commit(broker, 1) == ErrorCode.NONE
    partition = _partition(broker)
    _add_lagging_follower(partition)
    commit = asyncio.create_task(_commit(broker, 2))
    await asyncio.sleep(0.05)
    error, errors = broker.group_coordinator.delete_offsets(GROUP, [(TOPIC, 0)])
    assert (error, errors) == (ErrorCode.NONE, {(TOPIC, 0): ErrorCode.NONE})
    _follower_catches_up(partition)
    assert await asyncio.wait_for(commit, 5) == ErrorCode.NONE
    assert _all_committed(broker) == {}
    await _reload(broker)
    assert _all_committed(broker) == {}


async def test_group_deleted_while_a_commit_waits_keeps_only_later_commits(
    broker: Broker,
) -> None:
    partition = _partition(broker)
    assert await _commit(broker, 1, partition=1) == ErrorCode.NONE
    _add_lagging_follower(partition)
    before = asyncio.create_task(_commit(broker, 2))
    await asyncio.sleep(0.05)
    assert await broker.group_coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.NONE}
    after = asyncio.create_task(_commit(broker, 3, partition=1))
    await asyncio.sleep(0.05)
    _follower_catches_up(partition)
    assert await asyncio.wait_for(before, 5) == ErrorCode.NONE
    assert await asyncio.wait_for(after, 5) == ErrorCode.NONE
    assert _all_committed(broker) == {(TOPIC, 1): 3}
    await _reload(broker)
    assert _all_committed(broker) == {(TOPIC, 1): 3}
