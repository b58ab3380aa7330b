"""Run the services of a compose file as separate hosts without Docker: one network namespace
per service (ip netns), joined by veth pairs to a bridge in a namespace of their own, each with
one address and a hosts file naming every service (so ``kbroker-1:9092`` and
``zookeeper:2181`` resolve as on a compose network). Nothing touches the host's own network
namespace: traffic stays between the addresses created here.

Each broker service runs docker/entrypoint.sh with the service's ``environment`` and the
image's CMD, as the container would. Two substitutions, because there is no image: the named
volume mounted on log.dirs becomes a directory under the test's tmp dir, and ``kbroker`` comes
from the repository's virtualenv. The ``zookeeper`` service (the official image in compose)
runs Debian's ZooKeeper server on the same client port.

Needs root (we create namespaces). Every namespace and /etc/netns entry made here is removed
by ``close()``, which the tests call in a finally block.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
VENV_BIN = Path(sys.executable).parent
# docker-compose lives in an environment of its own (its jsonschema<4 pin, see the Makefile).
COMPOSE_BIN = REPO / ".venv-compose" / "bin"
SUBNET = "10.207.7"
ZK_CLIENT_PORT = 2181
ZK_CLASSPATH = "/usr/share/java/*"
ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
_ZK_PROBE = (
    "import socket,sys\n"
    "s=socket.create_connection((sys.argv[1],int(sys.argv[2])),2)\n"
    "s.sendall(b'srvr')\n"
    "sys.exit(0 if b'Mode:' in s.recv(4096) else 1)\n"
)


def can_emulate() -> str | None:
    """Why the emulation cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 is not installed"
    if not Path("/usr/bin/java").exists() or not list(Path("/usr/share/java").glob("zookeeper*")):
        return "Debian's zookeeper package is not installed"
    return None


def compose_services(name: str) -> dict[str, dict[str, Any]]:
    """The services of docker/<name> as ``docker-compose config`` resolves them."""
    result = subprocess.run(
        [str(COMPOSE_BIN / "docker-compose"), "-f", str(DOCKER / name), "config"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    services: dict[str, dict[str, Any]] = yaml.safe_load(result.stdout)["services"]
    return services


def image_cmd() -> list[str]:
    """The Dockerfile's CMD (exec form)."""
    for line in (DOCKER / "Dockerfile").read_text().splitlines():
        if line.startswith("CMD ["):
            cmd: list[str] = json.loads(line.removeprefix("CMD "))
            return cmd
    raise AssertionError("the Dockerfile has no CMD")


class Network:
    """Hosts in network namespaces on one bridge."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.tag = "kbo" + secrets.token_hex(3)
        self.switch = f"{self.tag}-sw"
        self.hosts: dict[str, tuple[str, str]] = {}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._created: list[str] = []

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    def open(self, names: Sequence[str]) -> None:
        """Create the switch and one host per name, then write every host's hosts file."""
        self._ip("netns", "add", self.switch)
        self._created.append(self.switch)
        self._ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        self._ip("-n", self.switch, "link", "set", "br0", "up")
        for index, name in enumerate(names):
            ns = f"{self.tag}-{index}"
            address = f"{SUBNET}.{index + 10}"
            self._ip("netns", "add", ns)
            self._created.append(ns)
            port = f"p{index}"
            self._ip(
                "link",
                "add",
                port,
                "netns",
                self.switch,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                ns,
            )
            self._ip("-n", self.switch, "link", "set", port, "master", "br0")
            self._ip("-n", self.switch, "link", "set", port, "up")
            self._ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            self._ip("-n", ns, "link", "set", "eth0", "up")
            self._ip("-n", ns, "link", "set", "lo", "up")
            self.hosts[name] = (ns, address)
        lines = ["127.0.0.1 localhost"] + [f"{a} {n}" for n, (_, a) in self.hosts.items()]
        for ns, _ in self.hosts.values():
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text("\n".join(lines) + "\n")

    def _argv(self, host: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.hosts[host][0], *argv]

    def start(self, host: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
        with open(self.work_dir / f"{host}.log", "ab") as log:
            self.processes[host] = subprocess.Popen(
                self._argv(host, argv),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def run(
        self, host: str, argv: Sequence[str], *, stdin: str = "", timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._argv(host, argv),
            env=tool_env(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def kill(self, host: str) -> None:
        proc = self.processes.pop(host)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)

    def stop(self, host: str) -> int:
        proc = self.processes.pop(host)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        return proc.returncode

    def log_tail(self, host: str, chars: int = 3000) -> str:
        path = self.work_dir / f"{host}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- {host} ---\n{text[-chars:]}"

    def close(self) -> None:
        for host in list(self.processes):
            self.kill(host)
        for ns in reversed(self._created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        self._created.clear()


def tool_env() -> dict[str, str]:
    """Environment for commands run inside a namespace: the venv's tools first."""
    return {
        "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }


def broker_env(spec: Mapping[str, Any], data_dir: Path, work_dir: Path) -> dict[str, str]:
    """The service's environment, with the named volume replaced by ``data_dir``."""
    env = {k: str(v) for k, v in spec["environment"].items()}
    target = spec["volumes"][0].split(":")[1]
    assert env["KBROKER_LOG_DIRS"] == target, "log.dirs must be the volume's mount point"
    data_dir.mkdir(parents=True, exist_ok=True)
    env["KBROKER_LOG_DIRS"] = str(data_dir)
    # No properties file is mounted in the compose files.
    env["KBROKER_CONFIG_FILE"] = str(work_dir / "no-server.properties")
    return {**tool_env(), **env}


def start_broker(net: Network, service: str, spec: Mapping[str, Any], work_dir: Path) -> None:
    env = broker_env(spec, work_dir / f"{service}-data", work_dir)
    net.start(service, ["sh", str(DOCKER / "entrypoint.sh"), *image_cmd()], env)


def start_zookeeper(net: Network, work_dir: Path) -> None:
    data = work_dir / "zookeeper-data"
    data.mkdir(parents=True, exist_ok=True)
    argv = [
        "/usr/bin/java",
        "-Xmx256m",
        "-cp",
        ZK_CLASSPATH,
        ZK_MAIN,
        str(ZK_CLIENT_PORT),
        str(data),
    ]
    net.start("zookeeper", argv, tool_env())


def wait_until(check: Any, what: str, timeout: float, net: Network, hosts: Sequence[str]) -> Any:
    """Call ``check()`` until it returns a truthy value; fail with the hosts' logs."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            logs = "\n".join(net.log_tail(h) for h in hosts)
            raise AssertionError(f"{what}: not after {timeout:.0f}s\n{logs}")
        time.sleep(1.0)


def zookeeper_healthy(net: Network, probe_from: str) -> bool:
    result = net.run(
        probe_from, [sys.executable, "-c", _ZK_PROBE, "zookeeper", str(ZK_CLIENT_PORT)]
    )
    return result.returncode == 0


def healthcheck(net: Network, service: str, spec: Mapping[str, Any]) -> bool:
    """The service's compose healthcheck (CMD form), run in its namespace."""
    test = spec["healthcheck"]["test"]
    assert test[0] == "CMD"
    return net.run(service, test[1:], timeout=60).returncode == 0
