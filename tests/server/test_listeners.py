"""Several listeners: every one is bound, and answers carry the advertised endpoint of the
listener the client connected through (Metadata, DescribeCluster, FindCoordinator)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controller.interface import BrokerInfo, Endpoint
from kbroker.broker import Broker
from kbroker.handlers.groups import handle_find_coordinator
from kbroker.handlers.metadata import handle_metadata
from kbroker.server.connection import LISTENER_NAME
from tests.server.conftest import RawClient, broker_config, free_port
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.describe_cluster_request import DescribeClusterRequest
from wire.messages.describe_cluster_response import DescribeClusterResponse
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.find_coordinator_response import FindCoordinatorResponse
from wire.messages.metadata_request import MetadataRequest
from wire.messages.metadata_response import MetadataResponse
from wire.messages.request_header import RequestHeader

# Advertised under different host names, so an answer shows which listener it describes.
ADVERTISED_HOSTS = {"INTERNAL": "127.0.0.1", "EXTERNAL": "localhost"}


@pytest.fixture
async def two_listener_broker(tmp_path: Path) -> AsyncIterator[Broker]:
    ports = {"INTERNAL": free_port(), "EXTERNAL": free_port()}
    config = broker_config(
        tmp_path / "data",
        0,
        listeners=f"INTERNAL://127.0.0.1:{ports['INTERNAL']},"
        f"EXTERNAL://127.0.0.1:{ports['EXTERNAL']}",
        advertised_listeners=",".join(
            f"{name}://{ADVERTISED_HOSTS[name]}:{port}" for name, port in ports.items()
        ),
        listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        inter_broker_listener_name="INTERNAL",
    )
    broker = Broker(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


def _advertised(broker: Broker, name: str) -> tuple[str, int]:
    return ADVERTISED_HOSTS[name], broker.ports[name]


@pytest.mark.parametrize("name", ["INTERNAL", "EXTERNAL"])
async def test_metadata_names_the_endpoint_of_the_listener_used(
    two_listener_broker: Broker, name: str
) -> None:
    client = await RawClient.connect(two_listener_broker.ports[name])
    try:
        response = await client.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))
    finally:
        await client.close()
    assert isinstance(response, MetadataResponse)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (0, *_advertised(two_listener_broker, name))
    ]


@pytest.mark.parametrize("name", ["INTERNAL", "EXTERNAL"])
async def test_describe_cluster_and_find_coordinator_follow_the_listener(
    two_listener_broker: Broker, name: str
) -> None:
    client = await RawClient.connect(two_listener_broker.ports[name])
    try:
        cluster = await client.call(ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest())
        coordinator = await client.call(
            ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g1")
        )
    finally:
        await client.close()
    expected = _advertised(two_listener_broker, name)
    assert isinstance(cluster, DescribeClusterResponse)
    assert [(b.broker_id, b.host, b.port) for b in cluster.brokers] == [(0, *expected)]
    assert isinstance(coordinator, FindCoordinatorResponse)
    assert coordinator.error_code == ErrorCode.NONE
    assert (coordinator.host, coordinator.port) == expected


async def test_a_listener_without_an_advertised_endpoint_finds_no_broker(
    two_listener_broker: Broker,
) -> None:
    # As Kafka does, a broker that does not advertise the listener is left out of the answers.
    header = RequestHeader(request_api_key=ApiKey.FIND_COORDINATOR, request_api_version=3)
    token = LISTENER_NAME.set("OTHER")
    try:
        metadata = await handle_metadata(two_listener_broker, header, MetadataRequest(), 12)
        found = await handle_find_coordinator(
            two_listener_broker, header, FindCoordinatorRequest(key="g1"), 3
        )
    finally:
        LISTENER_NAME.reset(token)
    assert metadata.brokers == []
    assert (found.error_code, found.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)


def test_broker_seen_through_a_listener() -> None:
    info = BrokerInfo(
        1, "in", 1, None, (Endpoint("INTERNAL", "in", 1), Endpoint("EXTERNAL", "ext", 2))
    )
    assert info.through("EXTERNAL") == BrokerInfo(1, "ext", 2, None, info.endpoints)
    assert info.through("INTERNAL") == info
    assert info.through(None) == info
    # Not advertised on that listener: not reachable through it.
    assert info.through("OTHER") is None
    # No endpoint list: the one address is all there is.
    single = BrokerInfo(2, "h", 3)
    assert single.through("OTHER") == single
