"""Connection limits (KIP-402, KIP-612) over raw sockets against an in-process broker
(issue 13, item 3)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from kbroker.config import ConfigError
from kbroker.server.connection_quotas import (
    ConnectionLimitsConfig,
    ConnectionQuotas,
    ListenerLimits,
)
from tests.server.conftest import RawClient, broker_config
from tests.server.test_connection import assert_serving
from tests.server.test_request_memory import StartBroker, start_broker  # noqa: F401
from wire.api_keys import ApiKey
from wire.messages.api_versions_request import ApiVersionsRequest


async def answers(client: RawClient, timeout: float = 5) -> bool:
    try:
        await asyncio.wait_for(client.call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest()), timeout)
    except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
        return False
    return True


async def test_per_ip_limit_closes_the_excess_and_logs_once(
    start_broker: StartBroker,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = await start_broker(max_connections_per_ip="3")
    kept = [await RawClient.connect(broker.port) for _ in range(3)]
    for client in kept:
        assert await answers(client)
    with caplog.at_level(logging.INFO, logger="kbroker.server.listener"):
        refused = [await RawClient.connect(broker.port) for _ in range(5)]
        for client in refused:
            assert await client.closed_by_peer()
    assert caplog.text.count("Rejected connection from 127.0.0.1") == 1
    for client in kept:
        assert await answers(client)
    await kept[0].close()
    await asyncio.sleep(0.2)
    again = await RawClient.connect(broker.port)
    assert await answers(again)
    for client in [*kept[1:], *refused, again]:
        await client.close()


async def test_per_ip_override_raises_the_limit_for_that_address(
    start_broker: StartBroker,  # noqa: F811
) -> None:
    broker = await start_broker(
        max_connections_per_ip="1", max_connections_per_ip_overrides="127.0.0.1:4"
    )
    clients = [await RawClient.connect(broker.port) for _ in range(4)]
    for client in clients:
        assert await answers(client)
    fifth = await RawClient.connect(broker.port)
    assert await fifth.closed_by_peer()
    for client in [*clients, fifth]:
        await client.close()


@pytest.mark.parametrize("setting", ["max_connections", "listener_name_plaintext_max_connections"])
async def test_listener_at_max_connections_stops_accepting_until_one_closes(
    start_broker: StartBroker,  # noqa: F811
    setting: str,
) -> None:
    broker = await start_broker(**{setting: "2"})
    first, second = [await RawClient.connect(broker.port) for _ in range(2)]
    assert await answers(first) and await answers(second)
    # The third connects (kernel backlog) but is not accepted, so not answered...
    waiting = await RawClient.connect(broker.port)
    assert not await answers(waiting, timeout=0.5)
    # ...until a slot frees; existing clients are unaffected meanwhile.
    assert await answers(second)
    await first.close()
    size = await asyncio.wait_for(waiting.reader.readexactly(4), 5)
    assert len(size) == 4
    for client in (second, waiting):
        await client.close()


async def test_creation_rate_delays_accepting(start_broker: StartBroker) -> None:  # noqa: F811
    broker = await start_broker(max_connection_creation_rate="10")
    await asyncio.sleep(1.1)  # the broker's own start-up probes are out of the window
    started = time.monotonic()
    clients = [await RawClient.connect(broker.port) for _ in range(25)]
    for client in clients:
        assert await answers(client)
    # 25 connections at 10 per second: at least two windows' wait.
    assert time.monotonic() - started >= 1.5
    for client in clients:
        await client.close()
    await assert_serving(broker)


def test_inter_broker_listener_is_exempt_from_the_broker_wide_limit() -> None:
    quotas = ConnectionQuotas(
        ConnectionLimitsConfig(
            max_connections=1,
            max_creation_rate=1000,
            max_per_ip=1000,
            listeners={
                "CLIENT": ListenerLimits(1000, 1000),
                "REPLICATION": ListenerLimits(1000, 1000, inter_broker=True),
            },
        )
    )
    assert quotas.open("CLIENT", "10.0.0.1", 0.0)
    assert not quotas.slot_available("CLIENT")
    assert quotas.slot_available("REPLICATION")
    quotas.close("CLIENT", "10.0.0.1")
    assert quotas.slot_available("CLIENT") and not quotas.by_ip


def test_bad_listener_override_and_per_ip_overrides_are_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        broker_config(tmp_path, 0, max_connections_per_ip_overrides="nohostcount")
    with pytest.raises(ConfigError):
        broker_config(tmp_path, 0, **{"listener_name_plaintext_max_connections": "-3"})
    with pytest.raises(ConfigError, match="Unknown"):
        broker_config(tmp_path, 0, **{"listener_name_plaintext_num_partitions": "3"})


async def test_ip_connection_creation_rate_quota_closes_the_excess(
    start_broker: StartBroker,  # noqa: F811
) -> None:
    from wire.messages.alter_client_quotas_request import (
        AlterClientQuotasRequest,
        EntityData,
        EntryData,
        OpData,
    )

    broker = await start_broker()
    admin = await RawClient.connect(broker.port)
    request = AlterClientQuotasRequest(
        entries=[
            EntryData(
                entity=[EntityData(entity_type="ip", entity_name="127.0.0.1")],
                ops=[OpData(key="connection_creation_rate", value=3)],
            )
        ]
    )
    response = await admin.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
    assert response.entries[0].error_code == 0
    await asyncio.sleep(1.1)  # the admin connection is out of the rate window
    clients = [await RawClient.connect(broker.port) for _ in range(8)]
    served = [await answers(c, timeout=2) for c in clients]
    # Three a second are served; the others are held, then closed unserved (KIP-612).
    assert served[:3] == [True] * 3 and served.count(True) <= 4
    assert await answers(admin)
    for client in [admin, *clients]:
        await client.close()
