"""``kbroker groups`` run as a real process against an in-process broker (and a real
ZooKeeper for the import)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient

from kbroker.broker import Broker
from kbroker.cli.groups import (
    format_partitions,
    parse_datetime,
    parse_group_types,
    parse_states,
    parse_topic_spec,
    parse_zk_offset,
)
from kbroker.cli.ops.groups import clamp, lag_rows
from kbroker.client import BrokerConnection, KafkaClient
from kbroker.group.consumer_protocol import encode_assignment, encode_subscription
from tests.group.conftest import StartBroker, connect
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
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


# Members' sessions outlast a test's CLI runs (each a new Python process, several seconds
# each on a loaded machine), so no member expires while a test looks at it.
SESSION_MS = 600_000


@pytest.fixture
async def broker(start_broker: StartBroker) -> Broker:
    b = await start_broker(
        **{
            "group.consumer.session.timeout.ms": str(SESSION_MS),
            "group.consumer.max.session.timeout.ms": str(SESSION_MS),
        }
    )
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
    assert parse_group_types("Consumer,share") == ["consumer", "share"]
    with pytest.raises(argparse.ArgumentTypeError):
        parse_group_types("consumer,modern")
    assert parse_states("Stable, empty") == ["Stable", "empty"]
    assert format_partitions([("b", 2), ("a", 1), ("b", 0)]) == "a:1;b:0,2"
    assert format_partitions([]) == "-"
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
        session_timeout_ms=SESSION_MS,
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


async def consumer_heartbeat(
    conn: BrokerConnection, member_id: str, epoch: int, **fields: Any
) -> Any:
    """A ConsumerGroupHeartbeat v1 of group "modern"; raises unless it is answered NONE."""
    request = ConsumerGroupHeartbeatRequest(
        group_id="modern",
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=30_000 if epoch == 0 else -1,
        topic_partitions=[] if epoch == 0 else None,
        **fields,
    )
    response = await conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request)
    assert response.error_code == ErrorCode.NONE, response.error_message
    return response


async def test_list_and_describe_a_consumer_group(broker: Broker) -> None:
    """A consumer group (KIP-848) in the middle of a rebalance: the group epoch ahead of the
    first member's epoch, a partition in one member's target that another still owns."""
    await broker.metadata.create_topic("audit", 1, 1)
    await commit(broker, "idle", {(TOPIC, 0): 6})
    conn = await connect(broker)
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    try:
        await consumer_heartbeat(
            conn, a, 0, instance_id="inst-a", rack_id="rack-1", subscribed_topic_names=[TOPIC]
        )
        joined_b = await consumer_heartbeat(conn, b, 0, subscribed_topic_regex="^aud.*")
        await consumer_heartbeat(conn, c, 0, subscribed_topic_names=[TOPIC])
        # A new regex is resolved at the group's next heartbeat (c's), so b gets its topic at
        # its own next one.
        await consumer_heartbeat(conn, b, joined_b.member_epoch)
        await commit_as_member(conn, a, 1, 0, 7)

        listed = await run_json(broker, "list")
        assert [(g["group"], g["type"], g["protocol_type"], g["state"]) for g in listed] == [
            ("idle", "classic", "", "Empty"),
            ("modern", "consumer", "consumer", "Reconciling"),
        ]
        only = await run_json(broker, "list", "--type", "CONSUMER")
        assert [g["group"] for g in only] == ["modern"]
        both = await run_json(broker, "list", "--type", "classic", "--state", "reconciling,stable")
        assert both == []
        code, text, _ = await run_cli(broker, "list", "--state", "Empty")
        assert code == 0
        assert [line.split() for line in text.splitlines()] == [
            ["GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"],
            ["idle", "classic", "-", "Empty"],
        ]

        described = await run_json(broker, "describe", "modern")
        assert (
            described["type"],
            described["state"],
            described["assignor"],
            described["group_epoch"],
            described["assignment_epoch"],
        ) == ("consumer", "Reconciling", "uniform", 3, 3)
        members = {m["member_id"]: m for m in described["members"]}

        def parts(member: str, which: str) -> list[tuple[str, int]]:
            return [(x["topic"], x["partition"]) for x in members[member][which]]

        # a still owns both partitions at epoch 1; its target gave one of them to c, which
        # waits for it with nothing assigned.
        assert (members[a]["member_epoch"], members[a]["instance_id"], members[a]["rack"]) == (
            1,
            "inst-a",
            "rack-1",
        )
        assert members[a]["subscribed_topics"] == [TOPIC]
        assert parts(a, "assigned") == [(TOPIC, 0), (TOPIC, 1)]
        assert len(parts(a, "target")) == len(parts(c, "target")) == 1
        assert set(parts(a, "target") + parts(c, "target")) == {(TOPIC, 0), (TOPIC, 1)}
        assert parts(c, "assigned") == []
        assert members[b]["subscribed_topic_regex"] == "^aud.*"
        assert members[b]["subscribed_topics"] == []
        assert parts(b, "assigned") == parts(b, "target") == [("audit", 0)]
        assert [
            (p["topic"], p["partition"], p["committed_offset"], p["log_end_offset"], p["lag"])
            for p in described["partitions"]
        ] == [("audit", 0, None, 0, None), (TOPIC, 0, 7, 10, 3), (TOPIC, 1, None, 4, None)]
        assert {p["member_id"] for p in described["partitions"] if p["topic"] == TOPIC} == {a}

        code, text, _ = await run_cli(broker, "describe", "modern")
        assert code == 0
        lines = text.splitlines()
        assert lines[0] == "Group modern: type consumer, state Reconciling, 3 members"
        assert lines[1] == "Group epoch: 3, assignment epoch: 3, assignor: uniform"
        header = next(i for i, line in enumerate(lines) if line.startswith("MEMBER-ID"))
        assert lines[header].split() == [
            "MEMBER-ID",
            "INSTANCE-ID",
            "CLIENT-ID",
            "HOST",
            "RACK",
            "MEMBER-EPOCH",
            "SUBSCRIPTION",
            "ASSIGNED",
            "TARGET",
        ]
        rows = {line.split()[0]: line.split() for line in lines[header + 1 :]}
        assert rows[a][1:] == [
            "inst-a",
            "group-tests",
            rows[a][3],
            "rack-1",
            "1",
            TOPIC,
            f"{TOPIC}:0,1",
            format_partitions(parts(a, "target")),
        ]
        assert rows[b][5:] == ["3", "/^aud.*/", "audit:0", "audit:0"]
        assert rows[c][5:] == ["3", TOPIC, "-", format_partitions(parts(c, "target"))]
        # Offsets of a consumer group with members cannot be reset from outside.
        code, _, err = await run_cli(
            broker, "reset-offsets", "modern", "--topic", TOPIC, "--to-earliest", "--execute"
        )
        assert (code, err.strip()) == (
            1,
            "kbroker: error: group 'modern' is Reconciling: offsets can only be changed while "
            "it has no members",
        )
    finally:
        await conn.close()


async def commit_as_member(
    conn: BrokerConnection, member_id: str, epoch: int, partition: int, offset: int
) -> None:
    """OffsetCommit v9 to group "modern" from a member at its member epoch (KIP-848)."""
    request = OffsetCommitRequest(
        group_id="modern",
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        topics=[
            OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[
                    OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)
                ],
            )
        ],
    )
    response = await conn.call(ApiKey.OFFSET_COMMIT, 9, request)
    assert response.topics[0].partitions[0].error_code == ErrorCode.NONE


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
