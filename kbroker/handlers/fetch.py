"""Fetch: file regions below the high watermark (the last stable offset for
read_committed), with long polling.

Each partition's data is a FileRegion of whole batches from one segment, sent
by the server with sendfile: no record is decoded or copied through Python.
Limits follow KIP-74: partition_max_bytes per partition and max_bytes (v3+)
for the response, except that the first batch of the first partition with data
is returned whole even when it is larger, or a consumer would stall.

Fetch v0-v3 predate RecordBatch v2 (KIP-98), so for them the batches are
down-converted to message sets of magic 1 (v2-v3) or magic 0 (v0-v1).

A fetch that finds fewer than min_bytes waits in the purgatory until one of its
partitions changes or max_wait_ms passes, then is answered with what there is.
Incremental fetch sessions (KIP-227, v7+, kbroker/fetch_sessions.py): an incremental
request is widened to every partition of its session and fetched as a full one, then the
answer keeps only the partitions with something new.

Authorization (kbroker/authorization.py), as Kafka's: a consumer needs READ on each topic, a
follower CLUSTER_ACTION on the cluster; the partitions of a topic refused are answered
TOPIC_AUTHORIZATION_FAILED.

Transactions (KIP-98): every answer carries the partition's last stable offset (LSO).
A consumer with isolation_level 1 (read_committed, v4+) reads only below the LSO and
gets the aborted transactions overlapping the offsets returned, from the aborted-transaction
indexes (kbroker/log/txn_index.py), so it can drop their records; the data is still a file
region sent with sendfile. A marker or a high-watermark move changes the LSO and notifies the
purgatory, which wakes read_committed fetchers as it wakes the others.

A fetch with a replica id (>= 0) comes from a follower: it reads up to the log
end offset rather than the high watermark, and its fetch offset is the
follower's log end offset, which the leader records once per request (before
any wait) to advance the high watermark and the ISR (replication/manager.py). From v18 a
follower also sends the high watermark it knows (KIP-1166): when ours is newer the answer
goes back at once, so the follower learns it without waiting for new records.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.fetch_sessions import FetchContext
from kbroker.handlers.common import (
    LEADER_MOVED,
    NO_EPOCH,
    READ_COMMITTED,
    broker_endpoints,
    check_leader_epoch,
    current_leader,
    leader_partition,
    topic_name,
)
from kbroker.handlers.throttling import throttle
from kbroker.log.file_region import FileRegion
from kbroker.quotas import CONSUMER_BYTE_RATE
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.fetch_partition import FetchedPartitionData
from wire.messages.fetch_request import FetchPartition, FetchRequest
from wire.messages.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from wire.messages.request_header import RequestHeader
from wire.records.legacy import from_v2_batches

if TYPE_CHECKING:
    from kbroker.broker import Broker

INT32_MAX = 2**31 - 1
# Topics named by id, not name (KIP-516).
FIRST_TOPIC_ID_VERSION = 13
# Followers send the high watermark they know (KIP-1166).
FIRST_FOLLOWER_HIGH_WATERMARK_VERSION = 18


def _legacy_magic(version: int) -> int | None:
    """The message format a Fetch of this version understands, None for v2."""
    if version <= 1:
        return 0
    if version <= 3:
        return 1
    return None


def _read_partition(
    broker: Broker,
    topic: str,
    wanted: FetchPartition,
    magic: int | None,
    limit: int,
    min_one_batch: bool,
    from_follower: bool,
    read_committed: bool,
) -> tuple[PartitionData, int]:
    """The partition's answer and the bytes of records it carries. ``magic``: the message
    format to down-convert to (Fetch v0-v3), None for RecordBatch v2."""
    try:
        partition = broker.partition(topic, wanted.partition)
        if partition is None:
            partition = leader_partition(broker, topic, wanted.partition)
        if wanted.current_leader_epoch != NO_EPOCH:
            check_leader_epoch(partition, wanted.current_leader_epoch)
        log = partition.log
        high_watermark, last_stable_offset, log_start_offset = partition.read_offsets()
        if from_follower:
            max_offset = log.log_end_offset
        elif read_committed:
            max_offset = last_stable_offset
        else:
            max_offset = high_watermark
        found = log.read_with_end(
            wanted.fetch_offset, limit, max_offset=max_offset, min_one_batch=min_one_batch
        )
        if found is None:
            return (
                FetchedPartitionData(
                    wanted.partition, high_watermark, last_stable_offset, log_start_offset, b""
                ),
                0,
            )
        region, end_offset = found
        records: bytes | FileRegion = region
        size = region.nbytes
        if magic is not None:
            # Down-conversion decompresses: capped by the topic's max.message.bytes.
            cap = log.config.max_message_bytes
            records = from_v2_batches(region.read(), magic, max_message_bytes=cap)
            size = len(records)
    except KafkaError as exc:
        return _error_partition(broker, topic, wanted.partition, exc.code), 0
    aborted = None
    if read_committed and end_offset > wanted.fetch_offset:
        aborted = [
            AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
            for t in log.aborted_transactions(wanted.fetch_offset, end_offset)
        ]
    data = FetchedPartitionData(
        wanted.partition,
        high_watermark,
        last_stable_offset,
        log_start_offset,
        records,
        aborted,
    )
    return data, size


def _error_partition(broker: Broker, topic: str, index: int, code: int) -> PartitionData:
    data = PartitionData(partition_index=index, error_code=code, records=b"")
    known = broker.partition(topic, index)
    if known is not None:
        data.high_watermark = known.high_watermark
        data.last_stable_offset = known.last_stable_offset
        data.log_start_offset = known.log.log_start_offset
    else:
        data.high_watermark = -1
    return data


def replica_id_of(request: FetchRequest, version: int) -> int:
    """The fetching replica's broker id (-1 for consumers); in ReplicaState from v15."""
    return request.replica_state.replica_id if version >= 15 else request.replica_id


