"""ZooKeeper payloads round-trip in Kafka's JSON layouts."""

from __future__ import annotations

import json
import uuid

from controller import zk_paths
from controller.interface import Endpoint
from controller.zk_paths import PartitionState


def test_partition_state_layout() -> None:
    state = PartitionState(2, 5, (2, 3), 9)
    data = zk_paths.encode_state(state)
    assert json.loads(data) == {
        "version": 1,
        "controller_epoch": 9,
        "leader": 2,
        "leader_epoch": 5,
        "isr": [2, 3],
    }
    assert zk_paths.decode_state(data) == state


def test_assignment_carries_the_topic_id() -> None:
    topic_id = uuid.uuid4()
    data = zk_paths.encode_assignment(topic_id, [(1, 2), (2, 3)])
    obj = json.loads(data)
    assert obj["partitions"] == {"0": [1, 2], "1": [2, 3]}
    assert obj["version"] == 3
    assert zk_paths.decode_assignment(data) == (topic_id, [(1, 2), (2, 3)])


def test_broker_controller_config_and_cluster_id() -> None:
    data = zk_paths.encode_broker("127.0.0.1", 9092, "r1", 123)
    assert json.loads(data)["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert zk_paths.decode_broker(data) == ("127.0.0.1", 9092, "r1")
    assert zk_paths.decode_controller(zk_paths.encode_controller(4, 1)) == 4
    assert zk_paths.decode_config(zk_paths.encode_config({"a": "1"})) == {"a": "1"}
    assert zk_paths.decode_config(b"") == {}
    assert zk_paths.decode_cluster_id(zk_paths.encode_cluster_id("abc")) == "abc"


def test_paths() -> None:
    assert zk_paths.state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert zk_paths.broker_path(7) == "/brokers/ids/7"
    assert zk_paths.topic_config_path("t") == "/config/topics/t"


def test_broker_registration_lists_every_endpoint() -> None:
    endpoints = [Endpoint("INTERNAL", "b1", 9092), Endpoint("EXTERNAL", "::1", 19092)]
    data = zk_paths.encode_broker("b1", 9092, None, 123, endpoints)
    obj = json.loads(data)
    assert obj["endpoints"] == ["INTERNAL://b1:9092", "EXTERNAL://[::1]:19092"]
    assert obj["listener_security_protocol_map"] == {
        "INTERNAL": "PLAINTEXT",
        "EXTERNAL": "PLAINTEXT",
    }
    assert zk_paths.decode_broker(data) == ("b1", 9092, None)
    assert zk_paths.decode_broker_endpoints(data) == tuple(endpoints)


def test_log_dir_event_is_kafkas_notification() -> None:
    # Kafka 3.9's LogDirEventNotificationSequenceZNode: compact JSON, event 1 = LogDirFailure.
    assert zk_paths.LOG_DIR_EVENT_PREFIX == "/log_dir_event_notification/log_dir_event_"
    data = zk_paths.encode_log_dir_event(2)
    assert data == b'{"version":1,"broker":2,"event":1}'
    assert zk_paths.decode_log_dir_event(data) == (2, 1)


def test_offline_replicas_round_trip() -> None:
    offline = zk_paths.OfflineReplicas(("/data/b",), frozenset({("t", 1), ("a", 0)}))
    data = zk_paths.encode_offline_replicas(offline)
    assert json.loads(data)["partitions"] == [["a", 0], ["t", 1]]
    assert zk_paths.decode_offline_replicas(data) == offline
    assert zk_paths.offline_replicas_path(3) == "/kbroker/offline_replicas/3"
