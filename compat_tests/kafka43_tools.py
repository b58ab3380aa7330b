"""Run Apache Kafka 4.3's command-line tools (../shared/kafka-4.3/bin) for tests.

(Kafka 3.9's kafka-acls.sh and kafka-configs.sh, which ../shared/kafka-3.9 ships as classes
only, are compat_tests/kafka_tools.py's.)

Each call starts one JVM, so the tools run with a small heap and the JVM options that start
fastest (C1 only, the serial collector): the tests send them a few records, not a benchmark.
Their LOG_DIR is a folder of the caller's, so nothing is written under ../shared.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from compat_tests.kafka_process import KAFKA43_BIN, kafka43_available
from compat_tests.support import require

TOOL_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"
TOOL_HEAP = "-Xmx192m"


@dataclass(frozen=True)
class ToolRun:
    """The outcome of one tool command."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str

    def report(self) -> str:
        return (
            f"$ {' '.join(self.command)}\nexit status {self.returncode}\n"
            f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}"
        )

    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]


class Kafka43Tools:
    """Kafka 4.3's tools against one broker; `run` returns, `ok` also asserts success."""

    def __init__(self, bootstrap: str, log_dir: Path) -> None:
        self.bootstrap = bootstrap
        self.log_dir = log_dir

    def run(
        self, tool: str, *args: str, stdin: str | None = None, timeout: float = 120.0
    ) -> ToolRun:
        """``bin/<tool>.sh --bootstrap-server BOOTSTRAP args...``."""
        return self.run_raw(
            tool, "--bootstrap-server", self.bootstrap, *args, stdin=stdin, timeout=timeout
        )

    def run_raw(
        self, tool: str, *args: str, stdin: str | None = None, timeout: float = 120.0
    ) -> ToolRun:
        """``bin/<tool>.sh args...``, for tools that take the address otherwise."""
        command = [str(KAFKA43_BIN / f"{tool}.sh"), *args]
        result = subprocess.run(
            command,
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self._environment(),
        )
        return ToolRun(command, result.returncode, result.stdout, result.stderr)

    def start(self, tool: str, *args: str) -> subprocess.Popen[str]:
        """``bin/<tool>.sh --bootstrap-server BOOTSTRAP args...`` in the background (stdout
        and stderr piped), for a tool that must run while others look at the broker."""
        command = [str(KAFKA43_BIN / f"{tool}.sh"), "--bootstrap-server", self.bootstrap, *args]
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self._environment(),
        )

    def _environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "KAFKA_HEAP_OPTS": TOOL_HEAP,
            "KAFKA_JVM_PERFORMANCE_OPTS": TOOL_JVM_OPTIONS,
            "LOG_DIR": str(self.log_dir),
        }

    def ok(
        self, tool: str, *args: str, stdin: str | None = None, timeout: float = 120.0
    ) -> ToolRun:
        run = self.run(tool, *args, stdin=stdin, timeout=timeout)
        assert run.returncode == 0, run.report()
        return run


def kafka43_tools(bootstrap: str, log_dir: Path) -> Kafka43Tools:
    """Kafka 4.3's tools against `bootstrap`, logging to `log_dir`; fails or skips (see
    `require`) when Kafka 4.3 or java is missing."""
    require(kafka43_available(), "Apache Kafka 4.3 is missing from ../shared/kafka-4.3")
    require(shutil.which("java") is not None, "java is needed for Kafka's tools")
    return Kafka43Tools(bootstrap, log_dir)
