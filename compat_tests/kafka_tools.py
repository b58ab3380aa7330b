"""Run Apache Kafka 3.9's command-line tools (../shared/kafka-3.9) from tests.

``kafka-acls.sh`` and ``kafka-configs.sh`` are thin scripts around the main classes
``kafka.admin.AclCommand`` and ``kafka.admin.ConfigCommand`` of Kafka's core jar; the
source-built 3.9 in ../shared/kafka-3.9 carries the classes without the scripts, so they are
started here as the scripts would start them (``java -cp 'libs/*' MAIN ARGS``).

A JVM start costs a second or more on this machine, more than most tool runs, so
`KafkaTools.run` takes several invocations and runs them in one JVM, one after the other
(kafka_tools/KafkaToolBatch.java, compiled once per `KafkaTools`), and returns each one's
exit code, stdout and stderr. Logging: warnings and errors on stderr
(kafka_tools/log4j2.properties).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from compat_tests.kafka_process import KAFKA_HOME
from compat_tests.support import require

SOURCES = Path(__file__).resolve().parent / "kafka_tools"
LAUNCHER = "KafkaToolBatch"
# Must match KafkaToolBatch.java.
SEPARATOR = "--kbroker-next-tool"
MARKER = "### kbroker-tool-exit"
# The scripts of a Kafka distribution and the class each one runs.
MAIN_CLASSES = {
    "kafka-acls.sh": "kafka.admin.AclCommand",
    "kafka-configs.sh": "kafka.admin.ConfigCommand",
}


@dataclass(frozen=True)
class ToolRun:
    """The outcome of one invocation, e.g. ``kafka-acls.sh --list ...``."""

    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def check(self) -> ToolRun:
        """This run, or an AssertionError showing its output when it failed."""
        assert self.returncode == 0, (
            f"{' '.join(self.command)} exited with {self.returncode}\n"
            f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}"
        )
        return self


def _split(text: str, count: int) -> list[tuple[int, float, str]]:
    """(exit code, seconds, output) of each invocation, from a stream with a marker after
    each."""
    out: list[tuple[int, float, str]] = []
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith(MARKER):
            code, millis = line[len(MARKER) :].split()
            out.append((int(code), int(millis) / 1000, "".join(lines)))
            lines = []
        else:
            lines.append(line)
    assert len(out) == count, f"expected {count} tool runs, the JVM reported {len(out)}:\n{text}"
    return out


class KafkaTools:
    """Kafka 3.9's tools, with the launcher compiled into `build_dir`.

    Fails (under CI=true) or skips the test when Java's compiler or ../shared/kafka-3.9 is
    missing, as compat_tests.support.require does for every client tool."""

    def __init__(self, build_dir: Path) -> None:
        require(
            (KAFKA_HOME / "libs").is_dir(),
            f"Apache Kafka 3.9 is missing from {KAFKA_HOME} (see ../shared/kafka-3.9/README.md)",
        )
        javac = shutil.which("javac")
        require(javac is not None, "javac is not installed (apt-get install default-jdk-headless)")
        assert javac is not None
        build_dir.mkdir(parents=True, exist_ok=True)
        clients = next((KAFKA_HOME / "libs").glob("kafka-clients-*.jar"))
        result = subprocess.run(
            [javac, "-d", str(build_dir), "-cp", str(clients), str(SOURCES / f"{LAUNCHER}.java")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, f"javac failed:\n{result.stderr}"
        self.classpath = f"{KAFKA_HOME / 'libs'}/*:{build_dir}"

    def run(self, *commands: Sequence[str], timeout: float = 120.0) -> list[ToolRun]:
        """Run each command (``("kafka-acls.sh", "--list", ...)``) in order, in one JVM."""
        assert commands, "no command to run"
        args: list[str] = []
        for i, command in enumerate(commands):
            if i:
                args.append(SEPARATOR)
            args += [MAIN_CLASSES[command[0]], *command[1:]]
        result = subprocess.run(
            [
                "java",
                "-Xmx256m",
                f"-Dlog4j2.configurationFile={SOURCES / 'log4j2.properties'}",
                "-cp",
                self.classpath,
                LAUNCHER,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, f"the tools' JVM failed:\n{result.stderr}"
        outs = _split(result.stdout, len(commands))
        errs = _split(result.stderr, len(commands))
        return [
            ToolRun(tuple(command), code, out, err, seconds)
            for command, (code, seconds, out), (_, _, err) in zip(commands, outs, errs, strict=True)
        ]

    def check(self, *commands: Sequence[str], timeout: float = 120.0) -> list[ToolRun]:
        """`run`, failing the test on the first invocation that failed."""
        return [run.check() for run in self.run(*commands, timeout=timeout)]
