"""A log directory that fills up in a three-broker cluster (KIP-112's second half, issue 29
item 5): broker 1 has two log directories, one of them a small tmpfs; an idempotent acks=all
producer writes to six partitions while the tmpfs is filled for real. The partitions there
get new leaders without a restart, the producer loses nothing, broker 1 keeps leading the
partitions in its other directory, and DescribeLogDirs shows the failed one with
KAFKA_STORAGE_ERROR; once broker 1 restarts with the space back, its replicas there rejoin
the ISR. Needs root for the tmpfs mount (as make chaos does)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from helpers import (
    BackgroundProducer,
    admin,
    call,
    full_isr,
    partition_view,
    produce_raw,
    read_all,
    wait_for,
)
from local_cluster import LocalCluster

from compat_tests.support import require
from compat_tests.zookeeper_process import java_available
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.describe_log_dirs_request import DescribeLogDirsRequest

pytestmark = pytest.mark.slow

TOPIC = "disk"
# Broker 1 leads partitions 0-3 and follows 4 and 5; a new log goes to the directory with
# the fewest, so consecutive partitions alternate between its two directories.
ASSIGNMENT = [[1, 2, 3], [1, 3, 2], [1, 2, 3], [1, 3, 2], [2, 1, 3], [3, 1, 2]]
SMALL_DIR_BYTES = 16 * 1024 * 1024


@pytest.fixture(scope="module")
def disk_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    """Three brokers; broker 1's log.dirs are its usual directory and a 16 MB tmpfs."""
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    require(os.geteuid() == 0, "mounting the small tmpfs log directory needs root")
    work = tmp_path_factory.mktemp("cluster")
    cluster = LocalCluster(work)
    small = work / "broker-1" / "small"
    small.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL_DIR_BYTES}", "tmpfs", str(small)],
        check=True,
        capture_output=True,
    )
    broker = cluster.brokers[1]
    broker.overrides["log.dirs"] = f"{broker.log_dir},{small}"
    try:
        cluster.start()
        yield cluster, small
    finally:
        cluster.kill_all()
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def _fill(directory: Path) -> Path:
    """Take every free byte of the filesystem under `directory`; the filler file."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * size)
    with pytest.raises(OSError) as full:
        with open(directory / "probe", "wb", buffering=0) as probe:
            probe.write(b"\0" * 4096)
    assert full.value.errno == errno.ENOSPC
    return filler


def _leader_moved(cluster: LocalCluster, partition: int) -> bool:
    view = partition_view(cluster, TOPIC, partition)
    return view is not None and view.leader in (2, 3) and 1 not in view.isr


def _log_dir_errors(cluster: LocalCluster) -> dict[str, int]:
    request = DescribeLogDirsRequest(topics=None)
    response = asyncio.run(call(cluster, ApiKey.DESCRIBE_LOG_DIRS, request, broker_id=1))
    return {r.log_dir: r.error_code for r in response.results}


def test_a_full_log_dir_moves_its_leaders_and_loses_nothing(
    disk_cluster: tuple[LocalCluster, Path],
) -> None:
    cluster, small = disk_cluster
    cluster.wait_registered()
    topic = NewTopic(
        TOPIC, len(ASSIGNMENT), replica_assignment=ASSIGNMENT, config={"min.insync.replicas": "2"}
    )
    client = admin(cluster)
    client.create_topics([topic], request_timeout=30)[TOPIC].result(60)
    for p in range(len(ASSIGNMENT)):
        wait_for(lambda p=p: full_isr(cluster, TOPIC, p), 60, f"{TOPIC}-{p} in sync")
    on_small = {p for p in range(len(ASSIGNMENT)) if (small / f"{TOPIC}-{p}").is_dir()}
    led_by_1 = {p for p, replicas in enumerate(ASSIGNMENT) if replicas[0] == 1}
    healthy_led = sorted(led_by_1 - on_small)
    assert on_small & led_by_1 and healthy_led, f"placement on the small dir: {on_small}"

    producer = BackgroundProducer(cluster, TOPIC)
    producer.start()
    try:
        wait_for(lambda: len(producer.acked) > 300, 60, "first acknowledgements")
        filler = _fill(small)
        filled = time.monotonic()
        for p in sorted(on_small):
            wait_for(lambda p=p: _leader_moved(cluster, p), 60, f"{TOPIC}-{p} to leave broker 1")
        moved_after = time.monotonic() - filled
        print(f"leaders of {sorted(on_small)} moved {moved_after:.1f} s after the disk filled")
        # Broker 1 keeps leading, in sync, the partitions of its healthy directory.
        for p in healthy_led:
            view = partition_view(cluster, TOPIC, p)
            assert view is not None and view.leader == 1 and 1 in view.isr
            assert produce_raw(cluster, 1, TOPIC, -1, 5, b"-1", partition=p) == ErrorCode.NONE
        assert _log_dir_errors(cluster) == {
            str(cluster.brokers[1].log_dir): ErrorCode.NONE,
            str(small): ErrorCode.KAFKA_STORAGE_ERROR,
        }
        before = len(producer.acked)
        wait_for(lambda: len(producer.acked) > before + 300, 120, "acknowledgements after")
    finally:
        producer.stop()
    assert producer.errors == []
    acked = {v: (producer.partition_of[v], o) for v, o in producer.acked}
    stored: dict[int, tuple[int, int]] = {}
    for p in range(len(ASSIGNMENT)):
        for value, offset in read_all(cluster, TOPIC, p):
            if value == b"-1":
                continue
            assert int(value) not in stored, f"{int(value)} stored twice"
            stored[int(value)] = (p, offset)
    missing = set(acked) - set(stored)
    assert not missing, f"{len(missing)} acknowledged records lost"
    assert {v: stored[v] for v in acked} == acked, "a record is not where it was acknowledged"

    # Space back, broker 1 restarted: its replicas in the small directory rejoin the ISR.
    filler.unlink()
    assert cluster.brokers[1].stop(timeout=60) == 0
    cluster.brokers[1].start(timeout=60)
    for p in range(len(ASSIGNMENT)):
        wait_for(lambda p=p: full_isr(cluster, TOPIC, p), 90, f"{TOPIC}-{p} in sync again")
    assert set(_log_dir_errors(cluster).values()) == {ErrorCode.NONE}
