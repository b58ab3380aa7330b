"""Client telemetry end to end (KIP-714): ``kbroker client-metrics`` against a running
broker, and a real client (confluent-kafka, i.e. librdkafka) pushing its metrics under the
subscription, seen on the broker's /metrics, and gone once it closes."""

from __future__ import annotations

import json
import time
import urllib.request

from confluent_kafka import Producer

from tests.ops.support import Cli, OpsBroker


def _telemetry_lines(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return [line for line in text.splitlines() if line.startswith("org_apache_kafka_")]


def test_client_metrics_commands(ops_broker: OpsBroker, cli: Cli) -> None:
    boot = ("--bootstrap-server", ops_broker.bootstrap)
    result = cli(
        "client-metrics", "alter", *boot, "--name", "apps", "--metrics", "org.apache.kafka.",
        "--interval", "2000", "--match", "client_id=app-.*",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "apps" in cli("client-metrics", "list", *boot).out.split()
    described = json.loads(cli("client-metrics", "describe", *boot, "--name", "apps", "--json").out)
    assert described == {
        "apps": {"interval.ms": "2000", "match": "client_id=app-.*", "metrics": "org.apache.kafka."}
    }
    assert cli("client-metrics", "alter", *boot, "--name", "apps", "--interval", "").code == 0
    table = cli("client-metrics", "describe", *boot).out
    assert "300000" in table and "client_id=app-.*" in table
    bad = cli("client-metrics", "alter", *boot, "--name", "apps", "--interval", "5")
    assert bad.code == 1 and "interval must be between 100 and 3600000" in bad.err
    assert cli("client-metrics", "delete", *boot, "--name", "apps").code == 0
    gone = cli("client-metrics", "describe", *boot, "--name", "apps")
    assert gone.code == 1 and "does not exist" in gone.err


def test_librdkafka_pushes_its_metrics_under_a_subscription(
    ops_broker: OpsBroker, cli: Cli
) -> None:
    boot = ("--bootstrap-server", ops_broker.bootstrap)
    subscribe = cli(
        "client-metrics", "alter", *boot, "--name", "producers",
        "--metrics", "org.apache.kafka.producer.", "--interval", "500",
    )  # fmt: skip
    assert subscribe.code == 0, subscribe.err
    producer = Producer({"bootstrap.servers": ops_broker.bootstrap, "client.id": "telemetry-app"})
    try:
        deadline = time.monotonic() + 60
        mine: list[str] = []
        while not any("node_request_latency_avg" in line for line in mine):
            assert time.monotonic() < deadline, "no pushed metrics on /metrics"
            producer.produce("telemetry-topic", b"x" * 100)
            producer.poll(0.2)
            mine = [
                line
                for line in _telemetry_lines(ops_broker.metrics_port)
                if 'client_id="telemetry-app"' in line
            ]
        assert all(line.startswith("org_apache_kafka_producer_") for line in mine)
        assert 'client_software_name="confluent-kafka-python"' in mine[0]
        assert 'client_instance_id="' in mine[0]
        assert producer.flush(30) == 0
    finally:
        producer.flush(10)
        del producer  # closes: librdkafka's last push is a terminating one
    deadline = time.monotonic() + 30
    while any(
        'client_id="telemetry-app"' in line for line in _telemetry_lines(ops_broker.metrics_port)
    ):
        assert time.monotonic() < deadline, "series still exported after the client closed"
        time.sleep(0.2)
    assert cli("client-metrics", "delete", *boot, "--name", "producers").code == 0
