"""A standalone ZooKeeper server from Debian's zookeeper package, for tests on loopback.

Used by the cluster tests (kbroker brokers) and by compat_tests' Apache Kafka fixture. It
listens on a free port (or the one given) with its data under ``<work_dir>/data`` and its
console output in ``<work_dir>/zookeeper.out``. Readiness is checked with the ``srvr``
four-letter command, the one ZooKeeper 3.5+ allows by default.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

from compat_tests.broker_process import free_port

JAVA = "/usr/bin/java"
ZK_CLASSPATH = "/usr/share/java/*"
ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


def java_available() -> bool:
    """Whether Debian's zookeeper package and a Java runtime are installed."""
    return Path("/usr/bin/java").exists() and any(Path("/usr/share/java").glob("zookeeper*.jar"))


def zk_ready(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"srvr")
            return b"Mode:" in sock.recv(4096)
    except OSError:
        return False


class ZooKeeperProcess:
    """A standalone ZooKeeper server; restarts keep its port and data."""

    def __init__(self, work_dir: Path, port: int | None = None) -> None:
        self.work_dir = work_dir
        self.port = port if port is not None else free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        data = self.work_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        with open(self.work_dir / "zookeeper.out", "ab") as out:
            self._proc = subprocess.Popen(
                [
                    JAVA,
                    "-Xmx256m",
                    # The AdminServer's fixed port 8080 would clash between concurrent runs.
                    "-Dzookeeper.admin.enableServer=false",
                    "-cp",
                    ZK_CLASSPATH,
                    ZK_MAIN,
                    str(self.port),
                    str(data),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited with {self._proc.returncode}")
            if zk_ready(self.port):
                return
            time.sleep(0.2)
        raise RuntimeError("zookeeper did not start")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
