"""``kbroker quotas`` against an in-process broker."""

from __future__ import annotations

import asyncio
import json
import sys

from kbroker.broker import Broker
from tests.server.conftest import broker  # noqa: F401


async def quotas_cli(broker: Broker, *args: str) -> tuple[int, str, str]:  # noqa: F811
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kbroker",
        "quotas",
        *args,
        "--bootstrap-server",
        f"127.0.0.1:{broker.port}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


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