def _follower_high_watermark_behind(
    broker: Broker, request: FetchRequest, names: list[str | None]
) -> bool:
    """KIP-1166: whether the follower reports a high watermark older than ours for a partition
    (-1 when it knows none), so the answer goes back at once instead of waiting for data."""
    for topic, name in zip(request.topics, names, strict=True):
        if name is None:
            continue
        for wanted in topic.partitions:
            partition = broker.partition(name, wanted.partition)
            if partition is not None and wanted.high_watermark < partition.high_watermark:
                return True
    return False


def _record_follower_fetch(
    broker: Broker, request: FetchRequest, names: list[str | None], replica: int
) -> None:
    for topic, name in zip(request.topics, names, strict=True):
        if name is None:
            continue
        for wanted in topic.partitions:
            partition = broker.partition(name, wanted.partition)
            if partition is None:
                continue
            try:
                check_leader_epoch(partition, wanted.current_leader_epoch)
            except KafkaError:
                continue
            broker.replica_manager.follower_fetched(partition, replica, wanted.fetch_offset)


def _fetch_once(
    broker: Broker,
    request: FetchRequest,
    version: int,
    names: list[str | None],
    denied: frozenset[str],
    idle: Callable[[str, FetchPartition], bool] | None = None,
) -> tuple[FetchResponse, int, bool]:
    """One pass over the partitions: the response, its byte count, any error."""
    remaining = request.max_bytes if version >= 3 else INT32_MAX
    total = 0
    any_error = False
    magic = _legacy_magic(version)
    from_follower = replica_id_of(request, version) >= 0
    read_committed = version >= 4 and request.isolation_level == READ_COMMITTED
    responses: list[FetchableTopicResponse] = []
    for topic, name in zip(request.topics, names, strict=True):
        partitions: list[PartitionData] = []
        for wanted in topic.partitions:
            if name is None or name in denied:
                partitions.append(
                    PartitionData(
                        partition_index=wanted.partition,
                        error_code=(
                            ErrorCode.UNKNOWN_TOPIC_ID
                            if name is None
                            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        ),
                        high_watermark=-1,
                        records=b"",
                    )
                )
                any_error = True
                continue
            if idle is not None and idle(name, wanted):
                continue
            data, size = _read_partition(
                broker,
                name,
                wanted,
                magic,
                max(0, min(wanted.partition_max_bytes, remaining)),
                total == 0,
                from_follower,
                read_committed,
            )
            if data.error_code:
                any_error = True
            total += size
            remaining -= size
            partitions.append(data)
        responses.append(
            FetchableTopicResponse(topic=name or "", topic_id=topic.topic_id, partitions=partitions)
        )
    return FetchResponse(session_id=0, responses=responses), total, any_error


