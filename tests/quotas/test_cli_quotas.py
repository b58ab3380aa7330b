"""``kbroker quotas`` against an in-process broker."""

from __future__ import annotations

import json

from kbroker.broker import Broker
from tests.group.test_cli_groups import kbroker_cli
from tests.server.conftest import broker  # noqa: F401


async def quotas_cli(broker: Broker, *args: str) -> tuple[int, str, str]:  # noqa: F811
    return await kbroker_cli(broker, "quotas", *args)


async def test_alter_then_describe(broker: Broker) -> None:  # noqa: F811
    code, _, err = await quotas_cli(
        broker,
        "alter",
        "--user",
        "alice",
        "--client-default",
        "--add",
        "producer_byte_rate=1048576",
        "--add",
        "consumer_byte_rate=2097152",
    )
    assert code == 0, err
    code, out, err = await quotas_cli(broker, "describe", "--user", "alice", "--json")
    assert code == 0, err
    assert json.loads(out) == [
        {
            "entity": {"client-id": None, "user": "alice"},
            "quotas": {"consumer_byte_rate": 2097152.0, "producer_byte_rate": 1048576.0},
        }
    ]
    code, out, _ = await quotas_cli(broker, "describe")
    assert "user=alice, client-id=<default>" in out or "client-id=<default>, user=alice" in out
    code, _, err = await quotas_cli(broker, "alter", "--client-id", "x", "--add", "nope=1")
    assert code == 1 and "Invalid configuration key nope" in err
