"""Controller failover, ZooKeeper restarts and expired sessions, preferred elections, and
dynamic broker configs stored in ZooKeeper."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from confluent_kafka import ElectionType, TopicPartition
from helpers import (
    admin,
    call,
    controller_id,
    create_topic,
    full_isr,
    partition_view,
    pause,
    produce_raw,
    resume,
    wait_for,
)
from kazoo.client import KazooClient
from local_cluster import LocalCluster

from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

pytestmark = pytest.mark.slow

PARTITIONS = 3


def _all_led_by_others(cluster: LocalCluster, topic: str, gone: int) -> bool:
    views = [partition_view(cluster, topic, p) for p in range(PARTITIONS)]
    return all(v is not None and v.leader not in (-1, gone) for v in views)


def test_controller_killed_another_takes_over_and_elects(cluster: LocalCluster) -> None:
    topic = "controller-failover"
    create_topic(cluster, topic, PARTITIONS)
    old = controller_id(cluster)
    assert old in cluster.brokers
    led = [
        p for p in range(PARTITIONS) if (v := partition_view(cluster, topic, p)) and v.leader == old
    ]
    cluster.brokers[old].kill()
    new = wait_for(
        lambda: (c := controller_id(cluster)) not in (-1, old) and c, 60, "a new controller"
    )
    assert new != old
    # The partitions the dead controller led were moved by the new controller.
    wait_for(lambda: _all_led_by_others(cluster, topic, old), 60, "leaders for every partition")
    for p in led:
        view = partition_view(cluster, topic, p)
        assert view is not None and old not in view.isr
    cluster.brokers[old].start(timeout=60)
    for p in range(PARTITIONS):
        wait_for(lambda p=p: full_isr(cluster, topic, p), 60, "the returning broker in sync")
    # Preferred-leader election (ElectLeaders) gives the returned broker its leaderships back.
    client = admin(cluster)
    client.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(PARTITIONS)]
    ).result(30)
    for p in range(PARTITIONS):
        wait_for(
            lambda p=p: (v := partition_view(cluster, topic, p)) and v.leader == v.replicas[0],
            30,
            "preferred leaders",
        )


def test_zookeeper_restart_brokers_reregister_and_elections_go_on(cluster: LocalCluster) -> None:
    topic = "zk-restart"
    create_topic(cluster, topic, PARTITIONS)
    cluster.zookeeper.stop()
    time.sleep(3)
    cluster.zookeeper.start()
    wait_for(
        lambda: (
            len(admin(cluster).list_topics(timeout=10).brokers) == 3
            and controller_id(cluster) in cluster.brokers
        ),
        60,
        "three registered brokers and a controller",
    )
    # Elections still happen after the restart.
    view = wait_for(lambda: full_isr(cluster, topic), 60, "a full ISR")
    cluster.brokers[view.leader].kill()
    try:
        wait_for(lambda: _all_led_by_others(cluster, topic, view.leader), 60, "new leaders")
        new_view = partition_view(cluster, topic)
        assert new_view is not None
        assert produce_raw(cluster, new_view.leader, topic, -1, 2) == ErrorCode.NONE
    finally:
        cluster.brokers[view.leader].start(timeout=60)
    wait_for(lambda: full_isr(cluster, topic), 60, "a full ISR again")


def test_broker_whose_session_expired_registers_again(cluster: LocalCluster) -> None:
    topic = "expired"
    create_topic(cluster, topic)
    view = wait_for(lambda: full_isr(cluster, topic), 60, "a full ISR")
    victim = view.leader
    # Paused past zookeeper.session.timeout.ms: its registration goes, leadership moves.
    pause(cluster, victim)
    try:
        wait_for(lambda: _all_led_by_others_one(cluster, topic, victim), 60, "a new leader")
        assert victim not in admin(cluster).list_topics(timeout=10).brokers
    finally:
        resume(cluster, victim)
    wait_for(
        lambda: victim in admin(cluster).list_topics(timeout=10).brokers, 60, "re-registration"
    )
    wait_for(lambda: full_isr(cluster, topic), 60, "the broker back in the ISR")


def _all_led_by_others_one(cluster: LocalCluster, topic: str, gone: int) -> bool:
    view = partition_view(cluster, topic)
    return view is not None and view.leader not in (-1, gone)


def test_only_the_controller_elects_and_reassigns(cluster: LocalCluster) -> None:
    topic = "controller-only"
    create_topic(cluster, topic)
    other = next(b for b in cluster.brokers if b != controller_id(cluster))
    elect = ElectLeadersRequest(topic_partitions=[TopicPartitions(topic=topic, partitions=[0])])
    response = asyncio.run(call(cluster, ApiKey.ELECT_LEADERS, elect, other))
    assert response.error_code == ErrorCode.NOT_CONTROLLER
    move = AlterPartitionReassignmentsRequest(
        topics=[
            ReassignableTopic(
                name=topic, partitions=[ReassignablePartition(partition_index=0, replicas=[1, 2])]
            )
        ]
    )
    response = asyncio.run(call(cluster, ApiKey.ALTER_PARTITION_REASSIGNMENTS, move, other))
    assert response.error_code == ErrorCode.NOT_CONTROLLER
    # The controller itself answers.
    response = asyncio.run(call(cluster, ApiKey.ELECT_LEADERS, elect))
    assert response.error_code == ErrorCode.NONE


BROKER = 4


def _set_broker_configs(cluster: LocalCluster, via: int, name: str, **configs: str) -> None:
    resource = AlterConfigsResource(
        resource_type=BROKER,
        resource_name=name,
        configs=[AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()],
    )
    request = IncrementalAlterConfigsRequest(resources=[resource])
    response = asyncio.run(call(cluster, ApiKey.INCREMENTAL_ALTER_CONFIGS, request, via))
    assert response.responses[0].error_code == 0, response.responses[0].error_message


def _in_force(cluster: LocalCluster, broker_id: int, name: str) -> tuple[str, int]:
    resource = DescribeConfigsResource(
        resource_type=BROKER, resource_name=str(broker_id), configuration_keys=[name]
    )
    request = DescribeConfigsRequest(resources=[resource])
    response = asyncio.run(call(cluster, ApiKey.DESCRIBE_CONFIGS, request, broker_id))
    entry = response.results[0].configs[0]
    return entry.value, entry.config_source


def test_dynamic_broker_configs_live_in_zookeeper(cluster: LocalCluster) -> None:
    """Set through one broker, stored and announced as Kafka does, in force on every broker
    at once (this broker's own value over the cluster default), kept across a restart."""
    _set_broker_configs(cluster, 1, "", **{"log.cleaner.threads": "2"})
    _set_broker_configs(cluster, 2, "2", **{"log.cleaner.threads": "3"})
    wanted = {1: ("2", 3), 2: ("3", 2), 3: ("2", 3)}
    wait_for(
        lambda: (
            all(
                _in_force(cluster, b, "log.cleaner.threads") == value for b, value in wanted.items()
            )
            or None
        ),
        30,
        "the dynamic configs in force on every broker",
    )
    zk = KazooClient(hosts=cluster.zookeeper.connect)
    zk.start(timeout=30)
    try:
        default, _ = zk.get("/config/brokers/<default>")
        own, _ = zk.get("/config/brokers/2")
        changes = [
            json.loads(zk.get(f"/config/changes/{c}")[0])
            for c in zk.get_children("/config/changes")
        ]
    finally:
        zk.stop()
        zk.close()
    assert json.loads(default) == {"version": 1, "config": {"log.cleaner.threads": "2"}}
    assert json.loads(own) == {"version": 1, "config": {"log.cleaner.threads": "3"}}
    assert {"version": 2, "entity_path": "brokers/<default>"} in changes
    assert {"version": 2, "entity_path": "brokers/2"} in changes
    cluster.brokers[3].restart(timeout=60)
    cluster.wait_registered()
    assert _in_force(cluster, 3, "log.cleaner.threads") == ("2", 3)
    assert "log cleaner reconfigured: 2 threads" in cluster.brokers[1].stderr_path.read_text()
