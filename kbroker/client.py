"""A minimal asyncio Kafka client over ``wire``, for kbroker's own command-line tools.

It speaks to any Kafka-compatible broker: it negotiates versions with ApiVersions (KIP-511)
and uses the highest version both sides support (capped where a caller asks), finds partition
leaders through Metadata and group coordinators through FindCoordinator. One request is in
flight per connection; every call has a timeout.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable
from typing import Any

from wire.api_keys import REQUEST_CLASSES, ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.frame import decode_response, encode_request
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.api_versions_response import ApiVersionsResponse
from wire.messages.describe_groups_request import DescribeGroupsRequest
from wire.messages.describe_groups_response import DescribedGroup
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.list_groups_request import ListGroupsRequest
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from wire.messages.metadata_response import MetadataResponse
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from wire.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
)
from wire.messages.request_header import RequestHeader

TopicPartition = tuple[str, int]
Address = tuple[str, int]

DEFAULT_TIMEOUT = 30.0
# Errors after which a coordinator look-up is retried (the coordinator moves or loads).
_COORDINATOR_RETRY = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
}
RETRY_BACKOFF_SECONDS = 0.2
# ListOffsets special timestamps.
LATEST = -1
EARLIEST = -2


def parse_address(text: str, default_port: int = 9092) -> Address:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    return host.strip("[]"), int(port)


class BrokerConnection:
    """One connection, requests answered in order."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
        timeout: float,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._timeout = timeout
        self._correlation = 0
        self._lock = asyncio.Lock()
        self.versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def open(
        cls, address: Address, client_id: str, timeout: float = DEFAULT_TIMEOUT
    ) -> BrokerConnection:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), timeout)
        connection = cls(reader, writer, client_id, timeout)
        try:
            response = await connection.call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        except BaseException:
            await connection.close()
            raise
        assert isinstance(response, ApiVersionsResponse)
        if response.error_code != ErrorCode.NONE:
            await connection.close()
            raise KafkaError(ErrorCode(response.error_code), "ApiVersions failed")
        connection.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        return connection

    def version(self, api_key: int, highest: int | None = None) -> int:
        """The highest version of ``api_key`` both sides support (at most ``highest``)."""
        cls = REQUEST_CLASSES[api_key]
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION, f"the broker does not support {ApiKey(api_key).name}"
            )
        top = min(cls.MAX_VERSION, theirs[1], cls.MAX_VERSION if highest is None else highest)
        if top < max(cls.MIN_VERSION, theirs[0]):
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION, f"no common version of {ApiKey(api_key).name}"
            )
        return top

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        async with self._lock:
            self._correlation += 1
            correlation = self._correlation
            header = RequestHeader(
                request_api_key=api_key,
                request_api_version=version,
                correlation_id=correlation,
                client_id=self._client_id,
            )
            self._writer.write(encode_request(header, body, version))
            await self._writer.drain()
            # asyncio.timeout, not wait_for: no task wrapped around every inter-broker fetch.
            async with asyncio.timeout(self._timeout):
                return await self._receive(api_key, version, correlation)

    async def request(self, api_key: int, body: Any, highest: int | None = None) -> tuple[Any, int]:
        """Send at the best common version; returns (response, version used)."""
        version = self.version(api_key, highest)
        return await self.call(api_key, version, body), version

    async def _receive(self, api_key: int, version: int, correlation: int) -> Any:
        size = struct.unpack(">i", await self._reader.readexactly(4))[0]
        frame = await self._reader.readexactly(size)
        header, body = decode_response(frame, api_key, version)
        if header.correlation_id != correlation:
            raise ConnectionError(f"response {header.correlation_id} to request {correlation}")
        return body

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass


