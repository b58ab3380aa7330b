"""Fixtures of the group tests.

- A driver for the pure group state machine: a fake clock, numbered request tokens, and the
  effects performed the way the coordinator shell performs them (stores acknowledged at once
  unless a test says otherwise).
- In-process brokers on free ports, and a real ZooKeeper server (Debian's package).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from compat_tests.support import require
from kbroker.broker import Broker
from kbroker.client import BrokerConnection
from kbroker.config import BrokerConfig
from kbroker.group.events import (
    Effect,
    GroupConfig,
    GroupState,
    HeartbeatResult,
    JoinRequest,
    JoinResult,
    LeaveResult,
    Reply,
    StoreGroup,
    SyncRequest,
    SyncResult,
)
from kbroker.group.offsets_store import GroupValue, LoadedState
from kbroker.group.state_machine import GroupStateMachine
from wire.errors import ErrorCode

GROUP = "g"
PROTOCOLS = (("range", b"sub-range"), ("roundrobin", b"sub-rr"))


class FakeClock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@dataclass
class Driver:
    sm: GroupStateMachine
    clock: FakeClock
    replies: dict[int, JoinResult | SyncResult | LeaveResult] = field(default_factory=dict)
    stored: list[tuple[str, GroupValue]] = field(default_factory=list)
    held_stores: list[StoreGroup] = field(default_factory=list)
    hold_stores: bool = False
    next_token: int = 0

    def perform(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Reply):
                assert effect.token not in self.replies, "a request was answered twice"
                assert not isinstance(effect.result, HeartbeatResult)
                self.replies[effect.token] = effect.result
            else:
                assert isinstance(effect, StoreGroup)
                self.stored.append((effect.group_id, effect.value))
                if self.hold_stores:
                    self.held_stores.append(effect)
                else:
                    self.perform(self.sm.group_stored(effect.store_id, ErrorCode.NONE))

    def release_stores(self, error: ErrorCode = ErrorCode.NONE) -> None:
        held, self.held_stores = self.held_stores, []
        for effect in held:
            self.perform(self.sm.group_stored(effect.store_id, error))

    def join(
        self,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS,
        protocol_type: str = "consumer",
        session: int = 10_000,
        rebalance: int = 30_000,
        require_known: bool = True,
        client_id: str = "c",
        group: str = GROUP,
    ) -> int:
        self.next_token += 1
        token = self.next_token
        req = JoinRequest(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            client_id=client_id,
            client_host="/127.0.0.1",
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            protocol_type=protocol_type,
            protocols=protocols,
            require_known_member_id=require_known and instance is None,
        )
        self.perform(self.sm.join(token, req))
        return token

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        group: str = GROUP,
    ) -> int:
        self.next_token += 1
        token = self.next_token
        req = SyncRequest(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            generation_id=generation,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=tuple((assignments or {}).items()),
        )
        self.perform(self.sm.sync(token, req))
        return token

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        return self.sm.heartbeat(GROUP, member_id, instance, generation)

    def leave(self, *members: tuple[str, str | None]) -> tuple[ErrorCode, list[ErrorCode]]:
        self.next_token += 1
        token = self.next_token
        self.perform(self.sm.leave(token, GROUP, members))
        result = self.replies.pop(token)
        assert isinstance(result, LeaveResult)
        return result.error, list(result.member_errors)

    def advance(self, ms: int) -> None:
        """Move the clock, firing deadlines in order as the shell's timer loop would."""
        target = self.clock.now + ms
        while True:
            deadline = self.sm.next_deadline()
            if deadline is None or deadline > target:
                break
            self.clock.now = max(self.clock.now, deadline)
            self.perform(self.sm.tick())
        self.clock.now = target
        self.perform(self.sm.tick())

    def reply(self, token: int) -> JoinResult | SyncResult | None:
        return self.replies.get(token)

    def join_reply(self, token: int) -> JoinResult:
        result = self.replies[token]
        assert isinstance(result, JoinResult)
        return result

    def sync_reply(self, token: int) -> SyncResult:
        result = self.replies[token]
        assert isinstance(result, SyncResult)
        return result

    def state(self, group: str = GROUP) -> GroupState | None:
        described = self.sm.describe(group)
        return None if described is None else described.state

    def new_member(self, **kwargs: object) -> str:
        """Complete the KIP-394 handshake; returns the member id (its join is pending)."""
        token = self.join(**kwargs)  # type: ignore[arg-type]
        result = self.join_reply(token)
        assert result.error == ErrorCode.MEMBER_ID_REQUIRED
        return result.member_id

    def stable_group(self, count: int, **kwargs: object) -> tuple[list[str], int]:
        """``count`` members through join and sync of a new group (initial delay 0); returns
        member ids (the leader first) and the generation. All ids are handed out first, so the
        outstanding ids hold the join phase open until the last member joins."""
        ids = [self.new_member(**kwargs) for _ in range(count)]
        tokens = [self.join(member_id, **kwargs) for member_id in ids]  # type: ignore[arg-type]
        results = [self.join_reply(t) for t in tokens]
        generation = results[0].generation_id
        assert results[0].leader_id == ids[0]
        assignments = {m: f"assignment-{m}".encode() for m in ids}
        sync_tokens = [self.sync(m, generation, assignments if m == ids[0] else None) for m in ids]
        for t in sync_tokens:
            assert self.sync_reply(t).error == ErrorCode.NONE
        assert self.state() is GroupState.STABLE
        return ids, generation


