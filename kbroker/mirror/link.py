"""The fetchers of one mirror topic on this broker: an async shell over MirrorPartitionCore.

One task per mirror topic follows the partitions of it this broker leads. Each round it
refreshes the source's metadata when a partition asks for it (first round, leader moved,
connection failed) or metadata.max.age.ms passed (the leader of the mirror's partition 0
then adds the partitions the source added and takes the copied configs the source changed,
kbroker/mirror/topic_configs.py), checks the partitions that need it against
the source (OffsetForLeaderEpoch with the epoch of our last batch,
kbroker/mirror/partition_core.py), then sends one Fetch to
each source leader for the partitions it leads there, concurrently. It fetches as a consumer
(replica id -1, READ_UNCOMMITTED), so it sees the source's records up to its high watermark,
transactional records of aborted transactions and control batches included, and appends the
batches unchanged through the follower's append path (offsets, producer ids, epochs kept):
the local log is the source's, offset for offset. The source long-polls the fetch
(replica.fetch.wait.max.ms), as it does for the broker's followers.

With ``kbroker.mirror.group.filter`` set, a second task copies the committed offsets of the
source's matching consumer groups for the partitions led here (kbroker/mirror/group_offsets.py).

Before appending, the shell asks the host again whether it still leads the partition and the
topic is still active: promote (and a lost leadership) take effect between two appends, both
running on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kbroker.client import KafkaClient, parse_address
from kbroker.mirror.group_offsets import chosen_groups, offsets_to_copy
from kbroker.mirror.partition_core import (
    Backoff,
    Continue,
    Decision,
    MirrorPartitionCore,
    MirrorState,
    StartOver,
    Truncate,
    check_divergence,
)
from kbroker.mirror.throttle import LinkThrottle
from kbroker.mirror.topic_configs import COPIED_CONFIGS, MirrorSpec
from kbroker.partition import Partition
from replication.fetcher import NETWORK_ERRORS, FetchSettings, complete_batches
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from wire.messages.describe_configs_response import DescribeConfigsResponse
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.fetch_response import FetchResponse, PartitionData
from wire.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from wire.messages.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse
from wire.records.batch import iter_batches, read_header

log = logging.getLogger(__name__)

# Fetch v12: the last version naming topics (v13+ use topic ids, which differ between clusters).
FETCH_VERSION = 12
OFFSET_FOR_EPOCH_VERSION = 4
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0
# Errors after which the source's leader for the partition may have moved.
LEADER_MOVED = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)
DEFAULT_METADATA_MAX_AGE_MS = 300_000
# DescribeConfigs: the TOPIC resource type, and the source of a topic's own override.
TOPIC_RESOURCE = 2
TOPIC_OVERRIDE = 1
# How long an idle round waits before looking again (a wake-up comes sooner).
IDLE_SECONDS = 1.0


class MirrorHost(Protocol):
    broker_id: int

    def leading(self, topic: str, index: int) -> Partition | None:
        """The local partition when this broker leads it and the topic mirrors actively."""
        ...

    def storage_failed(self, partition: Partition, exc: OSError) -> None: ...

    def local_client(self, client_id: str) -> KafkaClient:
        """A client of this broker's own cluster (its inter-broker listener)."""
        ...

    async def follow_source_topic(
        self, topic: str, partitions: int, overrides: Mapping[str, str] | None
    ) -> None:
        """The source topic has ``partitions`` partitions and these config ``overrides``
        (None: unknown): add the partitions the mirror lacks, take the copied configs."""
        ...


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    index: int
    state: str
    log_end_offset: int
    source_high_watermark: int
    lag: int
    lag_ms: float
    last_error: str
    # Since this broker began following the partition (leadership, restart).
    copied_offsets: int
    copied_bytes: int


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def batches_from(records: memoryview | bytes | None, offset: int) -> bytes:
    """The whole batches of a fetch answer that end at or after ``offset`` (an answer starts
    with the batch holding the fetch offset)."""
    data = complete_batches(records)
    for pos, header in iter_batches(data):
        if header.next_offset > offset:
            return data[pos:]
    return b""


def last_batch_epoch(partition: Partition) -> int | None:
    """The partition leader epoch of the local log's last batch (the source's epoch, kept
    with the batch); None for a log without records."""
    plog = partition.log
    end = plog.log_end_offset
    if end <= plog.log_start_offset:
        return None
    found = plog.read_with_end(end - 1, 1, max_offset=end, min_one_batch=True)
    if found is None:
        return None
    return read_header(found[0].read()).partition_leader_epoch


