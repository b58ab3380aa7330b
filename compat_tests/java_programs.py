"""Compile and run the Java scenario programs of compat_tests/jvm/ against a broker.

The programs are ours; the Java client and Kafka Streams are Apache Kafka's jars, of two
generations (these machines cannot reach Maven):

- 3.9.0 from ../shared/clients-jvm/. Their runtime dependencies (slf4j, a log4j2 binding,
  lz4-java, snappy-java, zstd-jni, jackson) are among PySpark's jars, which the `spark`
  extra installs.
- 4.3 from ../shared/kafka-4.3/clients/, with their runtime dependencies from that
  distribution's libs/ (named one by one, so that its broker jars stay off the classpath).

The same sources compile against both (4.3 only deprecates some of the APIs they use).
`javac` comes from Debian's default-jdk-headless.

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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from compat_tests.support import require

REPO_ROOT = Path(__file__).resolve().parents[1]
SOURCES = Path(__file__).resolve().parent / "jvm"
CLIENTS_JVM = REPO_ROOT.parent / "shared" / "clients-jvm"
KAFKA_CLIENTS_JAR = CLIENTS_JVM / "kafka-clients-3.9.0.jar"
KAFKA_STREAMS_JAR = CLIENTS_JVM / "kafka-streams-3.9.0.jar"
KAFKA43_HOME = REPO_ROOT.parent / "shared" / "kafka-4.3"
# The 4.3 client's and Streams' run-time dependencies in ../shared/kafka-4.3/libs (its
# README): file name prefixes, each matching one jar.
KAFKA43_RUNTIME_JARS = (
    "slf4j-api-",
    "log4j-slf4j2-impl-",
    "log4j-api-",
    "log4j-core-",
    "lz4-java-",
    "zstd-jni-",
    "snappy-java-",
    "jackson-databind-",
    "jackson-core-",
    "jackson-annotations-",
)

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
class JavaClient:
    """One generation of Apache Kafka's Java client and Kafka Streams."""

    name: str
    clients_jar: Path
    streams_jar: Path

    @property
    def compile_path(self) -> str:
        return f"{self.clients_jar}:{self.streams_jar}"

    def runtime_path(self) -> str:
        """The jars the client and Streams need at run time (fails or skips, see `require`,
        when they are missing)."""
        if self.name == "3.9":
            jars = pyspark_jars()
            require(jars is not None, "PySpark's jars are missing (pip install -e '.[spark]')")
            return f"{jars}/*"
        libs = self.clients_jar.parent.parent / "libs"
        found: list[str] = []
        for prefix in KAFKA43_RUNTIME_JARS:
            matches = sorted(libs.glob(f"{prefix}[0-9]*.jar"))
            require(len(matches) == 1, f"{libs}: no single {prefix}*.jar")
            found.append(str(matches[0]))
        return ":".join(found)


JAVA_CLIENT_39 = JavaClient("3.9", KAFKA_CLIENTS_JAR, KAFKA_STREAMS_JAR)
JAVA_CLIENT_43 = JavaClient(
    "4.3",
    KAFKA43_HOME / "clients" / "kafka-clients-4.3.jar",
    KAFKA43_HOME / "clients" / "kafka-streams-4.3.jar",
)
JAVA_CLIENTS = {client.name: client for client in (JAVA_CLIENT_39, JAVA_CLIENT_43)}


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

    def __init__(self, build_dir: Path, classpath: str, client: JavaClient) -> None:
        self.build_dir = build_dir
        self.classpath = classpath
        self.client = client
        self.requests: Counter[tuple[str, int]] = Counter()
        self._runs = 0

    @classmethod
    def compile(
        cls, build_dir: Path, client: JavaClient = JAVA_CLIENT_39, sources: Path = SOURCES
    ) -> JavaPrograms:
        """javac every source of `sources` (compat_tests/jvm) into `build_dir` against
        `client` (fails or skips, see `require`, when the JDK or the jars are missing)."""
        javac = shutil.which("javac")
        require(javac is not None, "javac is not installed (apt-get install default-jdk-headless)")
        for jar in (client.clients_jar, client.streams_jar):
            require(jar.is_file(), f"{jar} is missing (see its folder's README.md)")
        runtime = client.runtime_path()
        assert javac is not None
        files = sorted(str(p) for p in sources.glob("*.java"))
        result = subprocess.run(
            # -Xlint:-removal: 4.3 deprecates for removal some admin APIs 3.9 has no
            # replacement for (listConsumerGroups, ConsumerGroupState).
            [javac, "-Xlint:-removal", "-d", str(build_dir), "-cp", client.compile_path, *files],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert result.returncode == 0, f"javac failed:\n{result.stderr}"
        return cls(build_dir, f"{client.compile_path}:{runtime}:{build_dir}", client)

    def command(
        self, main: str, *args: str, jvm_options: Sequence[str] = ("-Xmx256m",)
    ) -> tuple[list[str], Path]:
        """The java command line that runs class `main` with `args`, and the file its request
        log goes to (one per run)."""
        self._runs += 1
        request_log = self.build_dir / f"requests-{self._runs}-{main}.log"
        command = [
            "java",
            *jvm_options,
            f"-Dlog4j2.configurationFile={SOURCES / 'log4j2.properties'}",
            f"-Dkbroker.requestLog={request_log}",
            "-cp",
            self.classpath,
            main,
            *args,
        ]
        return command, request_log

    def start(
        self, main: str, *args: str, stdout: IO[str], stderr: IO[str]
    ) -> subprocess.Popen[str]:
        """Start class `main` with `args` in the background, for programs a test drives while
        they run (the caller waits for it and reads what it wrote)."""
        command, _ = self.command(main, *args)
        return subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True)

    def run(self, main: str, *args: str, timeout: float = 240.0) -> JavaRun:
        """Run class `main` with `args`; its request log goes to a file of its own."""
        command, request_log = self.command(main, *args)
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        log_text = request_log.read_text() if request_log.exists() else ""
        requests = request_versions(log_text)
        run = JavaRun(main, result.returncode, result.stdout, result.stderr, requests)
        self.requests.update(run.requests)
        return run
