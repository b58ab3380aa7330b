"""Java share consumers (KafkaShareConsumer of kafka-clients 4.3) as separate processes.

compat_tests/jvm_share/ShareWorker.java is compiled once against the 4.3 client (it is kept
apart from compat_tests/jvm, which also compiles against 3.9, whose client has no share
consumer). Each `ShareWorker` process is one consumer: its stdout, a line per acquisition and
per acknowledgement the broker confirmed (see the Java source), goes to a file that the test
reads while it runs; a stop file ends the workers of a run, SIGKILL ends one the hard way.
The share-group compat tests and bench/share_consumers.py both use these workers.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from compat_tests.java_programs import JAVA_CLIENT_43, JavaPrograms

SHARE_SOURCES = Path(__file__).resolve().parent / "jvm_share"
WORKER_MAIN = "ShareWorker"
# Several consumer JVMs run beside a broker on a 2-core machine: a small heap, and for the
# tests the options that start fastest (C1 only, the serial collector), as the tools use.
TEST_JVM_OPTIONS = ("-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


@dataclass(frozen=True)
class Acquisition:
    """One record handed to one consumer by one poll."""

    consumer: str
    partition: int
    offset: int
    delivery_count: int
    time_ms: int


@dataclass(frozen=True)
class Ack:
    """One acknowledgement the broker answered without error (time: when it was sent)."""

    consumer: str
    partition: int
    offset: int
    type: str
    time_ms: int


class Worker:
    """One running share consumer process."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], out: Path, err: Path) -> None:
        self.name = name
        self.process = process
        self.out = out
        self.err = err

    def lines(self) -> list[str]:
        """The complete lines written so far (a line being written has no newline yet)."""
        text = self.out.read_text() if self.out.exists() else ""
        return text.split("\n")[:-1]

    def has_line(self, line: str) -> bool:
        return line in self.lines()

    def acquisitions(self) -> list[Acquisition]:
        found = []
        for line in self.lines():
            if line.startswith("acquired "):
                _, consumer, partition, offset, count, at = line.split()
                found.append(
                    Acquisition(consumer, int(partition), int(offset), int(count), int(at))
                )
        return found

    def acks(self) -> list[Ack]:
        found = []
        for line in self.lines():
            if line.startswith("ack "):
                _, consumer, partition, offset, kind, at = line.split()
                found.append(Ack(consumer, int(partition), int(offset), kind, int(at)))
        return found

    def acked_progress(self) -> tuple[int, int]:
        """A quiet worker's records acknowledged so far, and the wall-clock time (ms) at
        which it reached that count ((0, 0) before its first)."""
        latest = (0, 0)
        for line in self.lines():
            if line.startswith("acked "):
                _, _, count, at = line.split()
                if int(count) > latest[0]:
                    latest = (int(count), int(at))
        return latest

    def failures(self) -> list[str]:
        return [line for line in self.lines() if line.startswith("failed ")]

    def kill(self) -> None:
        """SIGKILL: the consumer neither acknowledges nor leaves the group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def report(self) -> str:
        err = self.err.read_text()[-4000:] if self.err.exists() else ""
        return f"worker {self.name} (exit {self.process.poll()}): stderr:\n{err}"


class ShareWorkers:
    """Starts `ShareWorker` processes against one broker; `stop_all` ends them."""

    def __init__(
        self,
        programs: JavaPrograms,
        bootstrap: str,
        work_dir: Path,
        jvm_options: Sequence[str] = TEST_JVM_OPTIONS,
    ) -> None:
        self.programs = programs
        self.jvm_options = tuple(jvm_options)
        self.bootstrap = bootstrap
        self.work_dir = work_dir
        self.stop_file = work_dir / "stop"
        self.workers: list[Worker] = []

    @classmethod
    def compile(
        cls,
        build_dir: Path,
        bootstrap: str,
        work_dir: Path,
        jvm_options: Sequence[str] = TEST_JVM_OPTIONS,
    ) -> ShareWorkers:
        programs = JavaPrograms.compile(build_dir, JAVA_CLIENT_43, SHARE_SOURCES)
        return cls(programs, bootstrap, work_dir, jvm_options)

    def configure(self, group: str, configs: dict[str, str]) -> None:
        """Set `group`'s configs (IncrementalAlterConfigs on the GROUP resource)."""
        args = [f"{name}={value}" for name, value in configs.items()]
        run = self.programs.run(
            WORKER_MAIN, "configure", f"bootstrap={self.bootstrap}", f"group={group}", *args
        )
        assert run.returncode == 0 and "configured" in run.stdout, run.report()

    def start(self, name: str, group: str, topic: str, **options: str) -> Worker:
        """One consumer of `topic` in `group`; options are ShareWorker's (ack, hold, ...)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.stop_file.unlink(missing_ok=True)
        args = [
            "consume",
            f"bootstrap={self.bootstrap}",
            f"group={group}",
            f"topic={topic}",
            f"id={name}",
            f"stop={self.stop_file}",
            *(f"{key.replace('_', '-')}={value}" for key, value in options.items()),
        ]
        command, _ = self.programs.command(WORKER_MAIN, *args, jvm_options=self.jvm_options)
        out, err = self.work_dir / f"{name}.out", self.work_dir / f"{name}.err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr
            )
        worker = Worker(name, process, out, err)
        self.workers.append(worker)
        return worker

    def wait_until(self, predicate: Callable[[], object], timeout: float, what: str) -> None:
        """Wait for `predicate()`; fails early with the workers' stderr if one of them died
        (other than by our SIGKILL)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            for worker in self.workers:
                code = worker.process.poll()
                if code is not None and code != -signal.SIGKILL:
                    raise AssertionError(f"{what}: {worker.report()}")
            if time.monotonic() > deadline:
                reports = "\n".join(w.report() for w in self.workers)
                raise AssertionError(f"timed out after {timeout:.0f} s: {what}\n{reports}")
            time.sleep(0.2)

    def stop_all(self, timeout: float = 60.0) -> None:
        """Touch the stop file and wait for every worker to close its consumer."""
        self.stop_file.touch()
        for worker in self.workers:
            try:
                code = worker.process.wait(timeout)
            except subprocess.TimeoutExpired:
                worker.kill()
                raise AssertionError(f"worker did not stop: {worker.report()}") from None
            assert code in (0, -signal.SIGKILL), worker.report()
        self.workers.clear()

    def kill_all(self) -> None:
        for worker in self.workers:
            worker.kill()
        self.workers.clear()


