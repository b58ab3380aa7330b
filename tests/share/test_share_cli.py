"""``kbroker groups`` of a share group (KIP-932), run as a real process against an
in-process broker: its type, epochs and members, and per partition the start offset and the
lag the broker reports (KIP-1226)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from kbroker.broker import Broker
from kbroker.client import BrokerConnection
from tests.group.conftest import connect
from tests.group.test_cli_groups import kbroker_cli
from tests.share.test_share_apis import GROUP, TOPIC, Member, describe_offsets, setup
from wire.api_keys import ApiKey
from wire.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest

pytestmark = pytest.mark.slow


async def keep_alive(conn: BrokerConnection, member: Member) -> None:
    """Heartbeat for ``member`` every second: the CLI runs (a new process each, several
    seconds on a loaded machine) can outlast the share group session of 45 s."""
    while True:
        request = ShareGroupHeartbeatRequest(
            group_id=GROUP, member_id=member.member_id, member_epoch=member.epoch
        )
        response = await conn.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, request)
        assert response.error_code == 0, response.error_message
        await asyncio.sleep(1)


async def test_list_and_describe_a_share_group(share_broker: Broker) -> None:
    topic_id = await setup(share_broker, 10)
    conn = await connect(share_broker)
    heartbeats = await connect(share_broker)
    alive: asyncio.Task[None] | None = None
    try:
        member = Member(conn, topic_id)
        await member.join()
        alive = asyncio.create_task(keep_alive(heartbeats, member))
        await member.fetch()
        # Accepted, accepted, released, rejected, acquired: the start offset written with the
        # acknowledgement is the one from before it (0, as Kafka 4.3 writes it), and the done
        # records count as delivered for good, so the broker's lag is less than the log end
        # minus the start offset.
        await member.ack(0, 4, [1, 1, 2, 3, 0])
        assert await describe_offsets(conn, GROUP) == (0, [(TOPIC, [(0, 0, 6)])])

        code, out, err = await kbroker_cli(share_broker, "groups", "list", "--type", "share")
        assert code == 0, err
        assert [line.split() for line in out.splitlines()] == [
            ["GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"],
            [GROUP, "share", "share", "Stable"],
        ]
        code, out, err = await kbroker_cli(share_broker, "groups", "describe", GROUP, "--json")
        assert code == 0, err
        described = json.loads(out)
        assert (described["type"], described["state"], described["assignor"]) == (
            "share",
            "Stable",
            "simple",
        )
        assert described["group_epoch"] == described["assignment_epoch"] > 0
        [shown] = described["members"]
        assert (shown["member_id"], shown["member_epoch"], shown["subscribed_topics"]) == (
            member.member_id,
            member.epoch,
            [TOPIC],
        )
        assert shown["assigned"] == [{"topic": TOPIC, "partition": 0}]
        assert described["partitions"] == [
            {"topic": TOPIC, "partition": 0, "start_offset": 0, "log_end_offset": 10, "lag": 6}
        ]
        code, out, err = await kbroker_cli(share_broker, "groups", "describe", GROUP)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0] == f"Group {GROUP}: type share, state Stable, 1 member"
        table = [line.split() for line in lines[3:5]]
        assert table == [
            ["TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG"],
            [TOPIC, "0", "0", "10", "6"],
        ]
        assert not alive.done()
    finally:
        if alive is not None:
            alive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await alive
        await heartbeats.close()
        await conn.close()
