"""A broker process with its schema registry, shared by a test module, and HTTP helpers."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from compat_tests.broker_process import BrokerProcess, free_port

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass
class RegistryBroker:
    broker: BrokerProcess
    url: str

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap


def http(
    url: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """(status, decoded JSON body) of one request, error statuses included."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": CONTENT_TYPE, **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def wait_registry(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if http(url + "/subjects")[0] == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"registry at {url} not ready")
        time.sleep(0.1)


def start_registry_broker(work_dir: Path, **overrides: str) -> RegistryBroker:
    port = free_port()
    broker = BrokerProcess(
        work_dir,
        overrides={
            "schema.registry.listeners": f"http://127.0.0.1:{port}",
            "offsets.topic.replication.factor": "1",
            **overrides,
        },
    )
    broker.start()
    url = f"http://127.0.0.1:{port}"
    wait_registry(url)
    return RegistryBroker(broker, url)


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryBroker]:
    running = start_registry_broker(tmp_path_factory.mktemp("registry"))
    try:
        yield running
    finally:
        running.broker.stop()