def acquisitions_of(workers: Iterable[Worker]) -> dict[tuple[int, int], list[Acquisition]]:
    """Every acquisition of each (partition, offset), in delivery-count order."""
    by_record: dict[tuple[int, int], list[Acquisition]] = defaultdict(list)
    for worker in workers:
        for acquisition in worker.acquisitions():
            by_record[(acquisition.partition, acquisition.offset)].append(acquisition)
    for found in by_record.values():
        found.sort(key=lambda a: (a.delivery_count, a.time_ms))
    return by_record


def acks_of(workers: Iterable[Worker]) -> dict[tuple[int, int], list[Ack]]:
    by_record: dict[tuple[int, int], list[Ack]] = defaultdict(list)
    for worker in workers:
        for ack in worker.acks():
            by_record[(ack.partition, ack.offset)].append(ack)
    for found in by_record.values():
        found.sort(key=lambda a: a.time_ms)
    return by_record


def accepted_counts(workers: Iterable[Worker]) -> Counter[tuple[int, int]]:
    return Counter(
        (ack.partition, ack.offset) for w in workers for ack in w.acks() if ack.type == "ACCEPT"
    )


def assert_at_least_once(workers: Iterable[Worker], records: Iterable[tuple[int, int]]) -> None:
    """Every record accepted exactly once (an acknowledgement the broker confirmed), and none
    handed over again after its accepting consumer acquired it (the broker failed over or
    restarted in between): a record's last acquisition is the accepting one."""
    workers = list(workers)
    accepted = accepted_counts(workers)
    assert sorted(accepted) == sorted(records), "records never accepted"
    assert set(accepted.values()) == {1}, "a record was accepted twice"
    acquisitions = acquisitions_of(workers)
    for record, acks in acks_of(workers).items():
        accept = next(a for a in acks if a.type == "ACCEPT")
        last = acquisitions[record][-1]
        assert last.consumer == accept.consumer and last.time_ms <= accept.time_ms, (
            f"{record} handed over again after its acknowledgement: {acquisitions[record]}"
        )
