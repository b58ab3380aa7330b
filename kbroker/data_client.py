"""A small blocking Kafka client for moving data: what the Spark data source needs.

Spark runs the data source's code in Python worker processes, one task at a time, with no
event loop of their own, so this client uses plain blocking sockets and one request in flight
per connection. It speaks to any Kafka-compatible broker:

- ApiVersions v0 first, then each request at the highest version both sides support, within
  the range this client implements (``_VERSION_CAPS``): Fetch stays at v12 and below so that
  topics are named rather than identified by topic id (v13+), and Produce starts at v3, the
  first version that carries v2 record batches.
- Partition leaders come from Metadata; a request that fails with a leadership or
  connection error refreshes the metadata and is sent again.
- Produce is idempotent (KIP-98): one InitProducerId per client, sequence numbers per
  partition, acks=all. A retried batch keeps its sequence, so the broker appends it once.
- Fetched records are decoded with ``wire.records.record.decode_records``, one log entry at
  a time so that control batches (transaction markers) can be skipped by their header.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from kbroker.client_core.metadata import LEADER_ERRORS
from wire.api_keys import REQUEST_CLASSES, ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.frame import decode_response, encode_request
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from wire.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.init_producer_id_request import InitProducerIdRequest
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.request_header import RequestHeader
from wire.records.batch import read_header
from wire.records.isolation import AbortedFilter
from wire.records.record import Record, build_batch, decode_records, iter_entries

Address = tuple[str, int]
TopicPartition = tuple[str, int]

# ListOffsets special timestamps (protocol guide, ListOffsets).
LATEST = -1
EARLIEST = -2
# Fetch and ListOffsets isolation levels (KIP-98).
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# ConsumerRecord timestamp types as the Java client numbers them (Spark's timestampType).
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

DEFAULT_TIMEOUT = 30.0
RETRY_BACKOFF_SECONDS = 0.1
# Legacy message sets (magic 0/1) keep their attributes byte right after the magic byte;
# bit 3 is the timestamp type in magic 1.
_LEGACY_ATTRIBUTES_OFFSET = 17
_LEGACY_TIMESTAMP_TYPE_BIT = 0x08

# (lowest, highest) version of each request this client can build and read.
_VERSION_CAPS: dict[int, tuple[int, int]] = {
    ApiKey.METADATA: (1, 12),
    ApiKey.LIST_OFFSETS: (1, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.PRODUCE: (3, 11),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_RECORDS: (0, 2),
    # v4 and later are the brokers' own batched form (KIP-890).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
}

# FindCoordinator answers that mean "ask again shortly".
COORDINATOR_RETRY = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
}


def parse_bootstrap(servers: str | Iterable[Address]) -> list[Address]:
    """``"host:port,host:port"`` (Kafka's bootstrap.servers) as a list of addresses."""
    if not isinstance(servers, str):
        return list(servers)
    found: list[Address] = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            raise ValueError(f"bootstrap server {item!r} has no port")
        found.append((host.strip("[]"), int(port)))
    if not found:
        raise ValueError("no bootstrap servers given")
    return found


@dataclass(slots=True)
class FetchedRecord:
    """One consumed record: a ``Record`` plus the timestamp type of its batch."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(slots=True)
class FetchResult:
    """What one Fetch returned for one partition."""

    records: list[FetchedRecord]
    high_watermark: int
    log_start_offset: int
    # Where the next fetch should start: past every whole entry returned, including
    # control batches and records below the requested offset.
    next_offset: int


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


class Connection:
    """One blocking connection to one broker; requests are answered in order."""

    def __init__(self, address: Address, client_id: str, timeout: float) -> None:
        self.address = address
        self._client_id = client_id
        self._sock = socket.create_connection(address, timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0
        self.versions: dict[int, tuple[int, int]] = {}
        try:
            response = self.call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        except BaseException:
            self.close()
            raise
        if response.error_code != ErrorCode.NONE:
            self.close()
            raise KafkaError(ErrorCode(response.error_code), "ApiVersions failed")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def version(self, api_key: int) -> int:
        """The highest version of ``api_key`` that the broker and this client both support."""
        cls = REQUEST_CLASSES[api_key]
        low, high = _VERSION_CAPS.get(api_key, (cls.MIN_VERSION, cls.MAX_VERSION))
        theirs = self.versions.get(api_key)
        if theirs is not None:
            top = min(high, theirs[1])
            if top >= max(low, theirs[0]):
                return top
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION, f"no common version of {ApiKey(api_key).name}"
        )

    def call(self, api_key: int, version: int, body: Any) -> Any:
        """Send one request at ``version`` and wait for its answer (blocking)."""
        self._correlation += 1
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self._correlation,
            client_id=self._client_id,
        )
        self._sock.sendall(encode_request(header, body, version))
        (size,) = struct.unpack(">i", _recv_exact(self._sock, 4))
        response_header, response = decode_response(_recv_exact(self._sock, size), api_key, version)
        if response_header.correlation_id != self._correlation:
            raise ConnectionError(
                f"response {response_header.correlation_id} to request {self._correlation}"
            )
        return response

    def request(self, api_key: int, body: Any) -> tuple[Any, int]:
        """Send at the best common version; returns (response, version used)."""
        version = self.version(api_key)
        return self.call(api_key, version, body), version

    def close(self) -> None:
        """Close the socket."""
        self._sock.close()


class DataClient:
    """Metadata, offsets, fetch and idempotent produce against a Kafka-compatible cluster."""

    def __init__(
        self,
        bootstrap: str | Iterable[Address],
        *,
        client_id: str = "kbroker-data",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._bootstrap = parse_bootstrap(bootstrap)
        self._client_id = client_id
        self._timeout = timeout
        self._connections: dict[Address, Connection] = {}
        self._brokers: dict[int, Address] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._producer: tuple[int, int] | None = None
        self._sequences: dict[TopicPartition, int] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection this client opened."""
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            connection.close()

    # -- connections and metadata ------------------------------------------------------

    def _connection(self, address: Address) -> Connection:
        existing = self._connections.get(address)
        if existing is None:
            existing = Connection(address, self._client_id, self._timeout)
            self._connections[address] = existing
        return existing

    def _drop(self, address: Address) -> None:
        connection = self._connections.pop(address, None)
        if connection is not None:
            connection.close()

    def _any_connection(self) -> Connection:
        errors: list[str] = []
        for address in dict.fromkeys([*self._connections, *self._bootstrap]):
            try:
                return self._connection(address)
            except (OSError, KafkaError) as exc:
                self._drop(address)
                errors.append(f"{address[0]}:{address[1]}: {exc}")
        raise ConnectionError("no broker reachable: " + "; ".join(errors))

    def metadata(self, topics: Sequence[str] | None) -> dict[str, list[int]]:
        """Partition ids of ``topics`` (all non-internal topics when None); topics that do
        not exist are left out. Refreshes the brokers and partition leaders."""
        connection = self._any_connection()
        version = connection.version(ApiKey.METADATA)
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
            # Before v4 the request cannot say "do not create"; the broker's setting decides.
            allow_auto_topic_creation=version < 4,
        )
        try:
            response = connection.call(ApiKey.METADATA, version, request)
        except OSError:
            self._drop(connection.address)
            raise
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        found: dict[str, list[int]] = {}
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE or (topics is None and topic.is_internal):
                continue
            name = topic.name or ""
            found[name] = sorted(p.partition_index for p in topic.partitions)
            for p in topic.partitions:
                self._leaders[(name, p.partition_index)] = p.leader_id
        return found

    def coordinator(self, key: str, key_type: int) -> Connection:
        """The coordinator of a group (key type 0) or transactional id (1), by
        FindCoordinator, asked again while it loads or moves until the client's timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            connection = self._any_connection()
            version = connection.version(ApiKey.FIND_COORDINATOR)
            if version >= 4:
                request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
            else:
                request = FindCoordinatorRequest(key=key, key_type=key_type)
            response = connection.call(ApiKey.FIND_COORDINATOR, version, request)
            answer = response.coordinators[0] if version >= 4 else response
            if answer.error_code == ErrorCode.NONE:
                return self._connection((answer.host, answer.port))
            if answer.error_code not in COORDINATOR_RETRY or time.monotonic() > deadline:
                raise KafkaError(ErrorCode(answer.error_code), f"no coordinator for {key!r}")
            time.sleep(RETRY_BACKOFF_SECONDS)

    @property
    def timeout(self) -> float:
        """Seconds a request, with its retries, may take."""
        return self._timeout

    def _leader(self, tp: TopicPartition) -> Connection:
        if tp not in self._leaders or self._leaders[tp] not in self._brokers:
            self.metadata([tp[0]])
        leader = self._leaders.get(tp, -1)
        if leader < 0 or leader not in self._brokers:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"no leader for {tp[0]}-{tp[1]}")
        return self._connection(self._brokers[leader])

    def _with_leader(self, tp: TopicPartition, attempt: Any) -> Any:
        """``attempt(connection)`` on the partition's leader, retried after leadership and
        connection errors until the client's timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            address: Address | None = None
            try:
                connection = self._leader(tp)
                address = connection.address
                return attempt(connection)
            except KafkaError as exc:
                if exc.code not in LEADER_ERRORS or time.monotonic() > deadline:
                    raise
                self._leaders.pop(tp, None)
            except OSError:
                if address is not None:
                    self._drop(address)
                self._leaders.pop(tp, None)
                if time.monotonic() > deadline:
                    raise
            time.sleep(RETRY_BACKOFF_SECONDS)

    def create_topics(
        self,
        topics: Mapping[str, int],
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create each topic with its partition count and the topic ``configs``; existing
        topics are left alone."""
        topic_configs = [
            CreatableTopicConfig(name=key, value=value) for key, value in (configs or {}).items()
        ]
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=name,
                    num_partitions=count,
                    replication_factor=replication_factor,
                    configs=topic_configs,
                )
                for name, count in topics.items()
            ],
            timeout_ms=int(self._timeout * 1000),
        )
        response, _ = self._any_connection().request(ApiKey.CREATE_TOPICS, request)
        for result in response.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise KafkaError(
                    ErrorCode(result.error_code), f"create {result.name}: {result.error_message}"
                )

    def delete_records(self, tp: TopicPartition, before: int) -> int:
        """Delete the partition's records below offset ``before`` (-1: all of them, up to the
        high watermark); returns the new log start offset."""

        def attempt(connection: Connection) -> int:
            request = DeleteRecordsRequest(
                topics=[
                    DeleteRecordsTopic(
                        name=tp[0],
                        partitions=[DeleteRecordsPartition(partition_index=tp[1], offset=before)],
                    )
                ],
                timeout_ms=int(self._timeout * 1000),
            )
            response, _ = connection.request(ApiKey.DELETE_RECORDS, request)
            for topic in response.topics:
                for p in topic.partitions:
                    if p.error_code != ErrorCode.NONE:
                        raise KafkaError(ErrorCode(p.error_code), f"delete records {tp}")
                    return int(p.low_watermark)
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]}")

        return int(self._with_leader(tp, attempt))

    # -- offsets -------------------------------------------------------------------------

    def list_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timestamp: int,
        *,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> dict[TopicPartition, int]:
        """Per partition: the first offset whose timestamp is >= ``timestamp`` (ms), or the
        log end offset for LATEST (the last stable offset at READ_COMMITTED), or the log
        start offset for EARLIEST. -1 where no record is that recent."""
        found: dict[TopicPartition, int] = {}
        for tp in sorted(set(partitions)):
            found[tp] = self._with_leader(
                tp, lambda c, tp=tp: self._list_one(c, tp, timestamp, isolation_level)
            )
        return found

    def _list_one(
        self, connection: Connection, tp: TopicPartition, timestamp: int, isolation_level: int
    ) -> int:
        if isolation_level != READ_UNCOMMITTED and connection.version(ApiKey.LIST_OFFSETS) < 2:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "read_committed needs ListOffsets v2")
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[
                ListOffsetsTopic(
                    name=tp[0],
                    partitions=[ListOffsetsPartition(partition_index=tp[1], timestamp=timestamp)],
                )
            ],
        )
        response, _ = connection.request(ApiKey.LIST_OFFSETS, request)
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise KafkaError(ErrorCode(p.error_code), f"list offsets {tp[0]}-{tp[1]}")
                return int(p.offset)
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]}")

    # -- fetch ---------------------------------------------------------------------------

    def fetch(
        self,
        tp: TopicPartition,
        offset: int,
        *,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> FetchResult:
        """Records of one partition from ``offset`` on: below the high watermark, or at
        READ_COMMITTED below the last stable offset and without the records of aborted
        transactions. Raises KafkaError(OFFSET_OUT_OF_RANGE) outside the log."""
        return self._with_leader(  # type: ignore[no-any-return]
            tp, lambda c: self._fetch_one(c, tp, offset, max_bytes, max_wait_ms, isolation_level)
        )

    def _fetch_one(
        self,
        connection: Connection,
        tp: TopicPartition,
        offset: int,
        max_bytes: int,
        wait: int,
        isolation_level: int,
    ) -> FetchResult:
        if isolation_level != READ_UNCOMMITTED and connection.version(ApiKey.FETCH) < 4:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "read_committed needs Fetch v4")
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=wait,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=isolation_level,
            topics=[
                FetchTopic(
                    topic=tp[0],
                    partitions=[
                        FetchPartition(
                            partition=tp[1], fetch_offset=offset, partition_max_bytes=max_bytes
                        )
                    ],
                )
            ],
        )
        response, _ = connection.request(ApiKey.FETCH, request)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code), f"fetch {tp[0]}-{tp[1]}")
        for topic in response.responses:
            for p in topic.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise KafkaError(
                        ErrorCode(p.error_code), f"fetch {tp[0]}-{tp[1]} at offset {offset}"
                    )
                aborted = (
                    AbortedFilter((a.producer_id, a.first_offset) for a in p.aborted_transactions)
                    if isolation_level != READ_UNCOMMITTED and p.aborted_transactions
                    else None
                )
                records, next_offset = _decode_fetched(p.records or b"", offset, aborted)
                return FetchResult(records, p.high_watermark, p.log_start_offset, next_offset)
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]}")

    # -- produce -------------------------------------------------------------------------

    def _producer_id(self) -> tuple[int, int]:
        if self._producer is None:
            response, _ = self._any_connection().request(
                ApiKey.INIT_PRODUCER_ID,
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1),
            )
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(ErrorCode(response.error_code), "InitProducerId failed")
            self._producer = (response.producer_id, response.producer_epoch)
        return self._producer

    def produce(
        self,
        tp: TopicPartition,
        records: Sequence[Record],
        *,
        compression: int = 0,
        idempotent: bool = True,
    ) -> int:
        """Append ``records`` (their offsets are ignored) as one batch; returns the base offset
        the broker assigned. Idempotent: a retry after a lost answer is not appended twice."""
        if not records:
            raise ValueError("nothing to produce")
        renumbered = [
            Record(offset=i, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers)
            for i, r in enumerate(records)
        ]
        if idempotent:
            producer_id, epoch = self._producer_id()
            sequence = self._sequences.get(tp, 0)
            batch = build_batch(
                renumbered,
                compression=compression,
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=sequence,
            )
        else:
            batch = build_batch(renumbered, compression=compression)
        base = self.produce_batch(tp, batch)
        if idempotent:
            # Sequences wrap at int32 max (KIP-98).
            self._sequences[tp] = (sequence + len(records)) & 0x7FFFFFFF
        return base

    def produce_batch(
        self, tp: TopicPartition, batch: bytes, *, transactional_id: str | None = None
    ) -> int:
        """Append one record batch built by the caller (acks=all); returns its base offset.
        A transactional batch names its transactional id."""
        return int(
            self._with_leader(tp, lambda c: self._produce_one(c, tp, batch, transactional_id))
        )

    def _produce_one(
        self,
        connection: Connection,
        tp: TopicPartition,
        batch: bytes,
        transactional_id: str | None,
    ) -> int:
        request = ProduceRequest(
            transactional_id=transactional_id,
            acks=-1,
            timeout_ms=int(self._timeout * 1000),
            topic_data=[
                TopicProduceData(
                    name=tp[0], partition_data=[PartitionProduceData(index=tp[1], records=batch)]
                )
            ],
        )
        response, _ = connection.request(ApiKey.PRODUCE, request)
        for topic in response.responses:
            for p in topic.partition_responses:
                # A duplicate of a batch already appended: the first append stands (KIP-98).
                if p.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    return int(p.base_offset)
                raise KafkaError(
                    ErrorCode(p.error_code),
                    f"produce {tp[0]}-{tp[1]}: {p.error_message or ''}".rstrip(": "),
                )
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]}")


def _decode_fetched(
    buf: bytes | memoryview, offset: int, aborted: AbortedFilter | None = None
) -> tuple[list[FetchedRecord], int]:
    """Records at or past ``offset`` from a Fetch's record set, and the next fetch offset.
    Control batches are skipped, and with `aborted` the batches of aborted transactions; a
    trailing partial entry is left for the next fetch."""
    view = memoryview(buf)
    out: list[FetchedRecord] = []
    next_offset = offset
    for pos, size, magic in iter_entries(view):
        entry = view[pos : pos + size]
        if magic == 2:
            header = read_header(entry)
            next_offset = max(next_offset, header.next_offset)
            if aborted is not None and aborted.drop(header, entry):
                continue
            if header.is_control:
                continue
            timestamp_type = LOG_APPEND_TIME if header.timestamp_type else CREATE_TIME
        elif magic == 1:
            attributes = entry[_LEGACY_ATTRIBUTES_OFFSET]
            timestamp_type = (
                LOG_APPEND_TIME if attributes & _LEGACY_TIMESTAMP_TYPE_BIT else CREATE_TIME
            )
        else:
            timestamp_type = NO_TIMESTAMP_TYPE
        for r in decode_records(entry):
            if r.offset >= offset:
                out.append(
                    FetchedRecord(r.offset, r.timestamp, timestamp_type, r.key, r.value, r.headers)
                )
            next_offset = max(next_offset, r.offset + 1)
    return out, next_offset
