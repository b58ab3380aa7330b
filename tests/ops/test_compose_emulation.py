"""The compose files' broker services, each run as its own host in a network namespace with
the image's entrypoint and the service's environment (see compose_emulation.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.support import require
from tests.ops.compose_emulation import (
    Network,
    can_emulate,
    compose_services,
    healthcheck,
    start_broker,
    start_zookeeper,
    wait_until,
    zookeeper_healthy,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def network(tmp_path: Path) -> Iterator[Network]:
    reason = can_emulate()
    require(reason is None, str(reason))
    net = Network(tmp_path)
    try:
        yield net
    finally:
        net.close()


def _cli(net: Network, host: str, *argv: str, stdin: str = "") -> str:
    result = net.run(host, ["kbroker", *argv], stdin=stdin)
    assert result.returncode == 0, f"kbroker {' '.join(argv)}: {result.stderr}"
    return result.stdout


def test_single_broker_compose_service(network: Network, tmp_path: Path) -> None:
    services = compose_services("docker-compose.single.yml")
    spec = services["kbroker"]
    network.open(["kbroker"])
    start_broker(network, "kbroker", spec, tmp_path)
    wait_until(lambda: healthcheck(network, "kbroker", spec), "healthy", 90, network, ["kbroker"])
    # The advertised address is localhost:9092, the port published to the host; tools in the
    # broker's own namespace stand in for a client on the Docker host.
    b = ("--bootstrap-server", "localhost:9092")
    _cli(network, "kbroker", "topics", "create", *b, "--topic", "single", "--partitions", "2")
    lines = "".join(f"k{i}:v{i}\n" for i in range(10))
    _cli(
        network,
        "kbroker",
        "console-producer",
        *b,
        "--topic",
        "single",
        "--key-separator",
        ":",
        stdin=lines,
    )
    out = _cli(
        network,
        "kbroker",
        "console-consumer",
        *b,
        "--topic",
        "single",
        "--from-beginning",
        "--max-messages",
        "10",
        "--print-key",
        "--key-separator",
        ":",
    )
    assert sorted(out.splitlines()) == sorted(lines.splitlines())
    cluster = json.loads(_cli(network, "kbroker", "cluster", "describe", *b, "--json"))
    assert [(x["id"], x["host"], x["port"]) for x in cluster["brokers"]] == [(0, "localhost", 9092)]
    assert network.stop("kbroker") == 0


def _describe(net: Network, bootstrap: str) -> dict:
    return json.loads(
        _cli(net, "client", "cluster", "describe", "--bootstrap-server", bootstrap, "--json")
    )


def test_three_broker_compose_cluster(network: Network, tmp_path: Path) -> None:
    services = compose_services("docker-compose.yml")
    brokers = sorted(s for s in services if s.startswith("kbroker"))
    assert brokers == ["kbroker-1", "kbroker-2", "kbroker-3"]
    network.open(["zookeeper", *brokers, "client"])
    everyone = ["zookeeper", *brokers]

    # depends_on: zookeeper healthy, then the brokers; each waits for its own healthcheck.
    start_zookeeper(network, tmp_path)
    wait_until(lambda: zookeeper_healthy(network, "client"), "zookeeper", 90, network, everyone)
    for service in brokers:
        start_broker(network, service, services[service], tmp_path)
    for service in brokers:

        def healthy(s: str = service) -> bool:
            return healthcheck(network, s, services[s])

        wait_until(healthy, f"{service} healthy", 120, network, everyone)
    bootstrap = ",".join(f"{s}:9092" for s in brokers)

    def registered() -> dict | None:
        d = _describe(network, bootstrap)
        return d if len(d["brokers"]) == 3 else None

    cluster = wait_until(registered, "three brokers registered", 60, network, everyone)
    assert {(x["id"], x["host"]) for x in cluster["brokers"]} == {
        (1, "kbroker-1"),
        (2, "kbroker-2"),
        (3, "kbroker-3"),
    }
    assert cluster["controller"] in (1, 2, 3)
    # Through EXTERNAL every broker is named as a client on the Docker host reaches it. In a
    # broker's own namespace its published port stands in for the host's.
    for index, service in enumerate(brokers):
        external = _cli(
            network, service, "cluster", "describe", "--bootstrap-server",
            f"localhost:{19092 + index}", "--json",
        )  # fmt: skip
        assert {(x["id"], x["host"], x["port"]) for x in json.loads(external)["brokers"]} == {
            (1, "localhost", 19092),
            (2, "localhost", 19093),
            (3, "localhost", 19094),
        }

    _cli(
        network,
        "client",
        "topics",
        "create",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
    )
    _cli(
        network, "client", "topics", "create", "--bootstrap-server", bootstrap,
        "--topic", "wide", "--partitions", "12", "--replication-factor", "3",
    )  # fmt: skip
    [topic] = json.loads(
        _cli(
            network,
            "client",
            "topics",
            "describe",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "orders",
            "--json",
        )
    )
    assert all(sorted(p["replicas"]) == [1, 2, 3] for p in topic["partitions"])
    # Produce and consume through each broker in turn.
    sent: list[str] = []
    for service in brokers:
        lines = [f"{service}-{i}" for i in range(5)]
        _cli(
            network,
            "client",
            "console-producer",
            "--bootstrap-server",
            f"{service}:9092",
            "--topic",
            "orders",
            stdin="\n".join(lines) + "\n",
        )
        sent += lines
    for service in brokers:
        out = _cli(
            network,
            "client",
            "console-consumer",
            "--bootstrap-server",
            f"{service}:9092",
            "--topic",
            "orders",
            "--from-beginning",
            "--max-messages",
            str(len(sent)),
            "--timeout-ms",
            "30000",
        )
        assert sorted(out.splitlines()) == sorted(sent)

    # Kill one broker: once ZooKeeper expires its session, the others lead everything.
    victim = "kbroker-3"
    network.kill(victim)
    survivors = ",".join(f"{s}:9092" for s in brokers if s != victim)

    def recovered() -> dict | None:
        d = _describe(network, survivors)
        return d if len(d["brokers"]) == 2 and not d["offline"] else None

    after = wait_until(recovered, "failover", 120, network, everyone)
    assert after["under_replicated"], "partitions should have lost broker 3 from their ISR"
    text = _cli(network, "client", "cluster", "describe", "--bootstrap-server", survivors)
    # orders and wide have 15 partitions, all under-replicated: the listing is cut short.
    assert "more under-replicated (see --json)" in text
    more = [f"after-kill-{i}" for i in range(5)]
    _cli(
        network,
        "client",
        "console-producer",
        "--bootstrap-server",
        survivors,
        "--topic",
        "orders",
        stdin="\n".join(more) + "\n",
    )
    out = _cli(
        network,
        "client",
        "console-consumer",
        "--bootstrap-server",
        survivors,
        "--topic",
        "orders",
        "--from-beginning",
        "--max-messages",
        str(len(sent) + 5),
        "--timeout-ms",
        "30000",
    )
    assert sorted(out.splitlines()) == sorted(sent + more)
