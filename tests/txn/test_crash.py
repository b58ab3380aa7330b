"""A broker process killed with SIGKILL at random points of a transaction's commit (before,
during and after its markers are written), together with its producer: after the restart the
coordinator finishes what was prepared and aborts what was left open once its timeout passes,
the last stable offset catches up with the high watermark, and a read_committed consumer sees
every acknowledged transaction whole and no other record of an unfinished one."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.broker_process import REPO_ROOT, BrokerProcess
from compat_tests.eos_support import read_values
from kbroker.client import BrokerConnection
from tests.txn.txn_writer import PER_TXN, TRANSACTION_TIMEOUT_MS
from wire.api_keys import ApiKey
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

pytestmark = pytest.mark.slow

TOPIC = "crash-txn"
ROUNDS = 4


def _start_writer(broker: BrokerProcess, round_: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.txn.txn_writer",
            broker.bootstrap,
            TOPIC,
            "writer",
            str(round_),
            *extra,
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


async def _end_offsets(broker: BrokerProcess) -> tuple[int, int]:
    """(last stable offset, high watermark) of the topic's partition, by ListOffsets."""
    connection = await BrokerConnection.open((broker.host, broker.port), "crash-test")
    try:
        ends = []
        for isolation in (1, 0):
            request = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation,
                topics=[
                    ListOffsetsTopic(
                        name=TOPIC,
                        partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)],
                    )
                ],
            )
            response = await connection.call(ApiKey.LIST_OFFSETS, 5, request)
            answer = response.topics[0].partitions[0]
            assert answer.error_code == 0
            ends.append(answer.offset)
        return ends[0], ends[1]
    finally:
        await connection.close()


def test_sigkill_during_commits_leaves_no_transaction_open(tmp_path: Path) -> None:
    rng = random.Random(5)
    broker = BrokerProcess(
        tmp_path / "broker",
        overrides={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"},
    )
    acknowledged: set[str] = set()
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        for round_ in range(ROUNDS):
            writer = _start_writer(broker, round_)
            assert writer.stdout is not None
            # A few commits first, then a kill somewhere inside a later one.
            for _ in range(3):
                acknowledged.add(writer.stdout.readline().split()[1])
            time.sleep(rng.uniform(0.0, 0.05))
            broker.kill()
            writer.kill()
            acknowledged.update(line.split()[1] for line in writer.stdout.read().splitlines())
            writer.wait()
            broker.start(timeout=60)
        # Last, a transaction whose records are in the log and which nobody will end: only
        # its timeout can abort it after the restart.
        writer = _start_writer(broker, ROUNDS, "--leave-open")
        assert writer.stdout is not None
        assert writer.stdout.readline().startswith("written")
        broker.kill()
        writer.kill()
        writer.wait()
        broker.start(timeout=60)
        stable, high = asyncio.run(_end_offsets(broker))
        assert stable < high, "the open transaction holds the last stable offset back"
        deadline = time.monotonic() + TRANSACTION_TIMEOUT_MS / 1000 + 30
        while (ends := asyncio.run(_end_offsets(broker)))[0] < ends[1]:
            assert time.monotonic() < deadline, "a transaction stayed open past its timeout"
            time.sleep(0.5)
        values = read_values(
            broker.bootstrap, TOPIC, 1, "read_committed", len(acknowledged) * PER_TXN
        )
    finally:
        broker.kill()
    records: dict[str, int] = defaultdict(int)
    for value in values:
        round_, txn, _ = value.decode().split("-")
        records[f"{round_}-{txn}"] += 1
    assert acknowledged <= set(records), "an acknowledged transaction is missing"
    assert all(count == PER_TXN for count in records.values()), "a transaction is partly visible"
    assert f"{ROUNDS}-0" not in records, "the open transaction was not aborted"
