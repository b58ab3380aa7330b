"""``kbroker groups`` run as a real process against an in-process broker (and a real
ZooKeeper for the import)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from kazoo.client import KazooClient

from kbroker.broker import Broker
from kbroker.cli.groups import parse_datetime, parse_topic_spec, parse_zk_offset
from kbroker.cli.ops.groups import clamp, lag_rows
from kbroker.client import KafkaClient
from kbroker.group.consumer_protocol import encode_assignment, encode_subscription
from tests.group.conftest import StartBroker, connect
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from wire.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from wire.records.record import Record, build_batch

# Each command runs as its own process (about a second each).
pytestmark = pytest.mark.slow

TOPIC = "orders"
BASE_TS = 1_700_000_000_000


async def run_cli(broker: Broker, *args: str) -> tuple[int, str, str]:
    return await kbroker_cli(broker, "groups", *args)


async def kbroker_cli(broker: Broker, command: str, *args: str) -> tuple[int, str, str]:
    """``kbroker COMMAND ARGS --bootstrap-server`` the broker: (exit code, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kbroker",
        command,
        *args,
        "--bootstrap-server",
        f"127.0.0.1:{broker.port}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def run_json(broker: Broker, *args: str) -> Any:
    code, out, err = await run_cli(broker, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def fill(broker: Broker, partition: int, count: int) -> None:
    """``count`` records one second apart, timestamps from BASE_TS."""
    records = [
        Record(offset=i, timestamp=BASE_TS + 1000 * i, key=None, value=b"x", headers=[])
        for i in range(count)
    ]
    target = broker.partition(TOPIC, partition)
    assert target is not None
    target.append(bytearray(build_batch(records)), log_append_time_ms=None)


@pytest.fixture
async def broker(start_broker: StartBroker) -> Broker:
    b = await start_broker()
    await b.metadata.create_topic(TOPIC, 2, 1)
    fill(b, 0, 10)
    fill(b, 1, 4)
    return b


async def commit(broker: Broker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    async with KafkaClient([("127.0.0.1", broker.port)]) as client:
        errors = await client.commit(group, {tp: (o, "") for tp, o in offsets.items()})
    assert set(errors.values()) == {ErrorCode.NONE}


async def committed(broker: Broker, group: str) -> dict[tuple[str, int], int]:
    async with KafkaClient([("127.0.0.1", broker.port)]) as client:
        return {tp: o for tp, (o, _) in (await client.committed(group)).items()}


def test_pure_helpers() -> None:
    assert parse_topic_spec("t") == ("t", None)
    assert parse_topic_spec("t:2,0,2") == ("t", [0, 2])
    assert parse_datetime("2023-11-14T22:13:20") == BASE_TS
    assert parse_datetime("2023-11-14T23:13:20+01:00") == BASE_TS
    assert clamp(-5, 2, 9) == 2 and clamp(50, 2, 9) == 9 and clamp(4, 2, 9) == 4
    assert parse_zk_offset(b"42\n") == 42
    with pytest.raises(ValueError):
        parse_zk_offset(b'{"offset": 1}')
    rows = lag_rows({("t", 0): (3, "")}, {("t", 0): 10, ("t", 1): 5}, {("t", 1): ("m", "h", "c")})
    assert [(r.partition, r.committed, r.log_end, r.lag, r.member_id) for r in rows] == [
        (0, 3, 10, 7, ""),
        (1, None, 5, None, "m"),
    ]


async def test_list_and_describe(broker: Broker) -> None:
    await commit(broker, "idle", {(TOPIC, 0): 6, (TOPIC, 1): 4})
    conn = await connect(broker)
    join = JoinGroupRequest(
        group_id="busy",
        session_timeout_ms=30_000,
        rebalance_timeout_ms=30_000,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=encode_subscription([TOPIC]))],
    )
    joined = await conn.call(ApiKey.JOIN_GROUP, 3, join)
    assignment = encode_assignment({TOPIC: [0, 1]})
    await conn.call(
        ApiKey.SYNC_GROUP,
        2,
        SyncGroupRequest(
            group_id="busy",
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            assignments=[
                SyncGroupRequestAssignment(member_id=joined.member_id, assignment=assignment)
            ],
        ),
    )
    try:
        listed = await run_json(broker, "list")
        assert {(g["group"], g["state"]) for g in listed} == {("idle", "Empty"), ("busy", "Stable")}
        assert [g["group"] for g in await run_json(broker, "list", "--state", "stable")] == ["busy"]

        idle = await run_json(broker, "describe", "idle")
        assert idle["state"] == "Empty"
        assert [
            (p["partition"], p["committed_offset"], p["log_end_offset"], p["lag"])
            for p in idle["partitions"]
        ] == [(0, 6, 10, 4), (1, 4, 4, 0)]

        busy = await run_json(broker, "describe", "busy")
        assert busy["state"] == "Stable"
        assert [
            (p["partition"], p["lag"], p["member_id"], p["client_id"]) for p in busy["partitions"]
        ] == [
            (0, None, joined.member_id, "group-tests"),
            (1, None, joined.member_id, "group-tests"),
        ]
        code, text, _ = await run_cli(broker, "describe", "idle")
        assert code == 0
        assert "CURRENT-OFFSET" in text and "LAG" in text
        # Resetting a group with members is refused.
        code, _, err = await run_cli(
            broker, "reset-offsets", "busy", "--topic", TOPIC, "--to-earliest", "--execute"
        )
        assert code == 1 and "Stable" in err
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (["--to-earliest"], {0: 0, 1: 0}),
        (["--to-latest"], {0: 10, 1: 4}),
        (["--to-offset", "7"], {0: 7, 1: 4}),
        (["--to-timestamp", str(BASE_TS + 2500)], {0: 3, 1: 3}),
        (["--to-datetime", "2023-11-14T22:13:25"], {0: 5, 1: 4}),
    ],
)
async def test_reset_offsets(broker: Broker, target: list[str], expected: dict[int, int]) -> None:
    await commit(broker, "g", {(TOPIC, 0): 1, (TOPIC, 1): 1})
    plan = await run_json(broker, "reset-offsets", "g", "--topic", TOPIC, *target)
    assert plan["result"] == "dry run"
    assert {o["partition"]: o["new"] for o in plan["offsets"]} == expected
    assert await committed(broker, "g") == {(TOPIC, 0): 1, (TOPIC, 1): 1}
    done = await run_json(broker, "reset-offsets", "g", "--topic", TOPIC, *target, "--execute")
    assert done["result"] == "reset"
    assert await committed(broker, "g") == {(TOPIC, p): o for p, o in expected.items()}


