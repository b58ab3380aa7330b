"""A log directory that refuses writes goes offline, as in Kafka (KIP-112; the chaos disk
schedules of issue 15): its partitions answer KAFKA_STORAGE_ERROR, the other directories'
partitions are served, a broker with no directory left shuts down by itself, and a restart
after space returns recovers every acknowledged record."""

from __future__ import annotations

import asyncio
import errno
import os
import time
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.log import log_manager, segment
from kbroker.log.log_config import LogConfig
from kbroker.log.log_manager import CLEAN_SHUTDOWN_FILE
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_data_path import create_topic, fetch, produce, records
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.records.record import build_batch, decode_records


def _produce_both(topic: str) -> ProduceRequest:
    return ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[
                    PartitionProduceData(index=i, records=build_batch(records(0, 1)))
                    for i in range(2)
                ],
            )
        ],
    )


def _refuse_writes_to(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, topic: str, index: int
) -> None:
    """The device under one partition's log is full from now on."""
    full = broker.partition(topic, index)
    assert full is not None
    fd = full.log.active_segment.fd
    real_write_all = segment.write_all

    def refuse(target: int, data: bytes | bytearray | memoryview) -> None:
        if target == fd:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write_all(target, data)

    monkeypatch.setattr(segment, "write_all", refuse)