@pytest.fixture
def make_driver() -> Callable[..., Driver]:
    def make(partitions: int = 1, load: bool = True, **config: int) -> Driver:
        clock = FakeClock()
        counter = iter(range(1, 1_000_000))
        cfg = {"initial_rebalance_delay_ms": 0, **config}
        sm = GroupStateMachine(
            GroupConfig(**cfg), clock, partitions, new_uuid=lambda: str(next(counter))
        )
        if load:
            for p in range(partitions):
                sm.begin_load(p)
                sm.complete_load(p, LoadedState())
        return Driver(sm, clock)

    return make


@pytest.fixture
def d(make_driver: Callable[..., Driver]) -> Driver:
    return make_driver()


# --- an in-process broker, and a real ZooKeeper ---------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


StartBroker = Callable[..., Awaitable[Broker]]


@pytest.fixture
async def start_broker(tmp_path: Path) -> AsyncIterator[StartBroker]:
    """Start brokers on free ports sharing one log directory (a restart is a second start)."""
    started: list[Broker] = []

    async def start(clock: Callable[[], float] = time.time, **overrides: str) -> Broker:
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
            "log.dirs": str(tmp_path / "data"),
            "offsets.topic.num.partitions": "3",
            # Groups form at once: no classic initial delay, and no spacing of consumer groups'
            # target assignments (KIP-1263) unless a test asks for them.
            "group.initial.rebalance.delay.ms": "0",
            "group.consumer.assignment.interval.ms": "0",
            **overrides,
        }
        broker = Broker(BrokerConfig.from_properties(props), clock=clock)
        await broker.start()
        await broker.group_coordinator.wait_loaded()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        await broker.stop()


async def connect(broker: Broker) -> BrokerConnection:
    return await BrokerConnection.open(("127.0.0.1", broker.port), "group-tests", 10)


ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[str]:
    """A standalone ZooKeeper from Debian's zookeeper package on a free port; its address."""
    java = shutil.which("java")
    require(
        java is not None and ZOOKEEPER_JAR.exists(),
        "ZooKeeper (Debian package zookeeper) and java are needed",
    )
    assert java is not None
    port = free_port()
    data = tmp_path / "zookeeper"
    data.mkdir()
    log = (tmp_path / "zookeeper.log").open("w")
    process = subprocess.Popen(
        [java, "-cp", str(ZOOKEEPER_JAR), ZOOKEEPER_MAIN, str(port), str(data)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            client = KazooClient(hosts=address, timeout=2)
            try:
                client.start(timeout=2)
                client.stop()
                client.close()
                break
            except KazooTimeoutError:
                client.close()
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"ZooKeeper did not start: {(tmp_path / 'zookeeper.log').read_text()}"
                    )
        yield address
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()