class MirrorTopic:
    """Follows one source topic into the local partitions of the mirror topic led here."""

    def __init__(
        self,
        host: MirrorHost,
        topic: str,
        spec: MirrorSpec,
        settings: FetchSettings,
        backoff: Backoff,
        throttle: LinkThrottle,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._host = host
        self.topic = topic
        self.spec = spec
        self._settings = settings
        self._backoff = backoff
        # The link's fetch rate cap on this broker (kbroker/mirror/throttle.py).
        self._throttle = throttle
        self._clock = clock
        self._cores: dict[int, MirrorPartitionCore] = {}
        self._paused = False
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # Partition -> (offsets, bytes) appended, for the metrics.
        self._copied: dict[int, tuple[int, int]] = {}
        # The source's metadata is refreshed this often even without errors, to learn of
        # new partitions (the client property metadata.max.age.ms, Kafka's default 5 min).
        self._metadata_max_age_ms = int(
            spec.client_props.get("metadata.max.age.ms", DEFAULT_METADATA_MAX_AGE_MS)
        )
        self._metadata_due_ms = 0.0
        self._client = self._new_client()

    def _new_client(self) -> KafkaClient:
        return KafkaClient(
            [parse_address(a) for a in self.spec.bootstrap.split(",")],
            client_id=f"kbroker-mirror-{self._host.broker_id}-{self.spec.link}",
            timeout=self._settings.socket_timeout_s,
            security=self.spec.security(),
        )

    def _now_ms(self) -> float:
        return self._clock() * 1000

    # Control ---------------------------------------------------------------------------

    def set_partitions(self, indexes: Iterable[int]) -> None:
        """The partitions of the topic this broker leads now."""
        wanted = set(indexes)
        now = self._now_ms()
        for index in list(self._cores):
            if index not in wanted:
                del self._cores[index]
        for index in wanted - self._cores.keys():
            partition = self._host.leading(self.topic, index)
            end = 0 if partition is None else partition.log.log_end_offset
            core = MirrorPartitionCore(self._backoff, now, log_end_offset=end)
            if self._paused:
                core.pause()
            self._cores[index] = core
            self._wake.set()

    def set_paused(self, paused: bool) -> None:
        if paused == self._paused:
            return
        self._paused = paused
        now = self._now_ms()
        for core in self._cores.values():
            if paused:
                core.pause()
            else:
                core.resume(now)
        self._wake.set()

    def statuses(self) -> list[PartitionStatus]:
        now = self._now_ms()
        return [
            PartitionStatus(
                index,
                core.state.value,
                core.log_end_offset,
                core.source_high_watermark,
                core.lag,
                core.lag_ms(now),
                core.last_error,
                *self._copied.get(index, (0, 0)),
            )
            for index, core in sorted(self._cores.items())
        ]

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._run()))
        if self.spec.group_filter is not None:
            self._tasks.append(loop.create_task(self._copy_group_offsets(self.spec.group_filter)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._client.close()

    # Rounds ----------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                sent = await self._round()
            except (*NETWORK_ERRORS, KafkaError) as exc:
                self._failed(self._cores, str(exc) or type(exc).__name__, leader_moved=True)
                sent = False
            except Exception as exc:
                # A bug must not stop the mirror for good: log it, back off and retry.
                log.exception("mirror %s: round failed", self.topic)
                self._failed(self._cores, repr(exc), leader_moved=True)
                sent = False
            if not sent:
                await self._idle()

    async def _idle(self) -> None:
        now = self._now_ms()
        waiting = [
            c.retry_at_ms for c in self._cores.values() if c.state is MirrorState.BACKING_OFF
        ]
        throttled = [self._throttle.delay(self._clock())] if self._throttled() else []
        delay = min([IDLE_SECONDS, *((t - now) / 1000 for t in waiting), *throttled])
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(delay, 0.001)):
                await self._wake.wait()

    def _throttled(self) -> bool:
        """Some partition would fetch but the link's rate cap holds it back."""
        now = self._now_ms()
        return self._throttle.delay(self._clock()) > 0 and any(
            c.wants_fetch(now) for c in self._cores.values()
        )

    def _failed(self, cores: Iterable[int], error: str, *, leader_moved: bool) -> None:
        now = self._now_ms()
        for index in list(cores):
            core = self._cores.get(index)
            if core is not None:
                core.on_error(error, now, leader_moved=leader_moved)

    async def _round(self) -> bool:
        """One round; False when nothing was sent (wait for a retry time or a wake-up)."""
        now = self._now_ms()
        checks = [i for i, c in self._cores.items() if c.wants_check(now)]
        fetches = [i for i, c in self._cores.items() if c.wants_fetch(now)]
        if fetches and self._throttle.delay(self._clock()) > 0:
            fetches = []
        if not checks and not fetches:
            return False
        if now >= self._metadata_due_ms or any(
            self._cores[i].needs_metadata for i in (*checks, *fetches)
        ):
            found = await self._client.partitions([self.spec.source_topic])
            self._metadata_due_ms = now + self._metadata_max_age_ms
            for core in self._cores.values():
                core.on_metadata()
            count = len(found.get(self.spec.source_topic, []))
            if count and 0 in self._cores:
                # The leader of partition 0 keeps the topic like the source's.
                await self._host.follow_source_topic(
                    self.topic, count, await self._source_overrides()
                )
        by_leader: dict[int, tuple[list[int], list[int]]] = {}
        for kind, indexes in ((0, checks), (1, fetches)):
            for index in indexes:
                leader = self._client.cluster.leader((self.spec.source_topic, index))
                if leader is None:
                    self._failed([index], "no leader at the source", leader_moved=True)
                    continue
                by_leader.setdefault(leader.node_id, ([], []))[kind].append(index)
        if not by_leader:
            return False
        await asyncio.gather(*(self._with_leader(node, c, f) for node, (c, f) in by_leader.items()))
        return True

    async def _with_leader(self, node_id: int, checks: list[int], fetches: list[int]) -> None:
        try:
            connection = await self._client.node(node_id)
            epochs = self._epoch_request(checks)
            if epochs is not None:
                response, _ = await connection.request(
                    ApiKey.OFFSET_FOR_LEADER_EPOCH, epochs, OFFSET_FOR_EPOCH_VERSION
                )
                assert isinstance(response, OffsetForLeaderEpochResponse)
                self._on_epochs(response)
            if fetches:
                request = self._fetch_request(fetches)
                if request is not None:
                    response, _ = await connection.request(ApiKey.FETCH, request, FETCH_VERSION)
                    assert isinstance(response, FetchResponse)
                    self._on_fetch(response)
        except (*NETWORK_ERRORS, KafkaError) as exc:
            log.info(
                "mirror %s: source broker %d failed: %s", self.topic, node_id, str(exc) or repr(exc)
            )
            self._failed([*checks, *fetches], str(exc) or type(exc).__name__, leader_moved=True)

    async def _source_overrides(self) -> dict[str, str] | None:
        """The copied configs the source topic sets (DescribeConfigs); None when the source
        does not tell (refused, or an error): the mirror keeps its own then."""
        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsResource(
                    resource_type=TOPIC_RESOURCE,
                    resource_name=self.spec.source_topic,
                    configuration_keys=list(COPIED_CONFIGS),
                )
            ]
        )
        try:
            connection = await self._client.any_connection()
            response, version = await connection.request(ApiKey.DESCRIBE_CONFIGS, request)
        except (*NETWORK_ERRORS, KafkaError) as exc:
            log.info("mirror %s: source configs not read: %s", self.topic, exc)
            return None
        assert isinstance(response, DescribeConfigsResponse)
        result = response.results[0]
        if result.error_code != ErrorCode.NONE:
            log.info(
                "mirror %s: source configs not read: %s",
                self.topic,
                error_name(result.error_code),
            )
            return None
        return {
            c.name: c.value
            for c in result.configs
            if c.value is not None
            and (c.config_source == TOPIC_OVERRIDE if version >= 1 else not c.is_default)
        }

    # Consumer group offsets ------------------------------------------------------------

    async def _copy_group_offsets(self, pattern: str) -> None:
        """Every group.sync.ms, copy the committed offsets of the source's groups matching
        ``pattern`` for the partitions led here (kbroker/mirror/group_offsets.py)."""
        copied: dict[str, dict[int, int]] = {}
        source = self._new_client()
        local = self._host.local_client(f"kbroker-mirror-{self._host.broker_id}-groups")
        try:
            while True:
                await asyncio.sleep(self.spec.group_sync_ms / 1000)
                if self._paused:
                    continue
                try:
                    await self._copy_once(source, local, pattern, copied)
                except (*NETWORK_ERRORS, KafkaError) as exc:
                    log.info("mirror %s: group offsets not copied: %s", self.topic, exc)
        finally:
            await source.close()
            await local.close()

    async def _copy_once(
        self,
        source: KafkaClient,
        local: KafkaClient,
        pattern: str,
        copied: dict[str, dict[int, int]],
    ) -> None:
        high_watermarks = {
            index: partition.high_watermark
            for index in self._cores
            if (partition := self._host.leading(self.topic, index)) is not None
        }
        if not high_watermarks:
            return
        groups = chosen_groups([g for g, _, _ in await source.list_groups()], pattern)
        for group in groups:
            wanted = offsets_to_copy(
                await source.committed(group),
                source_topic=self.spec.source_topic,
                topic=self.topic,
                high_watermarks=high_watermarks,
                copied=copied.get(group, {}),
            )
            if not wanted:
                continue
            errors = await local.commit(group, wanted)
            done = copied.setdefault(group, {})
            for (_, index), (offset, _) in wanted.items():
                if errors.get((self.topic, index)) == ErrorCode.NONE:
                    done[index] = offset

    # Divergence checks -----------------------------------------------------------------

    def _epoch_request(self, indexes: list[int]) -> OffsetForLeaderEpochRequest | None:
        asked: list[OffsetForLeaderPartition] = []
        now = self._now_ms()
        for index in indexes:
            partition = self._host.leading(self.topic, index)
            if partition is None:
                continue
            epoch = last_batch_epoch(partition)
            if epoch is None:
                self._cores[index].on_checked(Continue(), now)
                continue
            asked.append(OffsetForLeaderPartition(partition=index, leader_epoch=epoch))
        if not asked:
            return None
        return OffsetForLeaderEpochRequest(
            replica_id=CONSUMER_REPLICA_ID,
            topics=[OffsetForLeaderTopic(topic=self.spec.source_topic, partitions=asked)],
        )

    def _on_epochs(self, response: OffsetForLeaderEpochResponse) -> None:
        now = self._now_ms()
        for topic in response.topics:
            for answer in topic.partitions:
                core = self._cores.get(answer.partition)
                partition = self._host.leading(self.topic, answer.partition)
                if core is None or partition is None:
                    continue
                if answer.error_code != ErrorCode.NONE:
                    core.on_error(
                        error_name(answer.error_code),
                        now,
                        leader_moved=answer.error_code in LEADER_MOVED,
                    )
                    continue
                requested = last_batch_epoch(partition)
                decision: Decision = (
                    Continue()
                    if requested is None
                    else check_divergence(
                        requested_epoch=requested,
                        source_epoch=answer.leader_epoch,
                        source_end_offset=answer.end_offset,
                        log_end_offset=partition.log.log_end_offset,
                    )
                )
                if isinstance(decision, Truncate):
                    log.warning(
                        "mirror %s-%d: the source's log diverged from ours at %d: truncating "
                        "from %d",
                        self.topic,
                        answer.partition,
                        decision.offset,
                        partition.log.log_end_offset,
                    )
                    partition.truncate_mirror_to(decision.offset)
                elif not isinstance(decision, Continue):
                    log.error("mirror %s-%d stopped: %s", self.topic, answer.partition, decision)
                core.on_checked(decision, now)
                core.log_end_offset = partition.log.log_end_offset

    # Fetches ---------------------------------------------------------------------------

    def _fetch_request(self, indexes: list[int]) -> FetchRequest | None:
        wanted: list[FetchPartition] = []
        max_bytes = self._throttle.fetch_max_bytes(self._settings.max_bytes)
        for index in indexes:
            partition = self._host.leading(self.topic, index)
            if partition is None:
                continue
            wanted.append(
                FetchPartition(
                    partition=index,
                    fetch_offset=partition.log.log_end_offset,
                    log_start_offset=-1,
                    partition_max_bytes=min(self._settings.partition_max_bytes, max_bytes),
                )
            )
        if not wanted:
            return None
        return FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            max_wait_ms=self._settings.max_wait_ms,
            min_bytes=self._settings.min_bytes,
            max_bytes=max_bytes,
            isolation_level=READ_UNCOMMITTED,
            # No fetch session (KIP-227): every request names its partitions.
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=self.spec.source_topic, partitions=wanted)],
        )

    def _on_fetch(self, response: FetchResponse) -> None:
        now = self._now_ms()
        if response.error_code != ErrorCode.NONE:
            raise ConnectionError(f"fetch from the source: {error_name(response.error_code)}")
        for topic in response.responses:
            for data in topic.partitions:
                self._on_partition(data, now)

    def _on_partition(self, data: PartitionData, now: float) -> None:
        core = self._cores.get(data.partition_index)
        partition = self._host.leading(self.topic, data.partition_index)
        if core is None or partition is None:
            return
        if data.error_code == ErrorCode.NONE:
            batches = batches_from(data.records, partition.log.log_end_offset)
            if batches:
                start = partition.log.log_end_offset
                try:
                    partition.append_mirrored(batches)
                except OSError as exc:
                    self._host.storage_failed(partition, exc)
                    return
                self._throttle.record(len(batches), self._clock())
                offsets, size = self._copied.get(data.partition_index, (0, 0))
                self._copied[data.partition_index] = (
                    offsets + partition.log.log_end_offset - start,
                    size + len(batches),
                )
            core.on_fetched(partition.log.log_end_offset, data.high_watermark, now)
        elif data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            decision = core.on_out_of_range(data.log_start_offset, now)
            if isinstance(decision, StartOver):
                log.info(
                    "mirror %s-%d ends at %d, before the source's log start %d: starting over",
                    self.topic,
                    data.partition_index,
                    partition.log.log_end_offset,
                    decision.offset,
                )
                partition.start_mirror_over_at(decision.offset)
                core.on_started_over(decision.offset, now)
        else:
            core.on_error(
                error_name(data.error_code),
                now,
                leader_moved=data.error_code in LEADER_MOVED,
            )
