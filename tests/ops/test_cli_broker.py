"""The operations CLI against a real kbroker process, and a scrape of its metrics endpoint."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from compat_tests.broker_process import free_port
from kbroker.client_core.partitioner import partition_for_key
from tests.ops.support import Cli, OpsBroker

pytestmark = pytest.mark.slow


def test_health_ok_and_unreachable(ops_broker: OpsBroker, cli: Cli) -> None:
    ok = cli("health", "--bootstrap-server", ops_broker.bootstrap)
    assert ok.code == 0, ok.err
    assert ok.out.startswith("ok: cluster ")
    as_json = json.loads(cli("health", "--bootstrap-server", ops_broker.bootstrap, "--json").out)
    assert as_json["status"] == "ok"
    assert as_json["brokers"] == 1
    down = cli("health", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--timeout", "2")
    assert down.code == 1
    assert down.err.startswith("kbroker: error: cannot reach")


def test_topic_lifecycle(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    created = cli(
        "topics",
        "create",
        *b,
        "--topic",
        "ops-life",
        "--partitions",
        "2",
        "--config",
        "retention.ms=3600000",
    )
    assert created.code == 0, created.err
    assert "created (2 partitions" in created.err
    again = cli("topics", "create", *b, "--topic", "ops-life", "--partitions", "2")
    assert again.code == 1
    assert "TOPIC_ALREADY_EXISTS" in again.err
    tolerant = cli("topics", "create", *b, "--topic", "ops-life", "--if-not-exists")
    assert tolerant.code == 0
    assert "ops-life" in cli("topics", "list", *b).out.split()

    altered = cli(
        "topics",
        "alter",
        *b,
        "--topic",
        "ops-life",
        "--partitions",
        "3",
        "--config",
        "cleanup.policy=compact",
        "--delete-config",
        "retention.ms",
    )
    assert altered.code == 0, altered.err
    described = cli("topics", "describe", *b, "--topic", "ops-life")
    assert described.code == 0, described.err
    lines = described.out.splitlines()
    assert lines[0].startswith("Topic: ops-life  TopicId: ")
    assert "PartitionCount: 3  ReplicationFactor: 1  Configs: cleanup.policy=compact" in lines[0]
    assert lines[1].split() == ["PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"]
    assert [line.split()[0] for line in lines[2:5]] == ["0", "1", "2"]
    [as_json] = json.loads(cli("topics", "describe", *b, "--topic", "ops-life", "--json").out)
    assert as_json["configs"] == {"cleanup.policy": "compact"}
    assert [p["isr"] for p in as_json["partitions"]] == [[0], [0], [0]]

    nothing = cli("topics", "alter", *b, "--topic", "ops-life")
    assert nothing.code == 1
    assert "nothing to alter" in nothing.err
    deleted = cli("topics", "delete", *b, "--topic", "ops-life")
    assert deleted.code == 0, deleted.err
    assert "ops-life" not in cli("topics", "list", *b).out.split()
    missing = cli("topics", "delete", *b, "--topic", "ops-life")
    assert missing.code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.err
    assert cli("topics", "delete", *b, "--topic", "ops-life", "--if-exists").code == 0


def test_console_producer_and_consumer(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    assert cli("topics", "create", *b, "--topic", "ops-console", "--partitions", "3").code == 0
    lines = "".join(f"h:{i}\tk{i}=v{i}\n" for i in range(20))
    produced = cli(
        "console-producer",
        *b,
        "--topic",
        "ops-console",
        "--key-separator",
        "=",
        "--parse-headers",
        "--header",
        "src=test",
        "--json",
        stdin=lines,
    )
    assert produced.code == 0, produced.err
    summary = json.loads(produced.out)
    assert summary["records"] == 20
    consumed = cli(
        "console-consumer",
        *b,
        "--topic",
        "ops-console",
        "--from-beginning",
        "--max-messages",
        "20",
        "--json",
    )
    assert consumed.code == 0, consumed.err
    records = [json.loads(line) for line in consumed.out.splitlines()]
    assert sorted(r["value"] for r in records) == sorted(f"v{i}" for i in range(20))
    for r in records:
        i = r["key"][1:]
        assert r["headers"] == [["src", "test"], ["h", i]]
        assert r["partition"] == partition_for_key(r["key"].encode(), 3)
    assert "Processed a total of 20 messages" in consumed.err

    text = cli(
        "console-consumer",
        *b,
        "--topic",
        "ops-console",
        "--partition",
        str(records[0]["partition"]),
        "--offset",
        "0",
        "--max-messages",
        "1",
        "--print-key",
        "--key-separator",
        "|",
    )
    first = [r for r in records if r["partition"] == records[0]["partition"]][0]
    assert text.out == f"{first['key']}|{first['value']}\n"

    # Latest by default: nothing is old enough to print, the timeout ends the run.
    idle = cli("console-consumer", *b, "--topic", "ops-console", "--timeout-ms", "300")
    assert (idle.code, idle.out) == (0, "")


def test_consumer_group_resumes_where_it_committed(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    assert cli("topics", "create", *b, "--topic", "ops-group", "--partitions", "1").code == 0
    cli("console-producer", *b, "--topic", "ops-group", stdin="a\nb\nc\n")
    group = ("--topic", "ops-group", "--group", "ops-g", "--from-beginning")
    first = cli("console-consumer", *b, *group, "--max-messages", "2")
    assert first.out == "a\nb\n", first.err
    second = cli("console-consumer", *b, *group, "--timeout-ms", "500")
    assert second.out == "c\n", second.err


def test_console_producer_asks_for_a_missing_topic(ops_broker: OpsBroker, cli: Cli) -> None:
    """Like Kafka's console producer and kcat, a missing topic is auto-created by the broker
    (auto.create.topics.enable, on by default) instead of refused."""
    b = ("--bootstrap-server", ops_broker.bootstrap)
    assert "ops-auto" not in cli("topics", "list", *b).out.split()
    produced = cli("console-producer", *b, "--topic", "ops-auto", stdin="x\n")
    assert produced.code == 0, produced.err
    assert "ops-auto" in cli("topics", "list", *b).out.split()
    consumed = cli(
        "console-consumer", *b, "--topic", "ops-auto", "--from-beginning", "--max-messages", "1"
    )
    assert consumed.out == "x\n", consumed.err


def test_errors_exit_non_zero_with_a_message(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    produced = cli("console-producer", *b, "--topic", "ops/none", stdin="x\n")
    assert produced.code == 1
    assert "kbroker: error: topic 'ops/none': INVALID_TOPIC_EXCEPTION" in produced.err
    bad = cli("topics", "list", "--bootstrap-server", "no-port")
    assert bad.code == 1
    assert "expected HOST:PORT" in bad.err
    usage = cli("topics", "create", *b)
    assert usage.code == 2
    assert "--topic" in usage.err


def test_cluster_describe(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    result = cli("cluster", "describe", *b)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("Cluster ID: ")
    assert lines[1] == "Controller: 0"
    assert lines[2].split() == ["BROKER", "HOST", "PORT", "RACK", "CONTROLLER"]
    assert lines[3].split() == ["0", "127.0.0.1", str(ops_broker.process.port), "yes"]
    assert "Under-replicated: 0  Offline: 0" in lines[4]
    as_json = json.loads(cli("cluster", "describe", *b, "--json").out)
    assert as_json["controller"] == 0
    assert as_json["under_replicated"] == as_json["offline"] == []


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_metrics_scrape(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    assert cli("topics", "create", *b, "--topic", "ops-metrics", "--partitions", "1").code == 0
    cli("console-producer", *b, "--topic", "ops-metrics", stdin="one\ntwo\nthree\n")
    read = cli(
        "console-consumer",
        *b,
        "--topic",
        "ops-metrics",
        "--group",
        "ops-lag",
        "--from-beginning",
        "--max-messages",
        "1",
    )
    assert read.out == "one\n"
    m = _scrape(ops_broker.metrics_port)
    assert m['kbroker_requests_total{api="PRODUCE"}'] >= 1
    assert m['kbroker_request_latency_seconds_count{api="METADATA"}'] >= 1
    assert m['kbroker_bytes_in_total{topic="ops-metrics"}'] > 0
    assert m['kbroker_bytes_out_total{topic="ops-metrics"}'] > 0
    assert m['kbroker_log_size_bytes{topic="ops-metrics",partition="0"}'] > 0
    assert m['kbroker_log_end_offset{topic="ops-metrics",partition="0"}'] == 3
    assert m['kbroker_consumer_group_lag{group="ops-lag",topic="ops-metrics",partition="0"}'] == 2
    # The console consumer's classic group went through a generation and is empty again.
    assert m['kbroker_groups{type="classic",state="Empty"}'] >= 1
    assert m['kbroker_group_rebalances_total{type="classic"}'] >= 1
    assert m["kbroker_active_controller"] == 1
    assert m["kbroker_under_replicated_partitions"] == 0
    assert m['kbroker_purgatory_size{purgatory="fetch"}'] == 0
    assert m["kbroker_isr_shrinks_total"] == m["kbroker_isr_expands_total"] == 0


def test_consumers_of_one_group_share_the_partitions(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    assert cli("topics", "create", *b, "--topic", "ops-shared", "--partitions", "2").code == 0
    values = [f"r{i}" for i in range(20)]
    cli("console-producer", *b, "--topic", "ops-shared", stdin="\n".join(values) + "\n")
    argv = [
        sys.executable,
        "-m",
        "kbroker",
        "console-consumer",
        *b,
        "--topic",
        "ops-shared",
        "--group",
        "ops-shared-g",
        "--from-beginning",
        "--timeout-ms",
        "6000",
        "--json",
    ]
    consumers = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [c.communicate(timeout=120) for c in consumers]
    assert [c.returncode for c in consumers] == [0, 0], [err for _, err in outputs]
    seen = [[json.loads(line) for line in out.splitlines()] for out, _ in outputs]
    assert sorted(r["value"] for records in seen for r in records) == sorted(values)
    partitions = [{r["partition"] for r in records} for records in seen]
    assert partitions[0].isdisjoint(partitions[1])
