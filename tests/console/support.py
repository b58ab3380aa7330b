"""Running the web console as a process for tests, seeding a cluster with records and groups,
and driving Debian's Chromium with Playwright."""

from __future__ import annotations

import concurrent.futures
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.broker_process import REPO_ROOT
from compat_tests.support import require

T = TypeVar("T")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CONSOLE_START_SECONDS = 30.0


def off_the_loop(call: Callable[[], T]) -> T:
    """``call()`` in a thread of its own: Playwright's sync API keeps an event loop running in
    the test's thread, where ``asyncio.run`` (the project's clients, Kafka's launchers)
    cannot run."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result()


@dataclass
class ConsoleProcess:
    url: str
    process: subprocess.Popen[str]


@contextmanager
def console_process(bootstrap: str, *args: str) -> Iterator[ConsoleProcess]:
    """``kbroker console`` on a free port, sampling every second; its address is read from
    what it prints once listening. Stopped with SIGTERM."""
    command = [
        sys.executable, "-m", "kbroker", "console", "--bootstrap-server", bootstrap,
        "--listen", "127.0.0.1:0", "--sample-interval", "1", *args,
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + CONSOLE_START_SECONDS
    seen = []
    url = None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while url is None and time.monotonic() < deadline and process.poll() is None:
            if selector.select(timeout=0.5):
                line = process.stdout.readline()
                seen.append(line)
                if line.startswith("kbroker console: "):
                    url = line.split()[2].rstrip("/")
    if url is None:
        process.kill()
        raise AssertionError("the console did not start:\n" + "".join(seen))
    try:
        yield ConsoleProcess(url, process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def require_chromium() -> None:
    require(Path(CHROMIUM).is_file(), "Debian's chromium is needed for the console's browser tests")


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)])
    futures[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topics = admin.list_topics(name, timeout=10).topics
        if name in topics and all(p.leader >= 0 for p in topics[name].partitions.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {name} has no leaders")


def produce(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    *,
    partition: int = 0,
    timestamps: Sequence[int] | None = None,
    key: bytes | None = None,
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        extra = {"timestamp": timestamps[i]} if timestamps is not None else {}
        producer.produce(topic, value, key=key, partition=partition, **extra)
    assert producer.flush(30) == 0


def consumer(bootstrap: str, group: str, **settings: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
            **settings,
        }
    )


def consume_and_commit(c: Consumer, topic: str, count: int, timeout: float = 60.0) -> int:
    """Subscribe (once), read ``count`` records and commit them synchronously."""
    if not c.assignment():
        c.subscribe([topic])
    read = 0
    deadline = time.monotonic() + timeout
    while read < count and time.monotonic() < deadline:
        for message in c.consume(num_messages=min(500, count - read), timeout=1.0):
            if message.error() is None:
                read += 1
    if read:
        c.commit(asynchronous=False)
    return read


def commit_offset(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """Commit ``offset`` for partition 0 as an empty group (no membership)."""
    c = consumer(bootstrap, group)
    c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    c.close()