class KafkaClient:
    """Cluster-level operations over connections to the brokers it learns of."""

    def __init__(
        self,
        bootstrap: Iterable[Address],
        *,
        client_id: str = "kbroker-cli",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._bootstrap = list(bootstrap)
        self._client_id = client_id
        self._timeout = timeout
        self._connections: dict[Address, BrokerConnection] = {}
        self.brokers: dict[int, Address] = {}

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
        if existing is not None:
            return existing
        connection = await BrokerConnection.open(address, self._client_id, self._timeout)
        self._connections[address] = connection
        return connection

    async def any_connection(self) -> BrokerConnection:
        errors: list[str] = []
        for address in [*self._connections, *self._bootstrap]:
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
        request = MetadataRequest(
            # Before v1 an empty list meant all topics and null was not allowed.
            topics=None
            if topics is None and version >= 1
            else [MetadataRequestTopic(name=t) for t in topics or []],
            allow_auto_topic_creation=allow_auto_topic_creation or version < 4,
        )
        response = await connection.call(ApiKey.METADATA, version, request)
        assert isinstance(response, MetadataResponse)
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        return response

    async def partitions(self, topics: list[str] | None = None) -> dict[str, list[int]]:
        """Existing topics (all non-internal when None) -> partition ids."""
        response = await self.metadata(topics)
        found: dict[str, list[int]] = {}
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE or (topics is None and topic.is_internal):
                continue
            found[topic.name or ""] = sorted(p.partition_index for p in topic.partitions)
        return found

    async def coordinator(self, group_id: str) -> BrokerConnection:
        deadline = asyncio.get_running_loop().time() + self._timeout
        while True:
            connection = await self.any_connection()
            version = connection.version(ApiKey.FIND_COORDINATOR)
            if version >= 4:
                request = FindCoordinatorRequest(coordinator_keys=[group_id])
            else:
                request = FindCoordinatorRequest(key=group_id)
            response = await connection.call(ApiKey.FIND_COORDINATOR, version, request)
            if version >= 4:
                entry = response.coordinators[0]
                error, node_id, host, port = entry.error_code, entry.node_id, entry.host, entry.port
            else:
                error, node_id, host, port = (
                    response.error_code,
                    response.node_id,
                    response.host,
                    response.port,
                )
            if error == ErrorCode.NONE:
                self.brokers[node_id] = (host, port)
                return await self.connection((host, port))
            if error not in _COORDINATOR_RETRY or asyncio.get_running_loop().time() > deadline:
                raise KafkaError(ErrorCode(error), f"no coordinator for group {group_id!r}")
            await asyncio.sleep(RETRY_BACKOFF_SECONDS)

    async def _retrying(self, group_id: str, attempt: Any) -> Any:
        """Run ``attempt(coordinator)`` until it does not fail with a coordinator error."""
        deadline = asyncio.get_running_loop().time() + self._timeout
        while True:
            connection = await self.coordinator(group_id)
            try:
                return await attempt(connection)
            except KafkaError as exc:
                if (
                    exc.code not in _COORDINATOR_RETRY
                    or asyncio.get_running_loop().time() > deadline
                ):
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
            described = response.groups[0]
            if described.error_code != ErrorCode.NONE:
                raise KafkaError(ErrorCode(described.error_code), f"describe {group_id!r}")
            return described

        result: DescribedGroup = await self._retrying(group_id, attempt)
        return result

    async def committed(self, group_id: str) -> dict[TopicPartition, tuple[int, str]]:
        """All committed offsets of a group: (topic, partition) -> (offset, metadata)."""

        async def attempt(connection: BrokerConnection) -> dict[TopicPartition, tuple[int, str]]:
            version = connection.version(ApiKey.OFFSET_FETCH)
            if version >= 8:
                request = OffsetFetchRequest(
                    groups=[OffsetFetchRequestGroup(group_id=group_id, topics=None)]
                )
                response = await connection.call(ApiKey.OFFSET_FETCH, version, request)
                group = response.groups[0]
                error, topics = group.error_code, group.topics
            else:
                if version < 2:
                    raise KafkaError(
                        ErrorCode.UNSUPPORTED_VERSION, "OffsetFetch v2+ is needed for all topics"
                    )
                request = OffsetFetchRequest(group_id=group_id, topics=None)
                response = await connection.call(ApiKey.OFFSET_FETCH, version, request)
                error, topics = response.error_code, response.topics
            if error != ErrorCode.NONE:
                raise KafkaError(ErrorCode(error), f"offsets of {group_id!r}")
            found: dict[TopicPartition, tuple[int, str]] = {}
            for topic in topics:
                for p in topic.partitions:
                    if p.error_code != ErrorCode.NONE:
                        raise KafkaError(
                            ErrorCode(p.error_code), f"{topic.name}-{p.partition_index}"
                        )
                    if p.committed_offset >= 0:
                        found[(topic.name, p.partition_index)] = (
                            p.committed_offset,
                            p.metadata or "",
                        )
            return found

        result: dict[TopicPartition, tuple[int, str]] = await self._retrying(group_id, attempt)
        return result

    async def commit(
        self, group_id: str, offsets: dict[TopicPartition, tuple[int, str]]
    ) -> dict[TopicPartition, ErrorCode]:
        """A commit without group membership (generation -1, as an admin tool does); the group
        must be empty. Returns per-partition errors."""
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), (offset, metadata) in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=offset, committed_metadata=metadata
                )
            )
        request = OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )

        async def attempt(connection: BrokerConnection) -> dict[TopicPartition, ErrorCode]:
            response, _ = await connection.request(ApiKey.OFFSET_COMMIT, request)
            errors = {
                (t.name, p.partition_index): ErrorCode(p.error_code)
                for t in response.topics
                for p in t.partitions
            }
            for error in errors.values():
                if error in _COORDINATOR_RETRY:
                    raise KafkaError(error, "commit")
            return errors

        result: dict[TopicPartition, ErrorCode] = await self._retrying(group_id, attempt)
        return result

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """Offsets by timestamp (LATEST, EARLIEST, or ms), asking each partition's leader; -1
        where no record is that recent."""
        wanted = sorted(set(partitions))
        response = await self.metadata(sorted({t for t, _ in wanted}))
        leaders: dict[TopicPartition, int] = {}
        for topic in response.topics:
            for p in topic.partitions:
                leaders[(topic.name or "", p.partition_index)] = p.leader_id
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            if tp not in leaders:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]}")
            by_leader.setdefault(leaders[tp], []).append(tp)
        found: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            connection = await self.node(leader)
            topics: dict[str, list[ListOffsetsPartition]] = {}
            for topic, partition in tps:
                topics.setdefault(topic, []).append(
                    ListOffsetsPartition(
                        partition_index=partition, timestamp=timestamp, max_num_offsets=1
                    )
                )
            request = ListOffsetsRequest(
                replica_id=-1,
                topics=[ListOffsetsTopic(name=t, partitions=p) for t, p in topics.items()],
            )
            result, version = await connection.request(ApiKey.LIST_OFFSETS, request)
            for topic in result.topics:
                for p in topic.partitions:
                    if p.error_code != ErrorCode.NONE:
                        raise KafkaError(
                            ErrorCode(p.error_code),
                            f"list offsets {topic.name}-{p.partition_index}",
                        )
                    if version == 0:
                        offset = p.old_style_offsets[0] if p.old_style_offsets else -1
                    else:
                        offset = p.offset
                    found[(topic.name, p.partition_index)] = offset
        return found
