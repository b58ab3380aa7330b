"""Python's share consumer (KIP-932): many consumers of one share group read the same
partitions cooperatively, each record handed to one of them at a time and acknowledged one
by one.

    async with ShareConsumer("localhost:9092", "my-group") as consumer:
        consumer.subscribe(["orders"])
        while True:
            for record in await consumer.poll(1.0):
                handle(record.value, record.delivery_count)

The asyncio shell over kbroker.client_core.share_membership (ShareGroupHeartbeat, in a
background task at the interval the coordinator gives) and kbroker.client_core.share (share
sessions, acquired records, acknowledgements); it keeps the connections, the time and the
metadata (topic ids to names, partition leaders). As Kafka's KafkaShareConsumer:

- ``poll`` first settles the last poll's records (implicit mode: accepted; explicit mode:
  every one must have been acknowledged), then hands out buffered records or sends a
  ShareFetch to each leader of the assigned partitions, carrying the acknowledgements for
  that broker's partitions, and returns at most ``max_poll_records`` records.
- ``acknowledge(record, type)`` (explicit mode) settles one record: ACCEPT, RELEASE (deliver
  it again, to anyone) or REJECT (never again).
- ``commit_sync`` sends the pending acknowledgements in ShareAcknowledge requests and waits
  for the answers, per partition None or the error; ``commit_async`` does the same in a task.
  The ``acknowledgement_commit_callback`` hears of every acknowledgement's outcome.
- ``close`` sends what was acknowledged, closes the share sessions (epoch -1: the brokers
  release what this member still holds, so others get it at once) and leaves the group
  (epoch -1). Records a poll delivered and nobody acknowledged are released, not accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping

from kbroker.client import KafkaClient, TopicPartition, parse_address
from kbroker.client_core.metadata import GROUP, LEADER_ERRORS
from kbroker.client_core.security import PLAINTEXT, SecurityConfig
from kbroker.client_core.share import (
    AcknowledgementMode,
    Acknowledgements,
    AcknowledgeType,
    AcquireMode,
    FetchConfig,
    IllegalStateError,
    ShareRecord,
    ShareSession,
    check_fatal,
    read_share_acknowledge,
    read_share_fetch,
    sessions_to_close,
)
from kbroker.client_core.share_membership import ShareMembership, SharePartitionId
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError

__all__ = [
    "AcknowledgeType",
    "AcknowledgementMode",
    "AcquireMode",
    "IllegalStateError",
    "ShareConsumer",
    "ShareRecord",
]

log = logging.getLogger(__name__)

RETRY_BACKOFF_SECONDS = 0.1
# Offsets by partition, and the error they met (None: stored).
CommitCallback = Callable[[dict[TopicPartition, set[int]], KafkaError | None], None]
AckResults = dict[TopicPartition, KafkaError | None]


class ShareConsumer:
    """A member of a share group (see the module docstring)."""

    def __init__(
        self,
        bootstrap: str | Iterable[str],
        group_id: str,
        *,
        acknowledgement_mode: AcknowledgementMode | str = AcknowledgementMode.IMPLICIT,
        max_poll_records: int = 500,
        acquire_mode: AcquireMode | str = AcquireMode.BATCH_OPTIMIZED,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52_428_800,
        client_id: str = "kbroker-share-consumer",
        security: SecurityConfig = PLAINTEXT,
        timeout: float = 30.0,
        acknowledgement_commit_callback: CommitCallback | None = None,
        client: KafkaClient | None = None,
    ) -> None:
        """``bootstrap``: "host:port[,host:port]" or several; ``client``: a client to use
        instead of one of its own (its owner closes it)."""
        if not group_id:
            raise ValueError("a share consumer needs a group id")
        servers = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
        addresses = [parse_address(s.strip()) for b in servers for s in b.split(",") if s]
        self._owns_client = client is None
        self._client = client or KafkaClient(
            addresses, client_id=client_id, timeout=timeout, security=security
        )
        self._timeout = timeout
        self._membership = ShareMembership(group_id)
        if isinstance(acquire_mode, str):
            acquire_mode = AcquireMode[acquire_mode.upper()]
        self._config = FetchConfig(
            max_wait_ms=fetch_max_wait_ms,
            max_bytes=fetch_max_bytes,
            max_records=max_poll_records,
            acquire_mode=acquire_mode,
        )
        self._acks = Acknowledgements(AcknowledgementMode(acknowledgement_mode))
        self._callback = acknowledgement_commit_callback
        self._sessions: dict[int, ShareSession] = {}
        self._node_locks: dict[int, asyncio.Lock] = {}
        self._buffer: deque[tuple[SharePartitionId, ShareRecord]] = deque()
        self._names: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}
        self._metadata_stale = True
        self._heartbeat: asyncio.Task[None] | None = None
        self._wake_heartbeat = asyncio.Event()
        self._assignment_changed = asyncio.Event()
        self._fatal: BaseException | None = None
        self._ack_tasks: set[asyncio.Task[AckResults]] = set()
        self._closed = False

    # --- properties ---------------------------------------------------------------------

    @property
    def group_id(self) -> str:
        return self._membership.group_id

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    @property
    def acknowledgement_mode(self) -> AcknowledgementMode:
        return self._acks.mode

    def subscription(self) -> set[str]:
        return set(self._membership.subscription)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group assigned this member, by name where known."""
        return {(self._names.get(t, str(t)), p) for t, p in self._membership.assignment}

    async def __aenter__(self) -> ShareConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- membership ---------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the group (in the background) with these topics, or change them."""
        self._ensure_open()
        topics = list(topics)
        if not topics or any(not t for t in topics):
            raise ValueError("subscribe to one or more topics, each named")
        self._membership.subscribe(topics, self._now_ms())
        self._metadata_stale = True
        if self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        self._wake_heartbeat.set()

    async def _heartbeat_loop(self) -> None:
        membership = self._membership
        while True:
            due = membership.due_ms
            delay = None if due is None else max(0.0, (due - self._now_ms()) / 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake_heartbeat.wait(), delay)
            self._wake_heartbeat.clear()
            if membership.due_ms is None or membership.due_ms > self._now_ms():
                continue
            version = membership.assignment_version
            try:
                coordinator = await self._client.coordinator(self.group_id)
                response, _ = await coordinator.request(
                    ApiKey.SHARE_GROUP_HEARTBEAT, membership.heartbeat_request()
                )
                error = membership.on_response(response, self._now_ms())
                if error != ErrorCode.NONE:
                    log.info("share group %s: heartbeat answered %s", self.group_id, error.name)
                    self._client.cluster.coordinator_error(self.group_id, GROUP, error)
            except KafkaError as exc:
                if exc.code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
                    membership.on_failure(self._now_ms())
                    continue
                self._fatal = exc
                self._assignment_changed.set()
                return
            except (OSError, TimeoutError) as exc:
                log.info("share group %s: heartbeat failed: %s", self.group_id, exc)
                membership.on_failure(self._now_ms())
                self._client.cluster.coordinator_error(
                    self.group_id, GROUP, ErrorCode.COORDINATOR_NOT_AVAILABLE
                )
            if membership.assignment_version != version:
                self._metadata_stale = True
                self._assignment_changed.set()

    # --- polling ------------------------------------------------------------------------

    async def poll(self, timeout: float) -> list[ShareRecord]:
        """Records acquired for this member, waiting up to ``timeout`` seconds for some."""
        self._ensure_open()
        self._raise_fatal()
        self._acks.before_poll()
        if not self._membership.subscription:
            raise IllegalStateError("Consumer is not subscribed to any topics.")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            if self._buffer:
                if self._acks.has_pending():
                    self._spawn_commit()
                return self._deliver()
            remaining = deadline - loop.time()
            if not self._membership.assignment:
                if remaining <= 0:
                    return []
                self._assignment_changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._assignment_changed.wait(), remaining)
                self._raise_fatal()
                continue
            answered = await self._fetch_round(max(0, int(remaining * 1000)))
            if self._buffer:
                continue
            if loop.time() >= deadline:
                return []
            if not answered:
                await asyncio.sleep(min(RETRY_BACKOFF_SECONDS, max(deadline - loop.time(), 0)))

    def _deliver(self) -> list[ShareRecord]:
        out: list[ShareRecord] = []
        while self._buffer and len(out) < self._config.max_records:
            key, record = self._buffer.popleft()
            self._acks.delivered(key, (record.offset,))
            out.append(record)
        return out

    async def _fetch_round(self, wait_ms: int) -> bool:
        """One ShareFetch to each broker leading assigned partitions; whether any answered
        without error (records or not)."""
        assignment = self._membership.assignment
        if self._metadata_stale or any(t not in self._names for t, _ in assignment):
            await self._refresh_metadata()
        by_node: dict[int, set[SharePartitionId]] = {}
        for key in assignment:
            name = self._names.get(key[0])
            leader = None if name is None else self._client.cluster.leader((name, key[1]))
            if leader is None:
                self._metadata_stale = True
                continue
            by_node.setdefault(leader.node_id, set()).add(key)
        for node in sessions_to_close(self._sessions, by_node, assignment):
            by_node[node] = set()
        config = FetchConfig(
            max_wait_ms=min(self._config.max_wait_ms, wait_ms),
            min_bytes=self._config.min_bytes,
            max_bytes=self._config.max_bytes,
            max_records=self._config.max_records,
            acquire_mode=self._config.acquire_mode,
        )
        answered = await asyncio.gather(
            *(self._fetch_from(node, keys, config) for node, keys in by_node.items())
        )
        return any(answered)

    async def _fetch_from(
        self, node: int, wanted: set[SharePartitionId], config: FetchConfig
    ) -> bool:
        session = self._session(node)
        async with self._node_lock(node):
            if not wanted:
                # No assigned partition left here: close the session, releasing what it holds.
                await self._acknowledge_at(node, self._acks.take(session.partitions), close=True)
                return False
            others = self._acks.take(session.partitions - wanted)
            if others:
                await self._acknowledge_at(node, others)
            acks = self._acks.take(wanted) if session.is_open else {}
            request = session.fetch_request(wanted, acks, config)
            try:
                connection = await self._client.node(node)
                response, _ = await connection.request(ApiKey.SHARE_FETCH, request)
            except (OSError, TimeoutError) as exc:
                log.info("share fetch from node %d failed: %s", node, exc)
                self._session_lost(session)
                self._completed(acks, KafkaError(ErrorCode.NETWORK_EXCEPTION, str(exc)))
                self._metadata_stale = True
                return False
            error = ErrorCode(response.error_code)
            session.on_response(error)
            if error != ErrorCode.NONE:
                check_fatal(error, response.error_message, "ShareFetch")
                if not session.is_open:
                    self._session_lost(session)
                self._completed(acks, KafkaError(error, response.error_message))
                return False
            answered = {p.key: p for p in read_share_fetch(response, self._names)}
            results: dict[SharePartitionId, KafkaError | None] = {}
            for key in acks:
                p = answered.get(key)
                results[key] = (
                    None
                    if p is None or p.ack_error == ErrorCode.NONE
                    else KafkaError(p.ack_error, p.ack_message)
                )
            self._report(acks, results)
            for key, p in answered.items():
                if p.error != ErrorCode.NONE:
                    check_fatal(p.error, p.message, "ShareFetch")
                    if p.error in LEADER_ERRORS or p.error == ErrorCode.UNKNOWN_TOPIC_ID:
                        self._metadata_stale = True
                    continue
                if p.gaps:
                    self._acks.gaps(key, p.gaps)
                self._buffer.extend((key, r) for r in p.records)
            return True

    def _session_lost(self, session: ShareSession) -> None:
        """The broker released what this member held in the session."""
        self._acks.forget(session.partitions)
        dropped = {key for key, _ in self._buffer if key in session.partitions}
        if dropped:
            self._buffer = deque(item for item in self._buffer if item[0] not in dropped)
        session.lost()

    async def _refresh_metadata(self) -> None:
        topics = sorted(set(self._membership.subscription) | set(self._ids))
        response = await self._client.metadata(topics)
        for topic in response.topics:
            if topic.error_code == ErrorCode.NONE and topic.name:
                self._names[topic.topic_id] = topic.name
                self._ids[topic.name] = topic.topic_id
        self._metadata_stale = False

    # --- acknowledging ------------------------------------------------------------------

    def acknowledge(
        self, record: ShareRecord, ack: AcknowledgeType | str = AcknowledgeType.ACCEPT
    ) -> None:
        """Settle a record the last poll delivered (explicit mode)."""
        self._ensure_open()
        if isinstance(ack, str):
            ack = AcknowledgeType[ack.upper()]
        topic_id = self._ids.get(record.topic)
        if topic_id is None:
            raise IllegalStateError("The record cannot be acknowledged.")
        self._acks.acknowledge((topic_id, record.partition), record.offset, ack)

    async def commit_sync(self, timeout: float | None = None) -> AckResults:
        """Send the pending acknowledgements and wait for their outcome, per partition."""
        self._ensure_open()
        self._acks.accept_all()
        async with asyncio.timeout(self._timeout if timeout is None else timeout):
            return await self._commit(self._acks.take())

    def commit_async(self) -> asyncio.Task[AckResults]:
        """Send the pending acknowledgements; the task gives their outcome."""
        self._ensure_open()
        self._acks.accept_all()
        return self._spawn_commit()

    def _spawn_commit(self) -> asyncio.Task[AckResults]:
        task = asyncio.get_running_loop().create_task(self._commit(self._acks.take()))
        self._ack_tasks.add(task)
        task.add_done_callback(self._ack_tasks.discard)
        return task

    async def _commit(self, acks: Mapping[SharePartitionId, dict[int, int]]) -> AckResults:
        by_node: dict[int, dict[SharePartitionId, dict[int, int]]] = {}
        orphans: dict[SharePartitionId, dict[int, int]] = {}
        for key, offsets in acks.items():
            node = next((n for n, s in self._sessions.items() if key in s.partitions), None)
            if node is None:
                orphans[key] = offsets
            else:
                by_node.setdefault(node, {})[key] = offsets
        results: dict[SharePartitionId, KafkaError | None] = {}
        if orphans:
            lost = KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND, "the share session ended")
            results.update(self._completed(orphans, lost))
        for node, node_acks in by_node.items():
            async with self._node_lock(node):
                results.update(await self._acknowledge_at(node, node_acks))
        return {self._tp(key): error for key, error in results.items()}

    async def _acknowledge_at(
        self, node: int, acks: Mapping[SharePartitionId, dict[int, int]], *, close: bool = False
    ) -> dict[SharePartitionId, KafkaError | None]:
        """A ShareAcknowledge in the node's session (the caller holds its lock)."""
        session = self._session(node)
        if not session.is_open:
            lost = KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND, "the share session ended")
            return self._completed(acks, lost)
        if not acks and not close:
            return {}
        request = session.acknowledge_request(acks, close=close)
        try:
            connection = await self._client.node(node)
            response, _ = await connection.request(ApiKey.SHARE_ACKNOWLEDGE, request)
        except (OSError, TimeoutError) as exc:
            self._session_lost(session)
            return self._completed(acks, KafkaError(ErrorCode.NETWORK_EXCEPTION, str(exc)))
        error = ErrorCode(response.error_code)
        if close:
            session.lost()
        else:
            session.on_response(error)
        if error != ErrorCode.NONE:
            return self._completed(acks, KafkaError(error, response.error_message))
        answered = read_share_acknowledge(response)
        results: dict[SharePartitionId, KafkaError | None] = {}
        for key in acks:
            code, message = answered.get(key, (ErrorCode.NONE, None))
            results[key] = None if code == ErrorCode.NONE else KafkaError(code, message)
        self._report(acks, results)
        return results

    def _completed(
        self, acks: Mapping[SharePartitionId, dict[int, int]], error: KafkaError
    ) -> dict[SharePartitionId, KafkaError | None]:
        results: dict[SharePartitionId, KafkaError | None] = dict.fromkeys(acks, error)
        self._report(acks, results)
        return results

    def _report(
        self,
        acks: Mapping[SharePartitionId, dict[int, int]],
        results: Mapping[SharePartitionId, KafkaError | None],
    ) -> None:
        """Tell the acknowledgement commit callback, once per outcome."""
        if self._callback is None or not acks:
            return
        by_error: dict[int, tuple[KafkaError | None, dict[TopicPartition, set[int]]]] = {}
        for key, offsets in acks.items():
            error = results.get(key)
            slot = by_error.setdefault(id(error), (error, {}))
            slot[1].setdefault(self._tp(key), set()).update(offsets)
        for error, offsets in by_error.values():
            try:
                self._callback(offsets, error)
            except Exception:
                log.exception("the acknowledgement commit callback failed")

    # --- closing ------------------------------------------------------------------------

    async def close(self, timeout: float | None = None) -> None:
        """Send what was acknowledged, close the share sessions and leave the group."""
        if self._closed:
            return
        self._closed = True
        try:
            async with asyncio.timeout(self._timeout if timeout is None else timeout):
                await self._close()
        except (TimeoutError, OSError, KafkaError) as exc:
            log.warning("share consumer of %s: close did not finish: %s", self.group_id, exc)
        finally:
            await self._stop_heartbeat()
            if self._owns_client:
                await self._client.close()

    async def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None and not self._heartbeat.done():
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat

    async def _close(self) -> None:
        if self._ack_tasks:
            await asyncio.gather(*self._ack_tasks, return_exceptions=True)
        self._buffer.clear()
        for node, session in list(self._sessions.items()):
            if session.is_open:
                async with self._node_lock(node):
                    await self._acknowledge_at(
                        node, self._acks.take(session.partitions), close=True
                    )
        if self._heartbeat is not None:
            await self._stop_heartbeat()
            if self._membership.epoch > 0 and self._fatal is None:
                coordinator = await self._client.coordinator(self.group_id)
                await coordinator.request(
                    ApiKey.SHARE_GROUP_HEARTBEAT, self._membership.leave_request()
                )
            self._membership.left()

    # --- helpers ------------------------------------------------------------------------

    def _session(self, node: int) -> ShareSession:
        session = self._sessions.get(node)
        if session is None:
            session = self._sessions[node] = ShareSession(self.group_id, self.member_id)
        return session

    def _node_lock(self, node: int) -> asyncio.Lock:
        lock = self._node_locks.get(node)
        if lock is None:
            lock = self._node_locks[node] = asyncio.Lock()
        return lock

    def _tp(self, key: SharePartitionId) -> TopicPartition:
        return self._names.get(key[0], str(key[0])), key[1]

    def _now_ms(self) -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal
