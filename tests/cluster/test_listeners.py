"""Two brokers with an INTERNAL and an EXTERNAL listener each, on a real ZooKeeper: every
advertised endpoint is registered, and a client sees every broker through the listener it
connected with."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_for
from kazoo.client import KazooClient

from compat_tests.broker_process import BrokerProcess, free_port
from compat_tests.support import require
from compat_tests.zookeeper_process import ZooKeeperProcess, java_available
from kbroker.client import BrokerConnection
from wire.api_keys import ApiKey
from wire.messages.metadata_request import MetadataRequest

pytestmark = pytest.mark.slow

# Advertised under different host names, so an answer shows which listener it describes.
HOSTS = {"INTERNAL": "127.0.0.1", "EXTERNAL": "localhost"}
BROKER_IDS = (1, 2)


class TwoListenerCluster:
    def __init__(self, work: Path) -> None:
        self.zookeeper = ZooKeeperProcess(work / "zookeeper")
        self.ports = {(broker_id, name): free_port() for broker_id in BROKER_IDS for name in HOSTS}
        self.brokers = {
            broker_id: BrokerProcess(
                work / f"broker-{broker_id}",
                port=self.ports[broker_id, "INTERNAL"],
                overrides={
                    "broker.id": str(broker_id),
                    "zookeeper.connect": self.zookeeper.connect,
                    "listeners": ",".join(
                        f"{name}://127.0.0.1:{self.ports[broker_id, name]}" for name in HOSTS
                    ),
                    "advertised.listeners": ",".join(
                        f"{name}://{host}:{self.ports[broker_id, name]}"
                        for name, host in HOSTS.items()
                    ),
                    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                    "inter.broker.listener.name": "INTERNAL",
                    "offsets.topic.replication.factor": "2",
                    "zookeeper.session.timeout.ms": "8000",
                },
            )
            for broker_id in BROKER_IDS
        }

    def endpoint(self, broker_id: int, name: str) -> tuple[str, int]:
        return HOSTS[name], self.ports[broker_id, name]


@pytest.fixture(scope="module")
def two_listener_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoListenerCluster]:
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    cluster = TwoListenerCluster(tmp_path_factory.mktemp("listeners"))
    try:
        cluster.zookeeper.start()
        for broker in cluster.brokers.values():
            broker.start(timeout=60)
        yield cluster
    finally:
        for broker in cluster.brokers.values():
            broker.kill()
        cluster.zookeeper.kill()


def _registrations(cluster: TwoListenerCluster) -> dict[int, dict[str, object]]:
    zk = KazooClient(hosts=cluster.zookeeper.connect)
    zk.start(timeout=30)
    try:
        return {
            int(child): json.loads(zk.get(f"/brokers/ids/{child}")[0])
            for child in zk.get_children("/brokers/ids")
        }
    finally:
        zk.stop()
        zk.close()


def test_every_endpoint_is_registered(two_listener_cluster: TwoListenerCluster) -> None:
    cluster = two_listener_cluster
    registrations = wait_for(
        lambda: r if set(r := _registrations(cluster)) == set(BROKER_IDS) else None,
        60,
        "both brokers registered",
    )
    for broker_id, registration in registrations.items():
        assert registration["endpoints"] == [
            "{}://{}:{}".format(name, *cluster.endpoint(broker_id, name)) for name in HOSTS
        ]
        assert registration["listener_security_protocol_map"] == {
            name: "PLAINTEXT" for name in HOSTS
        }
        # host and port name the inter-broker listener.
        assert (registration["host"], registration["port"]) == cluster.endpoint(
            broker_id, "INTERNAL"
        )


async def _brokers_seen(cluster: TwoListenerCluster, broker_id: int, name: str) -> set[tuple]:
    connection = await BrokerConnection.open(
        ("127.0.0.1", cluster.ports[broker_id, name]), "cluster-test"
    )
    try:
        response, _ = await connection.request(ApiKey.METADATA, MetadataRequest(topics=[]))
    finally:
        await connection.close()
    return {(b.node_id, b.host, b.port) for b in response.brokers}


@pytest.mark.parametrize("name", list(HOSTS))
def test_metadata_lists_every_broker_on_the_listener_used(
    two_listener_cluster: TwoListenerCluster, name: str
) -> None:
    cluster = two_listener_cluster
    expected = {(b, *cluster.endpoint(b, name)) for b in BROKER_IDS}
    for broker_id in BROKER_IDS:
        wait_for(
            lambda broker_id=broker_id: (
                asyncio.run(_brokers_seen(cluster, broker_id, name)) == expected
            ),
            60,
            f"broker {broker_id} listing every broker's {name} endpoint",
        )