async def test_the_failed_directory_goes_offline_and_the_other_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    config = broker_config(dirs[0], free_port(), log_dirs=",".join(map(str, dirs)))
    broker = Broker(config)
    await broker.start()
    client = await RawClient.connect(broker.port)
    try:
        await create_topic(client, "disk", partitions=2)
        assert {broker.logs.dir_of("disk", i).parent for i in range(2)} == set(dirs)
        failing = broker.logs.dir_of("disk", 0).parent
        first = await produce(client, "disk", build_batch(records(0, 3)))
        assert first.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        _refuse_writes_to(broker, monkeypatch, "disk", 0)
        response = await client.call(ApiKey.PRODUCE, 9, _produce_both("disk"))
        codes = [p.error_code for p in response.responses[0].partition_responses]
        assert codes == [ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NONE]
        assert broker.logs.offline_dirs == [failing]
        # Offline until the broker restarts, for reads too; the broker itself goes on.
        monkeypatch.undo()
        again = await produce(client, "disk", build_batch(records(0, 1)))
        assert again.responses[0].partition_responses[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        read = await fetch(client, broker, "disk", 0)
        assert read.responses[0].partitions[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert not broker.stop_requested.is_set()
    finally:
        await client.close()
        await broker.stop()
    # The failed directory got no clean-shutdown marker: the next start recovers it.
    assert not (failing / CLEAN_SHUTDOWN_FILE).exists()
    restarted = Broker(config)
    await restarted.start()
    client = await RawClient.connect(restarted.port)
    try:
        read = await fetch(client, restarted, "disk", 0)
        data = read.responses[0].partitions[0]
        assert data.error_code == ErrorCode.NONE
        assert [r.offset for r in decode_records(bytes(data.records))] == [0, 1, 2]
    finally:
        await client.close()
        await restarted.stop()


def _refuse_checkpoints_in(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The device under ``log_dir`` takes no more checkpoint files (the high-watermark,
    log-start and recovery-point checkpoints all go through the log manager's atomic
    write, which its background syncer makes in the directory it opened)."""
    real_atomic_write_in = log_manager.atomic_write_in

    def refuse(dir_fd: int, name: str, data: bytes) -> None:
        if Path(os.readlink(f"/proc/self/fd/{dir_fd}")) == log_dir:
            os.close(dir_fd)
            raise OSError(errno.ENOSPC, "No space left on device")
        real_atomic_write_in(dir_fd, name, data)

    monkeypatch.setattr(log_manager, "atomic_write_in", refuse)


async def _wait_offline(broker: Broker, log_dir: Path) -> None:
    """The syncer's failure report reaches the broker through its event loop."""
    assert broker.logs.syncer.wait_idle(30)
    deadline = time.monotonic() + 30
    while log_dir not in broker.logs.offline_dirs:
        assert time.monotonic() < deadline, "the directory never went offline"
        await asyncio.sleep(0.01)


async def test_a_failed_checkpoint_takes_its_directory_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Kafka does, a high-watermark checkpoint that cannot be written takes its
    directory offline (the chaos runs saw a broker with a full disk go on leading after
    its checkpoint failed); the other directory is served, and is checkpointed."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    broker = Broker(broker_config(dirs[0], free_port(), log_dirs=",".join(map(str, dirs))))
    await broker.start()
    client = await RawClient.connect(broker.port)
    try:
        await create_topic(client, "hw", partitions=2)
        failing = broker.logs.dir_of("hw", 0).parent
        healthy = broker.logs.dir_of("hw", 1).parent
        response = await client.call(ApiKey.PRODUCE, 9, _produce_both("hw"))
        codes = [p.error_code for p in response.responses[0].partition_responses]
        assert codes == [ErrorCode.NONE, ErrorCode.NONE]
        _refuse_checkpoints_in(failing, monkeypatch)
        broker.replica_manager.checkpoint()
        await _wait_offline(broker, failing)
        assert broker.logs.offline_dirs == [failing]
        response = await client.call(ApiKey.PRODUCE, 9, _produce_both("hw"))
        codes = [p.error_code for p in response.responses[0].partition_responses]
        assert codes == [ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NONE]
        assert broker.logs.syncer.wait_idle(30)
        assert "hw 1 1" in (healthy / "replication-offset-checkpoint").read_text()
    finally:
        await client.close()
        await broker.stop()


def test_the_periodic_flush_reports_a_directory_whose_checkpoint_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint written by flush_due fails in the background: the syncer names the
    directory (the broker takes it offline) instead of raising (which ended the broker's
    periodic flush for good), writes the other directory's checkpoints, and the failed
    directory gets no clean-shutdown marker."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = log_manager.LogManager(dirs)
    manager.open_all()
    for index in range(2):
        manager.get_or_create("t", index, LogConfig())
    assert {manager.dir_of("t", i).parent for i in range(2)} == set(dirs)
    failing = manager.dir_of("t", 0).parent
    healthy = manager.dir_of("t", 1).parent
    for index in range(2):
        plog = manager.get("t", index)
        assert plog is not None
        batch = bytearray(build_batch(records(0, 3)))
        plog.append_as_leader(batch, leader_epoch=0, log_append_time_ms=None)
        plog.delete_records_before(1)
    _refuse_checkpoints_in(failing, monkeypatch)
    failures: list[tuple[Path, OSError]] = []
    manager.syncer.on_failure = lambda log_dir, exc: failures.append((log_dir, exc))
    assert manager.flush_due() == []
    assert manager.syncer.wait_idle(30)
    assert {log_dir for log_dir, _ in failures} == {failing}
    assert all(exc.errno == errno.ENOSPC for _, exc in failures)
    assert "t 1 1" in (healthy / "log-start-offset-checkpoint").read_text()
    manager.shutdown()
    assert (healthy / CLEAN_SHUTDOWN_FILE).exists()
    assert not (failing / CLEAN_SHUTDOWN_FILE).exists()


async def test_with_no_directory_left_the_broker_shuts_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = Broker(broker_config(tmp_path / "data", free_port()))
    await broker.start()
    client = await RawClient.connect(broker.port)
    try:
        await create_topic(client, "disk", partitions=2)
        _refuse_writes_to(broker, monkeypatch, "disk", 0)
        response = await client.call(ApiKey.PRODUCE, 9, _produce_both("disk"))
        codes = [p.error_code for p in response.responses[0].partition_responses]
        assert codes == [ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.KAFKA_STORAGE_ERROR]
        assert broker.stop_requested.is_set()
    finally:
        await client.close()
        await broker.stop()


async def test_a_coordinator_write_refused_by_the_disk_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An offset commit the log directory refuses: the directory goes offline and the
    group coordinator answers NOT_COORDINATOR (Kafka's mapping of storage errors)."""
    broker = Broker(broker_config(tmp_path / "data", free_port(), offsets_topic_num_partitions="1"))
    await broker.start()
    client = await RawClient.connect(broker.port)
    try:
        await create_topic(client, "disk")
        commit = OffsetCommitRequest(
            group_id="g",
            topics=[
                OffsetCommitRequestTopic(
                    name="disk",
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=0, committed_offset=1)
                    ],
                )
            ],
        )
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            first = await client.call(ApiKey.OFFSET_COMMIT, 8, commit)
            code = first.topics[0].partitions[0].error_code
            if code == ErrorCode.NONE or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)  # the coordinator is still loading
        assert code == ErrorCode.NONE

        def refuse(fd: int, data: bytes | bytearray | memoryview) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(segment, "write_all", refuse)
        refused = await client.call(ApiKey.OFFSET_COMMIT, 8, commit)
        assert refused.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
        assert broker.logs.offline_dirs == [tmp_path / "data"]
        assert broker.stop_requested.is_set()
    finally:
        await client.close()
        await broker.stop()
