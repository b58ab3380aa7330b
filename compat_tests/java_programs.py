"""Compile and run the Java scenario programs of compat_tests/jvm/ against a broker.

The programs are ours; the Java client and Kafka Streams are Apache Kafka 3.9.0's jars in
../shared/clients-jvm/ (these machines cannot reach Maven). Their runtime dependencies
(slf4j, a log4j2 binding, lz4-java, snappy-java, zstd-jni, jackson) are among PySpark's jars,
which the `spark` extra installs. `javac` comes from Debian's default-jdk-headless.

Each program prints ``ok NAME`` after each group of checks that passed and exits with 1 on
the first failed check (stack trace on stderr). The client's NetworkClient logs every request
it sends at DEBUG; compat_tests/jvm/log4j2.properties sends those lines to a file per run,
from which `JavaRun.requests` counts the (API, version) pairs the client negotiated.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from compat_tests.support import require

REPO_ROOT = Path(__file__).resolve().parents[1]
SOURCES = Path(__file__).resolve().parent / "jvm"
CLIENTS_JVM = REPO_ROOT.parent / "shared" / "clients-jvm"
KAFKA_CLIENTS_JAR = CLIENTS_JVM / "kafka-clients-3.9.0.jar"
KAFKA_STREAMS_JAR = CLIENTS_JVM / "kafka-streams-3.9.0.jar"

# "... request with header RequestHeader(apiKey=PRODUCE, apiVersion=11, ..." (NetworkClient).
_REQUEST_HEADER = re.compile(
    r"Sending \w+ request with header RequestHeader\(apiKey=(\w+), apiVersion=(\d+)"
)


def pyspark_jars() -> Path | None:
    """PySpark's jars folder in this environment, if PySpark is installed."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    return jars if jars.is_dir() else None


def request_versions(log_text: str) -> Counter[tuple[str, int]]:
    """How many requests of each (API, version) a client's request log shows."""
    return Counter((api, int(version)) for api, version in _REQUEST_HEADER.findall(log_text))


@dataclass(frozen=True)
class JavaRun:
    """The outcome of one scenario program."""

    main: str
    returncode: int
    stdout: str
    stderr: str
    requests: Counter[tuple[str, int]]

    @property
    def passed(self) -> list[str]:
        """Names of the check groups that passed, in order."""
        return [line[3:] for line in self.stdout.splitlines() if line.startswith("ok ")]

    def report(self, max_chars: int = 6000) -> str:
        err = self.stderr if len(self.stderr) <= max_chars else "...\n" + self.stderr[-max_chars:]
        return (
            f"{self.main} exited with {self.returncode}\n"
            f"--- stdout ---\n{self.stdout}--- stderr ---\n{err}"
        )


class JavaPrograms:
    """The scenario programs compiled into `build_dir`, and the classpath to run them."""

    def __init__(self, build_dir: Path, classpath: str) -> None:
        self.build_dir = build_dir
        self.classpath = classpath
        self.requests: Counter[tuple[str, int]] = Counter()
        self._runs = 0

    @classmethod
    def compile(cls, build_dir: Path) -> JavaPrograms:
        """javac every source of compat_tests/jvm into `build_dir` (fails or skips, see
        `require`, when the JDK, the jars or PySpark are missing)."""
        javac = shutil.which("javac")
        require(javac is not None, "javac is not installed (apt-get install default-jdk-headless)")
        for jar in (KAFKA_CLIENTS_JAR, KAFKA_STREAMS_JAR):
            require(jar.is_file(), f"{jar} is missing (see ../shared/clients-jvm/README.md)")
        jars = pyspark_jars()
        require(jars is not None, "PySpark's jars are missing (pip install -e '.[spark]')")
        assert javac is not None and jars is not None
        compile_path = f"{KAFKA_CLIENTS_JAR}:{KAFKA_STREAMS_JAR}"
        sources = sorted(str(p) for p in SOURCES.glob("*.java"))
        result = subprocess.run(
            [javac, "-d", str(build_dir), "-cp", compile_path, *sources],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert result.returncode == 0, f"javac failed:\n{result.stderr}"
        return cls(build_dir, f"{compile_path}:{jars}/*:{build_dir}")

    def run(self, main: str, *args: str, timeout: float = 240.0) -> JavaRun:
        """Run class `main` with `args`; its request log goes to a file of its own."""
        self._runs += 1
        request_log = self.build_dir / f"requests-{self._runs}-{main}.log"
        command = [
            "java",
            "-Xmx256m",
            f"-Dlog4j2.configurationFile={SOURCES / 'log4j2.properties'}",
            f"-Dkbroker.requestLog={request_log}",
            "-cp",
            self.classpath,
            main,
            *args,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        log_text = request_log.read_text() if request_log.exists() else ""
        requests = request_versions(log_text)
        run = JavaRun(main, result.returncode, result.stdout, result.stderr, requests)
        self.requests.update(run.requests)
        return run