async def test_reset_some_partitions_and_bad_topic(broker: Broker) -> None:
    await commit(broker, "g", {(TOPIC, 0): 1, (TOPIC, 1): 1})
    await run_json(
        broker, "reset-offsets", "g", "--topic", f"{TOPIC}:1", "--to-latest", "--execute"
    )
    assert await committed(broker, "g") == {(TOPIC, 0): 1, (TOPIC, 1): 4}
    code, _, err = await run_cli(broker, "reset-offsets", "g", "--topic", "nope", "--to-latest")
    assert code == 1 and "does not exist" in err


async def test_import_zookeeper_offsets(broker: Broker, zookeeper: str) -> None:
    zk = KazooClient(hosts=zookeeper)
    zk.start(timeout=10)
    try:
        seed = {
            "legacy": {(TOPIC, 0): b"6", (TOPIC, 1): b"3", ("gone-topic", 0): b"9"},
            "other": {(TOPIC, 0): b"2"},
        }
        for group, offsets in seed.items():
            for (topic, partition), value in offsets.items():
                zk.create(f"/consumers/{group}/offsets/{topic}/{partition}", value, makepath=True)
        zk.create("/consumers/no-offsets/ids/consumer-1", b"{}", makepath=True)
    finally:
        zk.stop()
        zk.close()

    plan = await run_json(broker, "import-zk-offsets", "--zookeeper", zookeeper)
    assert plan["result"] == "dry run"
    assert {
        (o["group"], o["topic"], o["partition"], o["zookeeper"], o["skipped"])
        for o in plan["offsets"]
    } == {
        ("legacy", TOPIC, 0, 6, False),
        ("legacy", TOPIC, 1, 3, False),
        ("legacy", "gone-topic", 0, 9, True),
        ("other", TOPIC, 0, 2, False),
    }
    assert await committed(broker, "legacy") == {}

    done = await run_json(
        broker, "import-zk-offsets", "--zookeeper", zookeeper, "--group", "legacy", "--execute"
    )
    assert done["result"] == "imported"
    assert await committed(broker, "legacy") == {(TOPIC, 0): 6, (TOPIC, 1): 3}
    assert await committed(broker, "other") == {}

    await run_json(broker, "import-zk-offsets", "--zookeeper", zookeeper, "--execute")
    assert await committed(broker, "other") == {(TOPIC, 0): 2}
    again = await run_json(
        broker, "import-zk-offsets", "--zookeeper", zookeeper, "--group", "legacy"
    )
    assert {(o["partition"], o["current"]) for o in again["offsets"] if not o["skipped"]} == {
        (0, 6),
        (1, 3),
    }


async def test_import_without_zookeeper_fails_cleanly(broker: Broker) -> None:
    code, _, err = await run_cli(
        broker, "import-zk-offsets", "--zookeeper", "127.0.0.1:1", "--timeout", "2"
    )
    assert code == 1 and "ZooKeeper" in err
