"""A small fake broker for driving the admin handlers directly: a real BrokerConfig,
EmbeddedMetadata on a temporary directory and QuotaManager, and a stand-in for the
LogManager."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest

from controller.embedded import EmbeddedMetadata
from kbroker.authorization import build_authorizer
from kbroker.config import BrokerConfig
from kbroker.quotas import QuotaManager
from wire.messages.request_header import RequestHeader

M = TypeVar("M")


class FakeLogs:
    """What the handlers use of a LogManager: ``dirs``, ``offline_dirs``, ``cordoned`` and
    ``logs()``."""

    def __init__(self, dirs: list[Path], cordoned: list[Path]) -> None:
        self.dirs = dirs
        self.offline_dirs: list[Path] = []
        self.cordoned = frozenset(cordoned)
        self._logs: dict[tuple[str, int], SimpleNamespace] = {}

    def add(self, topic: str, partition: int, directory: Path, size: int) -> None:
        self._logs[(topic, partition)] = SimpleNamespace(
            directory=directory / f"{topic}-{partition}", size_bytes=size
        )

    def logs(self) -> dict[tuple[str, int], SimpleNamespace]:
        return dict(self._logs)


async def make_broker(tmp_path: Path, **props: str) -> Any:
    values = {
        "broker.id": "1",
        "log.dirs": f"{tmp_path / 'd1'},{tmp_path / 'd2'}",
        "listeners": "PLAINTEXT://127.0.0.1:9092",
    }
    values.update(props)
    config = BrokerConfig.from_properties(values)
    metadata = EmbeddedMetadata(config)
    await metadata.start()
    quotas = QuotaManager(metadata.client_quotas, clock=time.monotonic)
    return SimpleNamespace(
        config=config,
        static_config=config,
        scram_credential=lambda user, mechanism: None,
        metadata=metadata,
        logs=FakeLogs(config.log_dirs, config.cordoned_log_dirs),
        quotas=quotas,
        authorizer=build_authorizer(config, metadata.acls),
        # No mirror fetchers here: a changed link record has no cap to put in force.
        mirrors=SimpleNamespace(apply_link_records=lambda: None),
    )


@pytest.fixture
async def broker(tmp_path: Path) -> Any:
    return await make_broker(tmp_path)


def header(api_key: int, version: int) -> RequestHeader:
    return RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=7)


def roundtrip(message: M, version: int) -> M:
    """Encode and decode at ``version``: what the other side would see."""
    return type(message).decode(message.encode(version), version)  # type: ignore[attr-defined]
