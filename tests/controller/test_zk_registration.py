"""How the ZooKeeper backend reads a broker registration with several endpoints."""

from __future__ import annotations

from pathlib import Path

from controller import zk_paths
from controller.interface import BrokerInfo, Endpoint
from controller.zk_backend import ZkMetadata
from kbroker.config import BrokerConfig


def _backend(tmp_path: Path, inter: str) -> ZkMetadata:
    config = BrokerConfig.from_properties(
        {
            "broker.id": "1",
            "log.dirs": str(tmp_path),
            "zookeeper.connect": "127.0.0.1:1",
            "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:19092",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": inter,
        }
    )
    return ZkMetadata(config)


def test_peers_are_reached_on_our_inter_broker_listener(tmp_path: Path) -> None:
    endpoints = (Endpoint("INTERNAL", "b2", 9092), Endpoint("EXTERNAL", "localhost", 19093))
    # host/port name the registering broker's own inter-broker listener (EXTERNAL here).
    data = zk_paths.encode_broker("localhost", 19093, "r1", 1, endpoints)
    info = _backend(tmp_path, "INTERNAL")._broker_info(2, data)
    assert info == BrokerInfo(2, "b2", 9092, "r1", endpoints)
    assert info.through("EXTERNAL") == BrokerInfo(2, "localhost", 19093, "r1", endpoints)


def test_registration_without_our_listener_keeps_its_host_and_port(tmp_path: Path) -> None:
    data = zk_paths.encode_broker("b3", 9092, None, 1)
    info = _backend(tmp_path, "INTERNAL")._broker_info(3, data)
    assert info == BrokerInfo(3, "b3", 9092, None, (Endpoint("PLAINTEXT", "b3", 9092),))
