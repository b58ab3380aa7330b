"""A small blocking Kafka client for moving data: what the Spark data source needs.

Spark runs the data source's code in Python worker processes, one task at a time, with no
event loop of their own, so this client uses plain blocking sockets (TLS-wrapped where
``security.protocol`` says so) and one request in flight per connection. It is a thin shell
over kbroker.client_core, which negotiates versions, frames, authenticates, builds the
requests and knows the leaders; this module does the IO, the timeouts and the retries:

- Each request goes at the highest version both sides support, within what this client
  implements (``VERSION_CAPS``): Fetch stays at v12 and below so that topics are named
  rather than identified by topic id (v13+), and Produce starts at v3, the first version
  that carries v2 record batches.
- A request that fails with a leadership or connection error is sent again once the
  leader is known again (from Metadata, or from the error itself, KIP-951).
- Produce is idempotent (KIP-98): one InitProducerId per client, sequence numbers per
  partition, acks=all. A retried batch keeps its sequence, so the broker appends it once.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn, Self, TypeVar

from kbroker.client_core.connection import (
    ClientConnection,
    Ready,
    Reauthenticated,
    Response,
    State,
)
from kbroker.client_core.fetched import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    FetchedRecord,
    FetchResult,
    decode_fetched,
)
from kbroker.client_core.metadata import (
    COORDINATOR_ERRORS,
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
    READ_COMMITTED,
    READ_UNCOMMITTED,
    create_topics_request,
    delete_records_request,
    fetch_request,
    list_offsets_request,
    list_offsets_results,
    produce_answer,
    produce_request,
)
from kbroker.client_core.security import PLAINTEXT, SecurityConfig
from kbroker.client_tls import ssl_context
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.init_producer_id_request import InitProducerIdRequest
from wire.records.isolation import AbortedFilter
from wire.records.record import Record, build_batch

__all__ = [
    "CREATE_TIME",
    "EARLIEST",
    "LATEST",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "DataClient",
    "FetchResult",
    "FetchedRecord",
    "parse_bootstrap",
]

DEFAULT_TIMEOUT = 30.0
RETRY_BACKOFF_SECONDS = 0.1
# KIP-368: re-authenticate this far into the session the broker granted.
REAUTH_FRACTION = 0.85
T = TypeVar("T")

# (lowest, highest) version of each request this client can build and read.
VERSION_CAPS: dict[int, tuple[int, int]] = {
    ApiKey.METADATA: (1, 12),
    ApiKey.LIST_OFFSETS: (1, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.PRODUCE: (3, 11),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.FIND_COORDINATOR: (0, 4),
    # v4 and later are the brokers' own batched form (KIP-890).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
}


class _LeaderError(KafkaError):
    """A partition request failed in a way that sending it again to the partition's
    (possibly new) leader may cure."""


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


class Connection:
    """One blocking connection to one broker; requests are answered in order."""

    def __init__(
        self,
        address: Address,
        client_id: str,
        timeout: float,
        security: SecurityConfig = PLAINTEXT,
    ) -> None:
        self.address = address
        self._core = ClientConnection(client_id, caps=VERSION_CAPS, sasl=security.mechanism())
        self._reauth_at: float | None = None
        sock = socket.create_connection(address, timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = ssl_context(security)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname=address[0])
            self._sock = sock
            self._wait(lambda event: isinstance(event, Ready))
        except BaseException:
            sock.close()
            raise

    def _wait(self, done: Callable[[object], bool]) -> Any:
        """Write what the core has to send and read until an event satisfies ``done``."""
        while True:
            data = self._core.data_to_send()
            if data:
                self._sock.sendall(data)
            buf = self._core.get_buffer()
            n = self._sock.recv_into(buf)
            del buf
            if n == 0:
                raise ConnectionError("connection closed by the broker")
            for event in self._core.buffer_updated(n):
                if isinstance(event, Ready | Reauthenticated) and event.session_lifetime_ms > 0:
                    lifetime = event.session_lifetime_ms / 1000 * REAUTH_FRACTION
                    self._reauth_at = time.monotonic() + lifetime
                if done(event):
                    return event

    def version(self, api_key: int) -> int:
        """The highest version of ``api_key`` that the broker and this client both support."""
        return self._core.version(api_key)

    def call(self, api_key: int, version: int, body: Any) -> Any:
        """Send one request at ``version`` and wait for its answer (blocking)."""
        if self._core.state is State.CLOSED:
            # An earlier failure left the protocol state unknown.
            raise ConnectionError(f"connection to {self.address[0]}:{self.address[1]} is broken")
        if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
            self._reauth_at = None
            if self._core.state is State.READY:
                self._core.reauthenticate()
                self._wait(lambda event: isinstance(event, Reauthenticated))
        sent = self._core.send(api_key, body, version)
        if not sent.expects_response:
            self._sock.sendall(self._core.data_to_send())
            return None
        response = self._wait(
            lambda event: (
                isinstance(event, Response) and event.correlation_id == sent.correlation_id
            )
        )
        return response.body

    def request(self, api_key: int, body: Any) -> tuple[Any, int]:
        """Send at the best common version; returns (response, version used)."""
        version = self.version(api_key)
        return self.call(api_key, version, body), version

    def close(self) -> None:
        """Close the socket."""
        self._core.close()
        self._sock.close()


class DataClient:
    """Metadata, offsets, fetch and idempotent produce against a Kafka-compatible cluster."""

    def __init__(
        self,
        bootstrap: str | Iterable[Address],
        *,
        client_id: str = "kbroker-data",
        timeout: float = DEFAULT_TIMEOUT,
        security: SecurityConfig = PLAINTEXT,
    ) -> None:
        self._bootstrap = parse_bootstrap(bootstrap)
        self._client_id = client_id
        self._timeout = timeout
        self._security = security
        ssl_context(security)  # bad TLS settings fail here, not at the first connection
        self._connections: dict[Address, Connection] = {}
        self._cluster = ClusterMetadata()
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
            existing = Connection(address, self._client_id, self._timeout, self._security)
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
        try:
            response = connection.call(ApiKey.METADATA, version, metadata_request(topics, version))
        except OSError:
            self._drop(connection.address)
            raise
        self._cluster.update(response)
        return topic_partitions(response, include_internal=topics is not None)

    def coordinator(self, key: str, key_type: int) -> Connection:
        """The coordinator of a group (key type 0) or transactional id (1), by
        FindCoordinator, asked again while it loads or moves until the client's timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            address = self._cluster.coordinator(key, key_type)
            if address is not None:
                try:
                    return self._connection(address)
                except OSError:
                    # Gone with its broker: ask where it went.
                    self._drop(address)
                    self.coordinator_failed(key, key_type, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                    if time.monotonic() > deadline:
                        raise
                    continue
            connection = self._any_connection()
            version = connection.version(ApiKey.FIND_COORDINATOR)
            response = connection.call(
                ApiKey.FIND_COORDINATOR, version, find_coordinator_request(key, key_type, version)
            )
            answer = find_coordinator_answer(response, version)
            if self._cluster.coordinator_found(key, key_type, answer):
                continue
            if answer.error not in COORDINATOR_ERRORS or time.monotonic() > deadline:
                raise KafkaError(answer.error, f"no coordinator for {key!r}")
            time.sleep(RETRY_BACKOFF_SECONDS)

    def coordinator_failed(self, key: str, key_type: int, error: int) -> bool:
        """A request to the coordinator of ``key`` failed with ``error``; True when sending
        it again is worth it (``coordinator()`` then finds it again where it moved)."""
        return self._cluster.coordinator_error(key, key_type, error)

    @property
    def timeout(self) -> float:
        """Seconds a request, with its retries, may take."""
        return self._timeout

    def _leader(self, tp: TopicPartition) -> Connection:
        address = self._cluster.leader_address(tp)
        if address is None:
            self.metadata([tp[0]])
            address = self._cluster.leader_address(tp)
        if address is None:
            raise _LeaderError(ErrorCode.LEADER_NOT_AVAILABLE, f"no leader for {tp[0]}-{tp[1]}")
        return self._connection(address)

    def _failed(self, tp: TopicPartition, error: int, what: str, **hint: Any) -> NoReturn:
        """Raise ``error`` for ``tp``, telling the metadata first (it may mean a new
        leader, KIP-951 ``hint`` and ``endpoints`` included)."""
        retriable = self._cluster.partition_error(tp, error, **hint)
        raise (_LeaderError if retriable else KafkaError)(ErrorCode(error), what)

    def _with_leader(self, tp: TopicPartition, attempt: Callable[[Connection], T]) -> T:
        """``attempt(connection)`` on the partition's leader, retried after leadership and
        connection errors until the client's timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            address: Address | None = None
            try:
                connection = self._leader(tp)
                address = connection.address
                return attempt(connection)
            except _LeaderError:
                if time.monotonic() > deadline:
                    raise
            except OSError:
                if address is not None:
                    self._drop(address)
                self._cluster.invalidate_leader(tp)
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
        timeout_ms = int(self._timeout * 1000)
        request = create_topics_request(topics, replication_factor, configs or {}, timeout_ms)
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
            request = delete_records_request(tp, before, int(self._timeout * 1000))
            response, _ = connection.request(ApiKey.DELETE_RECORDS, request)
            for topic in response.topics:
                for p in topic.partitions:
                    if p.error_code != ErrorCode.NONE:
                        self._failed(tp, p.error_code, f"delete records {tp[0]}-{tp[1]}")
                    return int(p.low_watermark)
            self._failed(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]}")

        return self._with_leader(tp, attempt)

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
        request = list_offsets_request([tp], timestamp, isolation_level)
        response, version = connection.request(ApiKey.LIST_OFFSETS, request)
        error, offset = list_offsets_results(response, version).get(
            tp, (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
        )
        if error != ErrorCode.NONE:
            self._failed(tp, error, f"list offsets {tp[0]}-{tp[1]}")
        return offset

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
        return self._with_leader(
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
        request = fetch_request(tp, offset, max_bytes, wait, isolation_level)
        response, _ = connection.request(ApiKey.FETCH, request)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code), f"fetch {tp[0]}-{tp[1]}")
        for topic in response.responses:
            for p in topic.partitions:
                if p.error_code != ErrorCode.NONE:
                    self._failed(tp, p.error_code, f"fetch {tp[0]}-{tp[1]} at offset {offset}")
                aborted = (
                    AbortedFilter((a.producer_id, a.first_offset) for a in p.aborted_transactions)
                    if isolation_level != READ_UNCOMMITTED and p.aborted_transactions
                    else None
                )
                records, next_offset = decode_fetched(p.records or b"", offset, aborted)
                return FetchResult(records, p.high_watermark, p.log_start_offset, next_offset)
        # An answer without the partition has nothing for it (Tansu answers max_wait_ms=0
        # that way): no records, its offsets unknown.
        return FetchResult([], -1, -1, offset)

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
        return self._with_leader(tp, lambda c: self._produce_one(c, tp, batch, transactional_id))

    def _produce_one(
        self,
        connection: Connection,
        tp: TopicPartition,
        batch: bytes,
        transactional_id: str | None,
    ) -> int:
        request = produce_request(tp, batch, int(self._timeout * 1000), transactional_id)
        response, _ = connection.request(ApiKey.PRODUCE, request)
        answer, base_offset = produce_answer(response, tp)
        if answer.error != ErrorCode.NONE:
            what = f"produce {tp[0]}-{tp[1]}: {answer.message}".rstrip(": ")
            self._failed(tp, answer.error, what, hint=answer.hint, endpoints=answer.endpoints)
        return base_offset
