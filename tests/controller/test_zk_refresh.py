"""The ZooKeeper backend's refresh loop outlives failed refreshes (it keeps the broker
registered), and a backend without a session has no session id."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooState
from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import KazooTimeoutError

from controller import zk_backend
from controller.zk_backend import ZkMetadata
from kbroker.config import BrokerConfig
from wire.errors import ErrorCode, KafkaError


def _backend(tmp_path: Path) -> ZkMetadata:
    config = BrokerConfig.from_properties(
        {"broker.id": "1", "log.dirs": str(tmp_path), "zookeeper.connect": "127.0.0.1:1"}
    )
    return ZkMetadata(config)


async def test_refresh_loop_survives_a_timeout_and_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zk_backend, "RETRY_SECONDS", 0.0)
    backend = _backend(tmp_path)
    failures: list[Exception] = [KazooTimeoutError("slow server"), TypeError("a bug")]
    recovered = asyncio.Event()

    async def refresh() -> None:
        if failures:
            raise failures.pop(0)
        recovered.set()

    monkeypatch.setattr(backend, "refresh", refresh)
    monkeypatch.setattr(backend._zk, "state", KazooState.CONNECTED)
    loop_task = asyncio.create_task(backend._refresh_on_change())
    backend._dirty.set()
    try:
        await asyncio.wait_for(recovered.wait(), 5)
    finally:
        loop_task.cancel()
    assert not failures


async def test_no_refresh_while_disconnected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a connection a refresh could only fail (or, before, block a worker thread
    until ZooKeeper returned): the loop waits for the reconnection's state change."""
    backend = _backend(tmp_path)
    refreshes: list[None] = []

    async def refresh() -> None:
        refreshes.append(None)

    monkeypatch.setattr(backend, "refresh", refresh)
    loop_task = asyncio.create_task(backend._refresh_on_change())
    backend._dirty.set()
    await asyncio.sleep(0.2)
    assert refreshes == []
    monkeypatch.setattr(backend._zk, "state", KazooState.CONNECTED)
    backend._dirty.set()
    await asyncio.sleep(0.2)
    loop_task.cancel()
    assert refreshes == [None]


async def test_zookeeper_calls_refused_while_disconnected(tmp_path: Path) -> None:
    backend = _backend(tmp_path)
    with pytest.raises(KafkaError) as refused:
        await backend._zk_call(lambda: None)
    assert refused.value.code == ErrorCode.REQUEST_TIMED_OUT


def test_no_session_id_while_disconnected(tmp_path: Path) -> None:
    assert _backend(tmp_path)._session_id() is None


async def test_stop_does_not_wait_for_a_client_stuck_reconnecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kazoo's stop joins a connection thread that may sit in a long name lookup while
    ZooKeeper is unreachable (its container stopped): the broker's stop goes on after
    ZK_STOP_SECONDS instead of overrunning its stop grace period."""
    monkeypatch.setattr(zk_backend, "ZK_STOP_SECONDS", 0.3)
    backend = _backend(tmp_path)
    release = threading.Event()
    monkeypatch.setattr(backend._zk, "stop", lambda: release.wait(30))
    started = time.monotonic()
    await backend.stop()
    assert time.monotonic() - started < 5
    release.set()


async def test_a_znode_deletion_gives_up_when_the_connection_drops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controlled shutdown's delete sent just as ZooKeeper went away stays queued for a
    reconnection; the shutdown stops waiting once the connection is lost, not at the end of
    its whole budget (15 s by default, past a container's 10 s stop grace period)."""
    backend = _backend(tmp_path)
    never = backend._zk.handler.async_result()
    monkeypatch.setattr(backend._zk, "delete_async", lambda path: never)
    monkeypatch.setattr(backend._zk, "state", KazooState.CONNECTED)

    async def drop() -> None:
        await asyncio.sleep(0.3)
        monkeypatch.setattr(backend._zk, "state", KazooState.SUSPENDED)

    dropping = asyncio.create_task(drop())
    started = time.monotonic()
    await backend._delete_by(time.monotonic() + 15, "/brokers/ids/1")
    assert time.monotonic() - started < 2
    await dropping


async def test_registration_waits_out_a_lost_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ZooKeeper gone for a moment while the broker starts: the registration is tried
    again (a container restarted while ZooKeeper stopped failed its start before)."""
    monkeypatch.setattr(zk_backend, "RETRY_SECONDS", 0.0)
    backend = _backend(tmp_path)
    failures = [ConnectionLoss(), ConnectionLoss()]

    def register() -> None:
        if failures:
            raise failures.pop()

    async def refresh() -> None:
        pass

    monkeypatch.setattr(backend, "_register", register)
    monkeypatch.setattr(backend, "refresh", refresh)
    monkeypatch.setattr(backend._zk, "state", KazooState.CONNECTED)
    await backend.register([])
    assert failures == []
