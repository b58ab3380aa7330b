"""Client-metrics subscriptions (KIP-714) and group configs in ZooKeeper: Kafka's
/config/<type>/<name> layout, a change notification per change, seen by every broker through
its watches."""

from __future__ import annotations

import json
from pathlib import Path

from kazoo.client import KazooClient

from tests.controller.test_zk_acls import _backend, _until


async def test_subscriptions_live_in_zookeeper_and_reach_every_broker(
    tmp_path: Path, zookeeper: str
) -> None:
    one = _backend(tmp_path, zookeeper, 1)
    two = _backend(tmp_path, zookeeper, 2)
    await one.start()
    await two.start()
    zk = KazooClient(hosts=zookeeper)
    zk.start()
    try:
        configs = {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
        await one.set_client_metrics("prod/a b", configs)
        assert one.client_metrics() == {"prod/a b": configs}
        await _until(lambda: two.client_metrics() == {"prod/a b": configs}, 10)
        data, _ = zk.get("/config/client-metrics/prod%2Fa%20b")
        assert json.loads(data) == {"version": 1, "config": configs}
        # Written by another tool: seen through the watch.
        zk.create(
            "/config/client-metrics/other",
            json.dumps({"version": 1, "config": {"metrics": "*"}}).encode(),
        )
        await _until(
            lambda: "other" in one.client_metrics() and "other" in two.client_metrics(), 10
        )
        await two.set_client_metrics("prod/a b", {})
        await _until(lambda: "prod/a b" not in one.client_metrics(), 10)
        assert zk.get_children("/config/client-metrics") == ["other"]
        changes = sorted(zk.get_children("/config/changes"))
        paths = [json.loads(zk.get(f"/config/changes/{c}")[0])["entity_path"] for c in changes]
        assert paths == ["client-metrics/prod%2Fa%20b", "client-metrics/prod%2Fa%20b"]
    finally:
        zk.stop()
        await one.stop()
        await two.stop()


async def test_group_configs_live_in_zookeeper_and_reach_every_broker(
    tmp_path: Path, zookeeper: str
) -> None:
    one = _backend(tmp_path, zookeeper, 1)
    two = _backend(tmp_path, zookeeper, 2)
    await one.start()
    await two.start()
    zk = KazooClient(hosts=zookeeper)
    zk.start()
    try:
        configs = {"consumer.session.timeout.ms": "50000"}
        await one.set_group_configs("orders", configs)
        await _until(lambda: two.group_configs() == {"orders": configs}, 10)
        data, _ = zk.get("/config/groups/orders")
        assert json.loads(data) == {"version": 1, "config": configs}
        assert one.client_metrics() == {}
        await two.set_group_configs("orders", {})
        await _until(lambda: one.group_configs() == {}, 10)
        changes = sorted(zk.get_children("/config/changes"))
        paths = [json.loads(zk.get(f"/config/changes/{c}")[0])["entity_path"] for c in changes]
        assert paths == ["groups/orders", "groups/orders"]
    finally:
        zk.stop()
        await one.stop()
        await two.stop()


async def test_mirror_links_live_in_zookeeper_and_reach_every_broker(
    tmp_path: Path, zookeeper: str
) -> None:
    one = _backend(tmp_path, zookeeper, 1)
    two = _backend(tmp_path, zookeeper, 2)
    await one.start()
    await two.start()
    zk = KazooClient(hosts=zookeeper)
    zk.start()
    try:
        configs = {
            "kbroker.mirror.source.bootstrap": "src:9092",
            "kbroker.mirror.topic.regex": "orders-.*",
        }
        await one.set_mirror_link("eu", configs)
        await _until(lambda: two.mirror_links() == {"eu": configs}, 10)
        data, _ = zk.get("/config/kbroker-mirror-links/eu")
        assert json.loads(data) == {"version": 1, "config": configs}
        await two.set_mirror_link("eu", {})
        await _until(lambda: one.mirror_links() == {}, 10)
    finally:
        zk.stop()
        await one.stop()
        await two.stop()
