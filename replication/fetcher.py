"""A follower's fetcher: one task per leader broker, fetching all partitions led there.

Each round it first truncates the partitions that just started following (or lost their
place) to the divergence point learned from the leader through OffsetForLeaderEpoch
(replication/epochs.py), then sends one Fetch (replica id = this broker, current leader
epoch per partition, KIP-320) for every partition it follows there, appends what comes back
unchanged and takes the leader's high watermark. The leader long-polls the fetch
(replica.fetch.wait.max.ms), so an idle follower sends about two requests a second.

OFFSET_OUT_OF_RANGE means one of two things: the follower's log ends before the leader's
log start (it was away while retention or DeleteRecords removed what it misses), and it
starts over, empty, at the leader's log start; or its log runs past the leader's, and it
truncates to the divergence point again.

Connection errors and leader-side errors (fenced or unknown epoch, not leader) back off for
replica.fetch.backoff.ms and retry; the partition's new role arrives through the metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kbroker.client import BrokerConnection
from kbroker.client_core.security import PLAINTEXT, SecurityConfig
from kbroker.partition import Partition
from replication.epochs import truncation_offset
from wire.api_keys import ApiKey
from wire.errors import DecodeError, ErrorCode, KafkaError
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from wire.messages.fetch_response import FetchResponse
from wire.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from wire.messages.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse
from wire.records.batch import iter_batches

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
# Fetch v12 is the last version naming topics (v13 uses ids) with replica_id in the body.
FETCH_VERSION = 12
# OffsetForLeaderEpoch v3+ carries the replica id.
OFFSET_FOR_EPOCH_VERSION = 4
INT32_MAX = 2**31 - 1
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
NETWORK_ERRORS = (OSError, TimeoutError, ConnectionError, asyncio.IncompleteReadError, DecodeError)


@dataclass(frozen=True, slots=True)
class FetchSettings:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partition_max_bytes: int
    backoff_s: float
    socket_timeout_s: float
    # How to reach the leaders: the inter-broker listener's protocol and credentials.
    security: SecurityConfig = PLAINTEXT


class FollowerHost(Protocol):
    """What a fetcher needs from the replica manager."""

    broker_id: int

    def replica(self, key: TopicPartition) -> Partition | None: ...

    def address_of(self, broker_id: int) -> tuple[str, int] | None: ...

    def storage_failed(self, key: TopicPartition, exc: OSError) -> None: ...


def complete_batches(records: memoryview | bytes | None) -> bytes:
    """The whole batches at the start of ``records`` (a response may end in a partial one)."""
    if not records:
        return b""
    end = 0
    for pos, header in iter_batches(records):
        end = pos + header.size
    return bytes(records[:end])


class LeaderFetcher:
    """Fetches the partitions this broker follows from one leader."""

    def __init__(self, host: FollowerHost, leader_id: int, settings: FetchSettings) -> None:
        self._host = host
        self.leader_id = leader_id
        self._settings = settings
        self._keys: set[TopicPartition] = set()
        self._needs_truncation: set[TopicPartition] = set()
        self._wake = asyncio.Event()
        self._connection: BrokerConnection | None = None
        self._task: asyncio.Task[None] | None = None
        # The incremental fetch session with the leader (KIP-227): its id (0: none), the
        # epoch of the next request, and the partitions as the leader holds them.
        self._session_id = 0
        self._session_epoch = 0
        self._session_sent: dict[TopicPartition, FetchPartition] = {}

    @property
    def keys(self) -> set[TopicPartition]:
        return set(self._keys)

    def add(self, key: TopicPartition) -> None:
        """Follow ``key`` from this leader; it is truncated before its first fetch."""
        self._keys.add(key)
        self._needs_truncation.add(key)
        self._wake.set()

    def remove(self, key: TopicPartition) -> None:
        self._keys.discard(key)
        self._needs_truncation.discard(key)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._disconnect()

    def _reset_session(self) -> None:
        """Start over with a full fetch that asks for a new session."""
        self._session_id = 0
        self._session_epoch = 0
        self._session_sent = {}

    async def _disconnect(self) -> None:
        self._reset_session()
        if self._connection is not None:
            connection, self._connection = self._connection, None
            with contextlib.suppress(Exception):
                await connection.close()

    async def _connect(self) -> BrokerConnection | None:
        if self._connection is not None:
            return self._connection
        address = self._host.address_of(self.leader_id)
        if address is None:
            return None
        self._connection = await BrokerConnection.open(
            address,
            f"kbroker-replica-{self._host.broker_id}",
            self._settings.socket_timeout_s,
            security=self._settings.security,
        )
        return self._connection

    async def _run(self) -> None:
        while True:
            if not self._keys:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                connection = await self._connect()
                if connection is None:
                    await asyncio.sleep(self._settings.backoff_s)
                    continue
                if self._needs_truncation:
                    await self._truncate(connection)
                if not await self._fetch(connection):
                    await asyncio.sleep(self._settings.backoff_s)
            except (*NETWORK_ERRORS, KafkaError) as exc:
                log.info("fetch from broker %d failed: %s", self.leader_id, exc)
                await self._disconnect()
                await asyncio.sleep(self._settings.backoff_s)

    def _following(self, key: TopicPartition) -> Partition | None:
        partition = self._host.replica(key)
        if partition is None or partition.is_leader or partition.leader_id != self.leader_id:
            return None
        return partition

    async def _truncate(self, connection: BrokerConnection) -> None:
        asked: dict[TopicPartition, tuple[Partition, int, int]] = {}
        topics: dict[str, list[OffsetForLeaderPartition]] = {}
        for key in sorted(self._needs_truncation):
            partition = self._following(key)
            if partition is None:
                continue
            epoch = partition.log.latest_epoch()
            if epoch < 0:
                # No epoch history: keep only what is known to be committed.
                partition.truncate_to(partition.high_watermark)
                self._needs_truncation.discard(key)
                continue
            asked[key] = (partition, epoch, partition.leader_epoch)
            topics.setdefault(key[0], []).append(
                OffsetForLeaderPartition(
                    partition=key[1],
                    current_leader_epoch=partition.leader_epoch,
                    leader_epoch=epoch,
                )
            )
        if not topics:
            return
        request = OffsetForLeaderEpochRequest(
            replica_id=self._host.broker_id,
            topics=[OffsetForLeaderTopic(topic=t, partitions=p) for t, p in topics.items()],
        )
        response, _ = await connection.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, request, OFFSET_FOR_EPOCH_VERSION
        )
        assert isinstance(response, OffsetForLeaderEpochResponse)
        for topic in response.topics:
            for answer in topic.partitions:
                key = (topic.topic, answer.partition)
                entry = asked.get(key)
                if entry is None or answer.error_code != ErrorCode.NONE:
                    continue
                partition, requested, leader_epoch = entry
                if partition.leader_epoch != leader_epoch or self._following(key) is None:
                    continue
                offset = truncation_offset(
                    requested_epoch=requested,
                    leader_epoch=answer.leader_epoch,
                    leader_end_offset=answer.end_offset,
                    local_end_for=partition.log.end_offset_for_epoch,
                    log_end_offset=partition.log.log_end_offset,
                    high_watermark=partition.high_watermark,
                )
                if offset < partition.log.log_end_offset:
                    log.info(
                        "truncating %s-%d from %d to %d (leader %d, epoch %d)",
                        key[0],
                        key[1],
                        partition.log.log_end_offset,
                        offset,
                        self.leader_id,
                        leader_epoch,
                    )
                partition.truncate_to(offset)
                self._needs_truncation.discard(key)

    async def _fetch(self, connection: BrokerConnection) -> bool:
        """One fetch round; False when nothing could be fetched (back off)."""
        sent: dict[TopicPartition, tuple[Partition, int]] = {}
        wanted: dict[TopicPartition, FetchPartition] = {}
        for key in sorted(self._keys - self._needs_truncation):
            partition = self._following(key)
            if partition is None:
                continue
            sent[key] = (partition, partition.leader_epoch)
            wanted[key] = FetchPartition(
                partition=key[1],
                current_leader_epoch=partition.leader_epoch,
                fetch_offset=partition.log.log_end_offset,
                log_start_offset=partition.log.log_start_offset,
                partition_max_bytes=self._settings.partition_max_bytes,
            )
        if not wanted:
            return False
        response = await self._send_fetch(connection, wanted)
        if response.error_code in SESSION_ERRORS:
            # The leader lost or disowns our session: fetch in full at once.
            self._reset_session()
            return True
        ok = True
        for topic in response.responses:
            for data in topic.partitions:
                key = (topic.topic, data.partition_index)
                entry = sent.get(key)
                if entry is None:
                    continue
                partition, epoch = entry
                if partition.leader_epoch != epoch or self._following(key) is None:
                    continue
                if data.error_code == ErrorCode.NONE:
                    try:
                        partition.append_as_follower(
                            complete_batches(data.records), data.high_watermark
                        )
                    except OSError as exc:
                        # Our log directory refused the write, not the network: the
                        # replica goes offline (KIP-112) rather than being fetched again.
                        self._host.storage_failed(key, exc)
                elif data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._out_of_range(key, partition, data.log_start_offset)
                else:
                    ok = False
        return ok

    async def _send_fetch(
        self, connection: BrokerConnection, wanted: dict[TopicPartition, FetchPartition]
    ) -> FetchResponse:
        """A Fetch in the session (KIP-227): in full to start one, then only the partitions
        whose fetch settings changed, and those to forget."""
        incremental = self._session_id != 0
        if incremental:
            changed = {k: p for k, p in wanted.items() if self._session_sent.get(k) != p}
            gone = [k for k in self._session_sent if k not in wanted]
        else:
            changed, gone = wanted, []
        topics: dict[str, list[FetchPartition]] = {}
        for key, fetch in changed.items():
            topics.setdefault(key[0], []).append(fetch)
        forgotten: dict[str, list[int]] = {}
        for topic, index in gone:
            forgotten.setdefault(topic, []).append(index)
        request = FetchRequest(
            replica_id=self._host.broker_id,
            max_wait_ms=self._settings.max_wait_ms,
            min_bytes=self._settings.min_bytes,
            max_bytes=self._settings.max_bytes,
            session_id=self._session_id,
            session_epoch=self._session_epoch,
            topics=[FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
            forgotten_topics_data=[
                ForgottenTopic(topic=t, partitions=p) for t, p in forgotten.items()
            ],
        )
        response, _ = await connection.request(ApiKey.FETCH, request, FETCH_VERSION)
        assert isinstance(response, FetchResponse)
        if response.error_code == ErrorCode.NONE:
            if incremental or response.session_id != 0:
                self._session_id = response.session_id
                self._session_sent = dict(wanted)
                # Epochs wrap to 1, never to 0 (KIP-227).
                self._session_epoch = (
                    1 if self._session_epoch >= INT32_MAX else (self._session_epoch + 1)
                )
        return response

    def _out_of_range(self, key: TopicPartition, partition: Partition, leader_start: int) -> None:
        """Our fetch offset is outside the leader's log. Behind its log start (retention or
        DeleteRecords removed what we miss): start over there. Otherwise our log runs past
        the leader's end: find the divergence point again (KIP-101)."""
        if leader_start > partition.log.log_end_offset:
            log.info(
                "%s-%d ends at %d, before leader %d's log start %d: starting over there",
                key[0],
                key[1],
                partition.log.log_end_offset,
                self.leader_id,
                leader_start,
            )
            partition.truncate_fully_and_start_at(leader_start)
        else:
            self._needs_truncation.add(key)


def make_settings(
    get: Callable[[str], object], security: SecurityConfig = PLAINTEXT
) -> FetchSettings:
    """Fetch settings from the broker's replica.* properties."""

    def num(name: str) -> int:
        value = get(name)
        assert isinstance(value, int)
        return value

    return FetchSettings(
        max_wait_ms=num("replica.fetch.wait.max.ms"),
        min_bytes=num("replica.fetch.min.bytes"),
        max_bytes=num("replica.fetch.response.max.bytes"),
        partition_max_bytes=num("replica.fetch.max.bytes"),
        backoff_s=num("replica.fetch.backoff.ms") / 1000,
        socket_timeout_s=num("replica.socket.timeout.ms") / 1000,
        security=security,
    )