def _add_leader_hints(broker: Broker, response: FetchResponse, version: int) -> FetchResponse:
    """KIP-951 (see kbroker/handlers/common.py): current leaders from v12, endpoints from v16."""
    leaders: set[int] = set()
    for topic in response.responses:
        for data in topic.partitions:
            if data.error_code in LEADER_MOVED and topic.topic:
                leader, epoch = current_leader(broker, topic.topic, data.partition_index)
                data.current_leader = LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
                if leader >= 0:
                    leaders.add(leader)
    if version >= 16:
        response.node_endpoints = [
            NodeEndpoint(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
            for b in broker_endpoints(broker, leaders)
        ]
    return response


async def handle_fetch(
    broker: Broker, header: RequestHeader, request: FetchRequest, version: int
) -> FetchResponse:
    from_follower = replica_id_of(request, version) >= 0
    names = _topic_names(broker, request, version)
    if version >= 7:
        context = broker.fetch_sessions.begin(request, names, from_follower, time.monotonic())
        if context.error != ErrorCode.NONE:
            return FetchResponse(error_code=context.error, session_id=0)
        if context.incremental:
            request = context.request
            names = _topic_names(broker, request, version)
    else:
        context = FetchContext(request)
    idle = None
    if context.incremental and not from_follower:
        read_committed = version >= 4 and request.isolation_level == READ_COMMITTED
        idle = functools.partial(_idle, broker, context, read_committed)
    response, sent = await _fetch(broker, request, version, names, idle)
    if not from_follower:
        if throttle(
            broker, header, CONSUMER_BYTE_RATE, sent, response, version >= 1, withheld=True
        ):
            # KIP-219: over its quota, a consumer gets an empty response and the throttle
            # (a session asked for now is not made; an incremental one keeps what it had).
            response.responses = []
            session = context.session
            if session is not None and not context.incremental:
                broker.fetch_sessions.sessions.pop(session.session_id, None)
            response.session_id = session.session_id if context.incremental and session else 0
            return _add_leader_hints(broker, response, version) if version >= 12 else response
    response = context.finish(response, names)
    return _add_leader_hints(broker, response, version) if version >= 12 else response


def _idle(
    broker: Broker, context: FetchContext, read_committed: bool, name: str, wanted: FetchPartition
) -> bool:
    partition = broker.partition(name, wanted.partition)
    if partition is None:
        return False
    current = partition.read_offsets()
    end = current[1] if read_committed else current[0]
    return context.idle((name, wanted.partition), current, end, wanted.fetch_offset)


def _denied(broker: Broker, names: list[str | None], *, from_follower: bool) -> frozenset[str]:
    """The topics this request may not read."""
    known = {n for n in names if n is not None}
    if from_follower:
        if authorize(broker, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return frozenset()
        return frozenset(known)
    return frozenset(
        n for n in known if not authorize(broker, AclOperation.READ, ResourceType.TOPIC, n)
    )


def _topic_names(broker: Broker, request: FetchRequest, version: int) -> list[str | None]:
    """The request's topic names (v13+ names topics by id: None where the id is unknown)."""
    if version < FIRST_TOPIC_ID_VERSION:
        return [topic.topic for topic in request.topics]
    return [topic_name(broker, "", topic.topic_id, by_id=True) for topic in request.topics]


async def _fetch(
    broker: Broker,
    request: FetchRequest,
    version: int,
    names: list[str | None],
    idle: Callable[[str, FetchPartition], bool] | None = None,
) -> tuple[FetchResponse, int]:
    """The response and the bytes of records it carries. ``idle``: partitions of an
    incremental session with nothing new, left unread."""
    replica = replica_id_of(request, version)
    denied = _denied(broker, names, from_follower=replica >= 0)
    names_allowed = [None if n in denied else n for n in names]
    if replica >= 0:
        _record_follower_fetch(broker, request, names_allowed, replica)
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    stale_high_watermark = (
        replica >= 0
        and version >= FIRST_FOLLOWER_HIGH_WATERMARK_VERSION
        and _follower_high_watermark_behind(broker, request, names_allowed)
    )
    # The partitions to wait on, listed only when the first pass finds too little.
    keys: list[tuple[str, int]] | None = None
    while True:
        response, total, any_error = _fetch_once(broker, request, version, names, denied, idle)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or any_error or remaining <= 0 or stale_high_watermark:
            return response, total
        if keys is None:
            keys = [
                (name, wanted.partition)
                for topic, name in zip(request.topics, names_allowed, strict=True)
                if name is not None
                for wanted in topic.partitions
            ]
        if not keys:
            return response, total
        if not await broker.fetch_purgatory.wait(keys, remaining):
            response, total, _ = _fetch_once(broker, request, version, names, denied, idle)
            return response, total
