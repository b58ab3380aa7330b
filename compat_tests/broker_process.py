"""Run a kbroker process for tests and benchmarks.

`BrokerProcess` starts `python -m kbroker start` on a loopback port with its own log directory,
waits until the port answers an ApiVersions request, and stops it with SIGTERM (falling back
to SIGKILL) or kills it outright for crash tests. Restarts reuse the port and the log
directory, so clients reconnect to the same address and find the same data.

Files under the work directory:
- `logs/`: the broker's `log.dirs`.
- `broker.out`, `broker.err`: the broker's stdout and stderr, appended across restarts.

Readiness is checked with a hand-built ApiVersions v0 request (the only request every
Kafka broker must answer before anything else): size-prefixed header
`api_key=18, api_version=0, correlation_id, client_id` and no body; the answer starts with
`correlation_id` and an int16 error code.
"""

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

REPO_ROOT = Path(__file__).resolve().parents[1]
API_VERSIONS_KEY = 18
_CLIENT_ID = b"kbroker-compat-probe"


# Generous: a broker process that starts in a second on a quiet machine took over 30 s to
# open its port at load 30.
START_TIMEOUT_SECONDS = 120.0


class BrokerStartError(RuntimeError):
    """The broker process exited or did not answer ApiVersions in time."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port that is free right now on `host` (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def api_versions_error(host: str, port: int, timeout: float = 2.0) -> int:
    """Send ApiVersions v0 and return the error code of the answer.

    Raises OSError when the port does not accept or the answer does not come.
    """
    correlation_id = 0x4B42
    header = struct.pack(">hhih", API_VERSIONS_KEY, 0, correlation_id, len(_CLIENT_ID))
    payload = header + _CLIENT_ID
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if size < 6:
            raise ConnectionError(f"ApiVersions response too short ({size} bytes)")
        got_id, error = struct.unpack(">ih", _recv_exact(sock, 6))
        if got_id != correlation_id:
            raise ConnectionError(f"ApiVersions correlation id {got_id} != {correlation_id}")
        return int(error)


class BrokerProcess:
    """One kbroker process; `start()` may be called again after `stop()` or `kill()`."""

    def __init__(
        self,
        work_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        overrides: Mapping[str, str] | None = None,
        python: str = sys.executable,
    ) -> None:
        self.work_dir = work_dir
        self.log_dir = work_dir / "logs"
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.overrides = dict(overrides or {})
        self.python = python
        self._proc: subprocess.Popen[bytes] | None = None
        self._err_start = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def stdout_path(self) -> Path:
        return self.work_dir / "broker.out"

    @property
    def stderr_path(self) -> Path:
        return self.work_dir / "broker.err"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.log_dir),
            **self.overrides,
        }
        args: list[str] = [self.python, "-m", "kbroker", "start"]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    def environment(self) -> dict[str, str]:
        return {**os.environ, "PYTHONUNBUFFERED": "1"}

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        """Launch the broker and wait until ApiVersions answers without error."""
        if self.running():
            raise RuntimeError("broker already running")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._err_start = self.stderr_path.stat().st_size if self.stderr_path.exists() else 0
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self._proc = subprocess.Popen(
                self.command(),
                cwd=REPO_ROOT,
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        last_problem = "port never accepted a connection"
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise BrokerStartError(
                    f"broker exited with code {code} before it was ready\n{self.stderr_tail()}"
                )
            try:
                error = api_versions_error(self.host, self.port, timeout=2.0)
            except OSError as exc:
                last_problem = f"{type(exc).__name__}: {exc}"
            else:
                if error == 0:
                    return
                last_problem = f"ApiVersions v0 answered error code {error}"
            time.sleep(0.05)
        self.kill()
        raise BrokerStartError(
            f"broker not ready after {timeout:.0f} s ({last_problem})\n{self.stderr_tail()}"
        )

    def stderr_tail(self, max_chars: int = 8000) -> str:
        """The broker's stderr since the last start (the end of it, if long)."""
        if not self.stderr_path.exists():
            return "(no stderr captured)"
        with open(self.stderr_path, "rb") as f:
            f.seek(self._err_start)
            text = f.read().decode("utf-8", "replace")
        if len(text) > max_chars:
            text = "...\n" + text[-max_chars:]
        return f"--- broker stderr ---\n{text}" if text else "(broker stderr is empty)"

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code (-9 if killed)."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        return self._proc.returncode

    def kill(self) -> None:
        """SIGKILL (a real kill -9: no chance to flush or close anything)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()

    def restart(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        self.stop()
        self.start(timeout)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
