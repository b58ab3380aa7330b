"""kbroker's asyncio Kafka client: the command-line tools, follower fetchers, transaction
markers.

A thin shell over kbroker.client_core: this module moves bytes between sockets (TLS-wrapped
where ``security.protocol`` says so) and the core's connection state machine, and keeps
time (every call has a timeout; a SASL session is renewed before the lifetime the broker
gave it ends, KIP-368). Versions, framing, correlation, SASL and the knowledge of leaders
and coordinators are the core's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from kbroker.client_core.connection import (
    ClientConnection,
    Event,
    Ready,
    Reauthenticated,
    Response,
    State,
    Versions,
)
from kbroker.client_core.metadata import (
    COORDINATOR_ERRORS,
    GROUP,
    Address,
    ClusterMetadata,
    TopicPartition,
    find_coordinator_answer,
    find_coordinator_request,
    metadata_request,
    topic_partitions,
)
from kbroker.client_core.requests import (
    EARLIEST,
    LATEST,
    list_offsets_request,
    list_offsets_results,
    offset_commit_request,
    offset_commit_results,
    offset_fetch_request,
    offset_fetch_results,
)
from kbroker.client_core.security import PLAINTEXT, SecurityConfig
from kbroker.client_tls import ssl_context
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.describe_groups_request import DescribeGroupsRequest
from wire.messages.describe_groups_response import DescribedGroup
from wire.messages.list_groups_request import ListGroupsRequest
from wire.messages.metadata_response import MetadataResponse

__all__ = [
    "EARLIEST",
    "LATEST",
    "Address",
    "BrokerConnection",
    "KafkaClient",
    "TopicPartition",
    "parse_address",
]

DEFAULT_TIMEOUT = 30.0
RETRY_BACKOFF_SECONDS = 0.2
# KIP-368: re-authenticate this far into the session the broker granted.
REAUTH_FRACTION = 0.85
T = TypeVar("T")


def parse_address(text: str, default_port: int = 9092) -> Address:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    return host.strip("[]"), int(port)


class _Protocol(asyncio.BufferedProtocol):
    """Reads the socket straight into the core's buffer and hands the core's events to
    whoever waits for them."""

    def __init__(self, core: ClientConnection, loop: asyncio.AbstractEventLoop) -> None:
        self.core = core
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.ready: asyncio.Future[Ready] = loop.create_future()
        self.waiters: dict[int, asyncio.Future[Any]] = {}
        self.error: Exception | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._reauth: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.flush()

    def flush(self) -> None:
        data = self.core.data_to_send()
        if data and self.transport is not None:
            self.transport.write(data)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.core.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            events = self.core.buffer_updated(nbytes)
        except Exception as exc:
            self.fail(exc)
            return
        for event in events:
            self._dispatch(event)
        self.flush()

    def _dispatch(self, event: Event) -> None:
        if isinstance(event, Response):
            waiter = self.waiters.pop(event.correlation_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(event.body)
            return
        if isinstance(event, Ready) and not self.ready.done():
            self.ready.set_result(event)
        assert isinstance(event, Ready | Reauthenticated)
        if event.session_lifetime_ms > 0:
            delay = event.session_lifetime_ms / 1000 * REAUTH_FRACTION
            self._reauth = self._loop.call_later(delay, self._reauthenticate)

    def _reauthenticate(self) -> None:
        if self.core.state is State.READY:
            self.core.reauthenticate()
            self.flush()

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(exc or ConnectionError("connection closed by the broker"))

    def fail(self, exc: BaseException) -> None:
        """The connection is unusable: everyone waiting learns why."""
        if self.error is None:
            # A cancelled opener must not hand its CancelledError to other waiters.
            self.error = exc if isinstance(exc, Exception) else ConnectionError("abandoned")
        self.core.close()
        if self._reauth is not None:
            self._reauth.cancel()
        waiters = [self.ready, *self.waiters.values()]
        self.waiters.clear()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(self.error)
                # Marked as retrieved: nobody may be left to await it.
                waiter.exception()
        self._writable.set()
        if self.transport is not None:
            self.transport.abort()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def drain(self) -> None:
        if not self._writable.is_set():
            await self._writable.wait()


class BrokerConnection:
    """One connection; requests may be pipelined, answers come back in order."""

    def __init__(self, protocol: _Protocol, timeout: float) -> None:
        self._protocol = protocol
        self._core = protocol.core
        self._timeout = timeout

    @classmethod
    async def open(
        cls,
        address: Address,
        client_id: str,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        security: SecurityConfig = PLAINTEXT,
        caps: Versions | None = None,
    ) -> BrokerConnection:
        """Connect, negotiate versions and authenticate, within ``timeout``."""
        loop = asyncio.get_running_loop()
        core = ClientConnection(client_id, caps=caps, sasl=security.mechanism())
        protocol = _Protocol(core, loop)
        tls = ssl_context(security)
        try:
            async with asyncio.timeout(timeout):
                await loop.create_connection(
                    lambda: protocol,
                    *address,
                    ssl=tls,
                    server_hostname=address[0] if tls is not None else None,
                )
                await protocol.ready
        except BaseException as exc:
            protocol.fail(exc)
            raise
        return cls(protocol, timeout)

    @property
    def versions(self) -> Versions:
        return self._core.versions

    @property
    def closed(self) -> bool:
        return self._protocol.error is not None

    def version(self, api_key: int, highest: int | None = None) -> int:
        """The highest version of ``api_key`` both sides support (at most ``highest``)."""
        return self._core.version(api_key, highest)

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        """Send ``body`` at ``version`` and wait for its answer (None for a Produce with
        acks=0). A timeout closes the connection: the answer may still be on its way."""
        protocol = self._protocol
        if protocol.error is not None:
            raise ConnectionError(f"connection is closed: {protocol.error}")
        sent = self._core.send(api_key, body, version)
        waiter: asyncio.Future[Any] | None = None
        if sent.expects_response:
            waiter = asyncio.get_running_loop().create_future()
            protocol.waiters[sent.correlation_id] = waiter
        protocol.flush()
        try:
            # asyncio.timeout, not wait_for: no task wrapped around every inter-broker fetch.
            async with asyncio.timeout(self._timeout):
                await protocol.drain()
                return None if waiter is None else await waiter
        except TimeoutError as exc:
            protocol.fail(exc)
            raise

    async def request(self, api_key: int, body: Any, highest: int | None = None) -> tuple[Any, int]:
        """Send at the best common version; returns (response, version used)."""
        version = self._core.version(api_key, highest)
        return await self.call(api_key, version, body), version

    async def close(self) -> None:
        self._protocol.fail(ConnectionError("connection closed"))


class KafkaClient:
    """Cluster-level operations over connections to the brokers it learns of."""

    def __init__(
        self,
        bootstrap: Iterable[Address],
        *,
        client_id: str = "kbroker-cli",
        timeout: float = DEFAULT_TIMEOUT,
        security: SecurityConfig = PLAINTEXT,
    ) -> None:
        self._bootstrap = list(bootstrap)
        self._client_id = client_id
        self._timeout = timeout
        self._security = security
        ssl_context(security)  # bad TLS settings fail here, not at the first connection
        self._connections: dict[Address, BrokerConnection] = {}
        self.cluster = ClusterMetadata()

    @property
    def brokers(self) -> Mapping[int, Address]:
        return self.cluster.brokers

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.close()

    async def connection(self, address: Address) -> BrokerConnection:
        existing = self._connections.get(address)
        if existing is not None and not existing.closed:
            return existing
        connection = await BrokerConnection.open(
            address, self._client_id, self._timeout, security=self._security
        )
        self._connections[address] = connection
        return connection

    async def any_connection(self) -> BrokerConnection:
        errors: list[str] = []
        for address in dict.fromkeys([*self._connections, *self._bootstrap]):
            try:
                return await self.connection(address)
            except (OSError, TimeoutError, KafkaError) as exc:
                errors.append(f"{address[0]}:{address[1]}: {exc}")
        raise ConnectionError("no broker reachable: " + "; ".join(errors))

    async def node(self, node_id: int) -> BrokerConnection:
        if node_id not in self.brokers:
            await self.metadata([])
        return await self.connection(self.brokers[node_id])

    async def metadata(
        self, topics: list[str] | None, *, allow_auto_topic_creation: bool = False
    ) -> MetadataResponse:
        """Metadata of ``topics`` (None: all topics); also refreshes the broker list. With
        ``allow_auto_topic_creation`` the broker may create missing topics (v4+; before,
        only its auto.create.topics.enable decides)."""
        connection = await self.any_connection()
        version = connection.version(ApiKey.METADATA)
        request = metadata_request(
            topics, version, allow_auto_topic_creation=allow_auto_topic_creation
        )
        response = await connection.call(ApiKey.METADATA, version, request)
        assert isinstance(response, MetadataResponse)
        self.cluster.update(response)
        return response

    async def partitions(self, topics: list[str] | None = None) -> dict[str, list[int]]:
        """Existing topics (all non-internal when None) -> partition ids."""
        response = await self.metadata(topics)
        return topic_partitions(response, include_internal=topics is not None)

    async def coordinator(self, key: str, key_type: int = GROUP) -> BrokerConnection:
        """A connection to the coordinator of ``key`` (a group id by default), found
        again where it moved, until the client's timeout."""
        deadline = asyncio.get_running_loop().time() + self._timeout
        while True:
            address = self.cluster.coordinator(key, key_type)
            if address is not None:
                try:
                    return await self.connection(address)
                except (OSError, TimeoutError):
                    # Gone with its broker: ask where it went.
                    self.cluster.coordinator_error(
                        key, key_type, ErrorCode.COORDINATOR_NOT_AVAILABLE
                    )
                    if asyncio.get_running_loop().time() > deadline:
                        raise
                    continue
            connection = await self.any_connection()
            version = connection.version(ApiKey.FIND_COORDINATOR)
            request = find_coordinator_request(key, key_type, version)
            response = await connection.call(ApiKey.FIND_COORDINATOR, version, request)
            answer = find_coordinator_answer(response, version)
            if self.cluster.coordinator_found(key, key_type, answer):
                continue
            if (
                answer.error not in COORDINATOR_ERRORS
                or asyncio.get_running_loop().time() > deadline
            ):
                raise KafkaError(answer.error, f"no coordinator for {key!r}")
            await asyncio.sleep(RETRY_BACKOFF_SECONDS)

    async def at_coordinator(
        self, group_id: str, attempt: Callable[[BrokerConnection], Awaitable[T]]
    ) -> T:
        """Run ``attempt(coordinator)`` until it does not fail with a coordinator error."""
        deadline = asyncio.get_running_loop().time() + self._timeout
        while True:
            connection = await self.coordinator(group_id)
            try:
                return await attempt(connection)
            except KafkaError as exc:
                retry = self.cluster.coordinator_error(group_id, GROUP, exc.code)
                if not retry or asyncio.get_running_loop().time() > deadline:
                    raise
            await asyncio.sleep(RETRY_BACKOFF_SECONDS)

    async def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group on every broker."""
        await self.metadata([])
        groups: dict[str, tuple[str, str, str]] = {}
        for address in sorted(set(self.brokers.values())):
            connection = await self.connection(address)
            response, version = await connection.request(ApiKey.LIST_GROUPS, ListGroupsRequest())
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(ErrorCode(response.error_code), "ListGroups failed")
            for g in response.groups:
                state = g.group_state if version >= 4 else ""
                groups[g.group_id] = (g.group_id, g.protocol_type, state)
        return sorted(groups.values())

    async def describe_group(self, group_id: str) -> DescribedGroup:
        async def attempt(connection: BrokerConnection) -> DescribedGroup:
            response, _ = await connection.request(
                ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group_id])
            )
            described: DescribedGroup = response.groups[0]
            if described.error_code != ErrorCode.NONE:
                raise KafkaError(ErrorCode(described.error_code), f"describe {group_id!r}")
            return described

        return await self.at_coordinator(group_id, attempt)

    async def committed(self, group_id: str) -> dict[TopicPartition, tuple[int, str]]:
        """All committed offsets of a group: (topic, partition) -> (offset, metadata)."""

        async def attempt(connection: BrokerConnection) -> dict[TopicPartition, tuple[int, str]]:
            version = connection.version(ApiKey.OFFSET_FETCH)
            request = offset_fetch_request(group_id, version)
            response = await connection.call(ApiKey.OFFSET_FETCH, version, request)
            error, partitions = offset_fetch_results(response, version)
            if error != ErrorCode.NONE:
                raise KafkaError(error, f"offsets of {group_id!r}")
            found: dict[TopicPartition, tuple[int, str]] = {}
            for (topic, partition), (p_error, offset, metadata) in partitions.items():
                if p_error != ErrorCode.NONE:
                    raise KafkaError(p_error, f"{topic}-{partition}")
                if offset >= 0:
                    found[(topic, partition)] = (offset, metadata)
            return found

        return await self.at_coordinator(group_id, attempt)

    async def commit(
        self, group_id: str, offsets: dict[TopicPartition, tuple[int, str]]
    ) -> dict[TopicPartition, ErrorCode]:
        """A commit without group membership (generation -1, as an admin tool does); the group
        must be empty. Returns per-partition errors."""
        request = offset_commit_request(group_id, offsets)

        async def attempt(connection: BrokerConnection) -> dict[TopicPartition, ErrorCode]:
            response, _ = await connection.request(ApiKey.OFFSET_COMMIT, request)
            errors = offset_commit_results(response)
            for error in errors.values():
                if error in COORDINATOR_ERRORS:
                    raise KafkaError(error, "commit")
            return errors

        return await self.at_coordinator(group_id, attempt)

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """Offsets by timestamp (LATEST, EARLIEST, or ms), asking each partition's leader; -1
        where no record is that recent."""
        wanted = sorted(set(partitions))
        await self.metadata(sorted({t for t, _ in wanted}))
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            leader = self.cluster.leader(tp)
            if leader is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]}")
            by_leader.setdefault(leader.node_id, []).append(tp)
        found: dict[TopicPartition, int] = {}
        for leader_id, tps in by_leader.items():
            connection = await self.node(leader_id)
            request = list_offsets_request(tps, timestamp)
            response, version = await connection.request(ApiKey.LIST_OFFSETS, request)
            results = list_offsets_results(response, version)
            for (topic, partition), (error, offset) in results.items():
                if error != ErrorCode.NONE:
                    raise KafkaError(error, f"list offsets {topic}-{partition}")
                found[(topic, partition)] = offset
        return found
