"""docker/entrypoint.sh, run with a stand-in ``kbroker`` that prints what it was given."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

ENTRYPOINT = Path(__file__).resolve().parents[2] / "docker" / "entrypoint.sh"
STUB = '#!/bin/sh\necho "args=$*"\necho "advertised=${KBROKER_ADVERTISED_LISTENERS:-}"\n'


def _run(tmp_path: Path, *args: str, **env: str) -> list[str]:
    stub = tmp_path / "bin" / "kbroker"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(STUB)
    stub.chmod(0o755)
    environ = {
        "PATH": f"{stub.parent}:/usr/bin:/bin",
        "KBROKER_CONFIG_FILE": str(tmp_path / "server.properties"),
        **env,
    }
    result = subprocess.run(
        ["sh", str(ENTRYPOINT), *args], env=environ, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_default_command_starts_the_broker(tmp_path: Path) -> None:
    assert _run(tmp_path)[0] == "args=start"


def test_mounted_properties_file_is_the_base_configuration(tmp_path: Path) -> None:
    (tmp_path / "server.properties").write_text("broker.id=4\n")
    lines = _run(tmp_path, "kbroker", "start", "--override", "num.partitions=2")
    assert lines[0] == f"args=start {tmp_path / 'server.properties'} --override num.partitions=2"


def test_an_explicit_properties_file_wins(tmp_path: Path) -> None:
    (tmp_path / "server.properties").write_text("broker.id=4\n")
    assert _run(tmp_path, "kbroker", "start", "/other.properties")[0] == (
        "args=start /other.properties"
    )


def test_wildcard_listener_is_advertised_under_the_host_name(tmp_path: Path) -> None:
    lines = _run(tmp_path, KBROKER_LISTENERS="PLAINTEXT://0.0.0.0:9092")
    assert lines[1] == f"advertised=PLAINTEXT://{socket.gethostname()}:9092"


def test_explicit_advertised_listeners_are_kept(tmp_path: Path) -> None:
    lines = _run(
        tmp_path,
        KBROKER_LISTENERS="PLAINTEXT://0.0.0.0:9092",
        KBROKER_ADVERTISED_LISTENERS="PLAINTEXT://b1:9092",
    )
    assert lines[1] == "advertised=PLAINTEXT://b1:9092"


def test_other_commands_run_as_given(tmp_path: Path) -> None:
    assert _run(tmp_path, "kbroker", "topics", "list")[0] == "args=topics list"
    assert _run(tmp_path, "echo", "hi") == ["hi"]
    assert os.access(ENTRYPOINT, os.X_OK)
