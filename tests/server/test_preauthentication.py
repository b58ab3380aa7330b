"""Unauthenticated connections on a SASL listener (issue 29, item 3): bounded in number,
in time and in the request memory they may take, over raw sockets against an in-process
broker."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.metrics import BrokerMetrics
from tests.server.conftest import RawClient, free_port
from tests.server.test_request_memory import padded_api_versions, wait_until
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
from wire.messages.sasl_handshake_request import SaslHandshakeRequest

PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
)
StartBroker = Callable[..., Awaitable[Broker]]


@pytest.fixture
async def start_sasl_broker(tmp_path: Path) -> AsyncIterator[StartBroker]:
    started: list[Broker] = []

    async def start(**overrides: str) -> Broker:
        port = free_port()
        config = BrokerConfig.from_properties(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(tmp_path / f"data{len(started)}"),
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                **{key.replace("_", "."): value for key, value in overrides.items()},
            }
        )
        instance = Broker(config)
        await instance.start()
        started.append(instance)
        return instance

    try:
        yield start
    finally:
        for instance in started:
            await instance.stop()


async def connect(broker: Broker) -> RawClient:
    return await RawClient.connect(broker.ports["SASL_PLAINTEXT"])


async def login(client: RawClient) -> None:
    handshake = await client.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    assert handshake.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    answer = await client.call(
        ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret")
    )
    assert answer.error_code == ErrorCode.NONE  # type: ignore[attr-defined]


async def served(client: RawClient, timeout: float = 10) -> bool:
    correlation_id = await client.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
    try:
        await asyncio.wait_for(client.receive(ApiKey.API_VERSIONS, 0, correlation_id), timeout)
    except TimeoutError:
        return False
    return True


async def test_a_client_that_does_not_authenticate_in_time_is_closed(
    start_sasl_broker: StartBroker,
) -> None:
    broker = await start_sasl_broker(sasl_server_authentication_timeout_ms="1000")
    loiterer = await connect(broker)
    # Requests allowed before authentication do not extend the time.
    assert await served(loiterer)
    prompt = await connect(broker)
    await login(prompt)
    started = time.monotonic()
    assert await loiterer.closed_by_peer(timeout=5)
    assert time.monotonic() - started < 4
    assert await served(prompt)
    assert 'kbroker_connections_expired_total{reason="authentication_timeout"} 1' in (
        BrokerMetrics(broker).render()
    )
    for client in (loiterer, prompt):
        await client.close()


async def test_connections_in_authentication_are_bounded(
    start_sasl_broker: StartBroker,
) -> None:
    broker = await start_sasl_broker(sasl_server_max_connections_in_authentication="3")
    waiting = [await connect(broker) for _ in range(3)]
    await wait_until(lambda: broker.server.in_authentication["SASL_PLAINTEXT"] == 3)
    # A fourth is not accepted (not served) while three are authenticating ...
    fourth = await connect(broker)
    correlation_id = await fourth.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(fourth.reader.readexactly(4), 0.5)
    # ... and is once one of them has authenticated.
    await login(waiting[0])
    await asyncio.wait_for(fourth.receive(ApiKey.API_VERSIONS, 0, correlation_id), 10)
    await login(fourth)
    assert broker.server.in_authentication["SASL_PLAINTEXT"] == 2
    for client in (*waiting, fourth):
        await client.close()
    await wait_until(lambda: broker.server.in_authentication["SASL_PLAINTEXT"] == 0)


async def test_unauthenticated_partial_requests_take_only_the_shared_part_of_the_pool(
    start_sasl_broker: StartBroker,
) -> None:
    mb = 1024 * 1024
    broker = await start_sasl_broker(
        socket_request_max_bytes=str(8 * mb), queued_max_request_bytes=str(8 * mb)
    )
    pool = broker.server.pool
    # 30 strangers each send 400 KB of a 500 KB frame (under sasl.server.max.receive.size):
    # small requests, but from unauthenticated clients they count as large.
    strangers = [await connect(broker) for _ in range(30)]
    for stranger in strangers:
        stranger.writer.write(padded_api_versions(1, 500_000)[:400_000])
    await wait_until(lambda: pool.waiting >= 10, timeout=30)
    assert pool.fair_share.large_held <= 6 * mb
    client = await RawClient.connect(broker.port)
    client.writer.write(padded_api_versions(7, 900_000))
    size = struct.unpack(">i", await asyncio.wait_for(client.reader.readexactly(4), 10))[0]
    assert struct.unpack(">i", (await client.reader.readexactly(size))[:4])[0] == 7
    for c in (client, *strangers):
        await c.close()
