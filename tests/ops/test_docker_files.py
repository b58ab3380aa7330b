"""The docker/ files, checked without a Docker engine: hadolint on the Dockerfile,
``docker-compose config`` on both compose files, and every KBROKER_* setting in them is a
property the broker accepts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kbroker.config import BrokerConfig, env_properties

DOCKER = Path(__file__).resolve().parents[2] / "docker"
BIN = Path(sys.executable).parent
# docker-compose lives in an environment of its own (its jsonschema<4 pin, see the Makefile).
COMPOSE_BIN = Path(__file__).resolve().parents[2] / ".venv-compose" / "bin"
COMPOSE_FILES = ("docker-compose.yml", "docker-compose.single.yml", "docker-compose.secure.yml")


def _tool(name: str) -> str:
    found = shutil.which(name, path=f"{COMPOSE_BIN}:{BIN}") or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (make install)")
    return found


def _compose_config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("docker-compose"), "-f", str(path), "config"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_hadolint_passes_on_the_dockerfile() -> None:
    result = subprocess.run(
        [_tool("hadolint"), "--no-color", str(DOCKER / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_rejects_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN cd /tmp && pip install requests\n")
    result = subprocess.run(
        [_tool("hadolint"), "--no-color", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_file_validates(name: str) -> None:
    result = _compose_config(DOCKER / name)
    assert result.returncode == 0, result.stderr


def test_compose_validation_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  kbroker:\n    image: kbroker\n    depends_on: 7\n")
    assert _compose_config(broken).returncode != 0


def _services(name: str) -> dict[str, dict]:
    return yaml.safe_load(_compose_config(DOCKER / name).stdout)["services"]


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_broker_environment_is_a_valid_configuration(name: str) -> None:
    brokers = {s: spec for s, spec in _services(name).items() if s.startswith("kbroker")}
    assert brokers
    for service, spec in brokers.items():
        env = {k: str(v) for k, v in spec["environment"].items() if k.startswith("KBROKER_")}
        props = env_properties(env)
        assert set(props) == {k.removeprefix("KBROKER_").lower().replace("_", ".") for k in env}, (
            f"{service}: a KBROKER_* variable names no property"
        )
        BrokerConfig.from_properties(props)


def test_cluster_brokers_are_distinct_and_wait_for_zookeeper() -> None:
    services = _services("docker-compose.yml")
    assert services["zookeeper"]["image"].startswith("zookeeper:")
    assert "healthcheck" in services["zookeeper"]
    brokers = {s: spec for s, spec in services.items() if s.startswith("kbroker")}
    assert len(brokers) == 3
    ids = {spec["environment"]["KBROKER_BROKER_ID"] for spec in brokers.values()}
    advertised = {spec["environment"]["KBROKER_ADVERTISED_LISTENERS"] for spec in brokers.values()}
    volumes = {spec["volumes"][0].split(":")[0] for spec in brokers.values()}
    assert len(ids) == len(advertised) == len(volumes) == 3
    for service, spec in brokers.items():
        assert f"//{service}:" in spec["environment"]["KBROKER_ADVERTISED_LISTENERS"]
        assert spec["depends_on"]["zookeeper"]["condition"] == "service_healthy"
        assert spec["healthcheck"]["test"][1:3] == ["kbroker", "health"]


def test_single_broker_has_no_zookeeper() -> None:
    services = _services("docker-compose.single.yml")
    assert sorted(services) == ["console", "kbroker"]
    assert "KBROKER_ZOOKEEPER_CONNECT" not in services["kbroker"]["environment"]


def test_cluster_brokers_publish_an_external_listener_on_the_host() -> None:
    brokers = {
        s: spec for s, spec in _services("docker-compose.yml").items() if s.startswith("kbroker")
    }
    host_ports = set()
    for service, spec in brokers.items():
        config = BrokerConfig.from_properties(env_properties(spec["environment"]))
        assert [lst.name for lst in config.listeners] == ["INTERNAL", "EXTERNAL"]
        assert config.inter_broker_listener_name == "INTERNAL"
        advertised = {lst.name: (lst.host, lst.port) for lst in config.advertised_listeners}
        assert advertised["INTERNAL"] == (service, 9092)
        host, port = advertised["EXTERNAL"]
        assert host == "localhost"
        # The advertised port is published on the host, onto the EXTERNAL listener's port.
        assert config.listeners[1].port == port
        assert {(int(p["published"]), int(p["target"])) for p in spec["ports"]} == {(port, port)}
        host_ports.add(port)
    assert host_ports == {19092, 19093, 19094}


def test_secure_cluster_speaks_sasl_ssl_everywhere() -> None:
    services = _services("docker-compose.secure.yml")
    brokers = {s: spec for s, spec in services.items() if s.startswith("kbroker")}
    assert len(brokers) == 3
    for spec in brokers.values():
        env = spec["environment"]
        # The brokers' own SCRAM user is written to ZooKeeper before the broker starts.
        command = spec["command"][0]
        assert command.index("--zookeeper zookeeper:2181") < command.index("kbroker start")
        assert spec["depends_on"]["zookeeper"]["condition"] == "service_healthy"
        assert (
            env["KBROKER_LISTENER_SECURITY_PROTOCOL_MAP"] == "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL"
        )
        assert env["KBROKER_SASL_MECHANISM_INTER_BROKER_PROTOCOL"] == "SCRAM-SHA-512"
        assert any(v.endswith(":/etc/kbroker/tls:ro") for v in spec["volumes"])
