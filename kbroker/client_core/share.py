"""A share consumer's fetching and acknowledging (KIP-932), sans-IO: share sessions, the
records a ShareFetch acquired, and the acknowledgements not sent yet. The asyncio shell is
kbroker.share_consumer.

Share sessions: one per broker the consumer fetches from. ShareSessionEpoch 0 opens it and
names every partition; each later ShareFetch or ShareAcknowledge carries the next epoch (1,
2, ..., wrapping past 2^31-1 to 1) and names only the partitions added, with those dropped
in ForgottenTopicsData; -1 closes it, which releases what the member still holds there. A
broker that lost the session (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
SHARE_SESSION_LIMIT_REACHED) or a lost connection makes the next request open a new one
(epoch 0); any other answer moves the epoch on, as the Java client's ShareSessionHandler
does.

Records: a ShareFetch returns whole batches and, per partition, the ranges of offsets this
member acquired with their delivery count. Only records inside those ranges are delivered;
an acquired offset without a record (a transaction marker, a record compacted away) is a
gap, acknowledged as GAP (type 0) with the next acknowledgements.

Acknowledgements: the records the last poll delivered are in flight until acknowledged
(ACCEPT, RELEASE or REJECT); an acknowledgement waits until the shell sends it, on the next
ShareFetch to that partition's broker or in a ShareAcknowledge (commit). In implicit mode
(``share.acknowledgement.mode=implicit``) what the last poll delivered is accepted at the
next poll or commit; in explicit mode the application acknowledges each record, and a poll
while a record of the last one is unacknowledged is refused with IllegalStateError.
Acknowledgements go out as batches of consecutive offsets, one type for the batch when all
are the same, else one per offset.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kbroker.client_core.fetched import decode_fetched
from kbroker.client_core.share_membership import SharePartitionId
from wire.errors import ErrorCode, KafkaError
from wire.messages.share_acknowledge_request import (
    AcknowledgementBatch,
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from wire.messages.share_acknowledge_response import ShareAcknowledgeResponse
from wire.messages.share_fetch_request import AcknowledgementBatch as FetchAckBatch
from wire.messages.share_fetch_request import (
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
    ShareFetchRequest,
)
from wire.messages.share_fetch_response import ShareFetchResponse

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
_MAX_EPOCH = 0x7FFFFFFF
GAP = 0
_SESSION_LOST = frozenset(
    {
        ErrorCode.SHARE_SESSION_NOT_FOUND,
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        ErrorCode.SHARE_SESSION_LIMIT_REACHED,
    }
)


class AcknowledgeType(enum.IntEnum):
    """How the application settles a delivered record (Kafka's AcknowledgeType)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class AcknowledgementMode(enum.Enum):
    IMPLICIT = "implicit"
    EXPLICIT = "explicit"


class AcquireMode(enum.IntEnum):
    """``share.acquire.mode``: whole batches, or at most max.poll.records (KIP-1206)."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


class IllegalStateError(RuntimeError):
    """The call does not fit the consumer's state (Java's IllegalStateException)."""


@dataclass(frozen=True, slots=True)
class ShareRecord:
    """One delivered record; ``delivery_count`` is how many times it was acquired, this
    delivery included."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    delivery_count: int


@dataclass(frozen=True, slots=True)
class FetchConfig:
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    max_records: int = 500
    acquire_mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED


@dataclass(slots=True)
class FetchedPartition:
    """What a ShareFetch answered for one partition."""

    key: SharePartitionId
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    ack_error: ErrorCode = ErrorCode.NONE
    ack_message: str | None = None
    records: list[ShareRecord] = field(default_factory=list)
    gaps: list[int] = field(default_factory=list)


def acknowledgement_batches(acks: Mapping[int, int]) -> list[tuple[int, int, list[int]]]:
    """(first offset, last offset, types) for each run of consecutive offsets."""
    out: list[tuple[int, int, list[int]]] = []
    for offset in sorted(acks):
        if out and out[-1][1] == offset - 1:
            first, _, types = out[-1]
            types.append(acks[offset])
            out[-1] = (first, offset, types)
        else:
            out.append((offset, offset, [acks[offset]]))
    return [(f, last, [t[0]] if len(set(t)) == 1 else t) for f, last, t in out]


def acquired_records(
    topic: str, partition: int, data: bytes, acquired: Sequence[tuple[int, int, int]]
) -> tuple[list[ShareRecord], list[int]]:
    """The records of ``data`` inside the ``acquired`` (first, last, delivery count) ranges,
    and the acquired offsets that hold no record (gaps)."""
    if not acquired:
        return [], []
    fetched, _ = decode_fetched(data, min(first for first, _, _ in acquired))
    by_offset = {r.offset: r for r in fetched}
    records: list[ShareRecord] = []
    gaps: list[int] = []
    for first, last, count in acquired:
        for offset in range(first, last + 1):
            r = by_offset.get(offset)
            if r is None:
                gaps.append(offset)
                continue
            records.append(
                ShareRecord(
                    topic,
                    partition,
                    offset,
                    r.timestamp,
                    r.timestamp_type,
                    r.key,
                    r.value,
                    r.headers,
                    count,
                )
            )
    return records, gaps


def read_share_fetch(
    response: ShareFetchResponse, names: Mapping[uuid.UUID, str]
) -> list[FetchedPartition]:
    """A ShareFetch's answer per partition (the top-level error is the session's)."""
    out: list[FetchedPartition] = []
    for topic in response.responses:
        name = names.get(topic.topic_id, str(topic.topic_id))
        for p in topic.partitions:
            answer = FetchedPartition(
                (topic.topic_id, p.partition_index),
                ErrorCode(p.error_code),
                p.error_message,
                ErrorCode(p.acknowledge_error_code),
                p.acknowledge_error_message,
            )
            if answer.error == ErrorCode.NONE and p.acquired_records:
                acquired = [
                    (a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records
                ]
                answer.records, answer.gaps = acquired_records(
                    name, p.partition_index, bytes(p.records or b""), acquired
                )
            out.append(answer)
    return out


def read_share_acknowledge(
    response: ShareAcknowledgeResponse,
) -> dict[SharePartitionId, tuple[ErrorCode, str | None]]:
    return {
        (t.topic_id, p.partition_index): (ErrorCode(p.error_code), p.error_message)
        for t in response.responses
        for p in t.partitions
    }


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


def _by_topic(keys: Iterable[SharePartitionId]) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in sorted(keys, key=lambda k: (k[0].bytes, k[1])):
        out.setdefault(topic_id, []).append(partition)
    return out


class ShareSession:
    """The share session with one broker."""

    def __init__(self, group_id: str, member_id: str) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.epoch = OPEN_EPOCH
        # The partitions the broker has in the session.
        self.partitions: set[SharePartitionId] = set()

    @property
    def is_open(self) -> bool:
        """Whether the broker has this session (its next request continues it)."""
        return self.epoch != OPEN_EPOCH

    def fetch_request(
        self,
        wanted: Iterable[SharePartitionId],
        acks: Mapping[SharePartitionId, Mapping[int, int]],
        config: FetchConfig,
    ) -> ShareFetchRequest:
        """A ShareFetch of ``wanted`` carrying ``acks`` (for partitions of ``wanted``)."""
        wanted = set(wanted)
        if self.is_open:
            added = wanted - self.partitions
            forgotten = self.partitions - wanted
        else:
            added, forgotten = wanted, set()
        self.partitions = wanted
        named = added | {k for k in acks if k in wanted}
        topics = [
            FetchTopic(
                topic_id=topic_id,
                partitions=[
                    FetchPartition(
                        partition_index=p,
                        acknowledgement_batches=[
                            FetchAckBatch(first_offset=f, last_offset=last, acknowledge_types=t)
                            for f, last, t in acknowledgement_batches(acks.get((topic_id, p), {}))
                        ],
                    )
                    for p in partitions
                ],
            )
            for topic_id, partitions in _by_topic(named).items()
        ]
        return ShareFetchRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            share_session_epoch=self.epoch,
            max_wait_ms=config.max_wait_ms,
            min_bytes=config.min_bytes,
            max_bytes=config.max_bytes,
            max_records=config.max_records,
            batch_size=config.max_records,
            share_acquire_mode=int(config.acquire_mode),
            topics=topics,
            forgotten_topics_data=[
                ForgottenTopic(topic_id=t, partitions=ps) for t, ps in _by_topic(forgotten).items()
            ],
        )

    def acknowledge_request(
        self, acks: Mapping[SharePartitionId, Mapping[int, int]], *, close: bool = False
    ) -> ShareAcknowledgeRequest:
        """A ShareAcknowledge in this session (open only), or closing it with ``close``."""
        if not self.is_open:
            raise IllegalStateError("a share session is opened by a ShareFetch")
        return ShareAcknowledgeRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            share_session_epoch=CLOSE_EPOCH if close else self.epoch,
            topics=[
                AcknowledgeTopic(
                    topic_id=topic_id,
                    partitions=[
                        AcknowledgePartition(
                            partition_index=p,
                            acknowledgement_batches=[
                                AcknowledgementBatch(
                                    first_offset=f, last_offset=last, acknowledge_types=t
                                )
                                for f, last, t in acknowledgement_batches(acks[(topic_id, p)])
                            ],
                        )
                        for p in partitions
                    ],
                )
                for topic_id, partitions in _by_topic(k for k, v in acks.items() if v).items()
            ],
        )

    def on_response(self, error: ErrorCode) -> None:
        """The broker answered a request of this session with top-level ``error``."""
        if error in _SESSION_LOST:
            self.lost()
        else:
            self.epoch = _next_epoch(self.epoch)

    def lost(self) -> None:
        """The broker has no such session any more (or never answered): open a new one."""
        self.epoch = OPEN_EPOCH
        self.partitions = set()


def sessions_to_close(
    sessions: Mapping[int, ShareSession],
    fetching: Iterable[int],
    assignment: Iterable[SharePartitionId],
) -> list[int]:
    """The brokers whose open session holds none of the assigned partitions any more, and
    that this round does not fetch from: their sessions are closed (releasing what they
    hold). A session whose partitions are still assigned, their leaders only unknown for
    now, is kept."""
    skip = set(fetching)
    assigned = set(assignment)
    return [
        node
        for node, session in sessions.items()
        if session.is_open and node not in skip and not session.partitions & assigned
    ]


class Acknowledgements:
    """The records the last poll delivered, and the acknowledgements not sent yet."""

    def __init__(self, mode: AcknowledgementMode) -> None:
        self.mode = mode
        # Per partition: delivered offsets not acknowledged yet.
        self._in_flight: dict[SharePartitionId, set[int]] = {}
        # Per partition: offset -> acknowledge type, waiting to be sent.
        self._pending: dict[SharePartitionId, dict[int, int]] = {}

    def delivered(self, key: SharePartitionId, offsets: Iterable[int]) -> None:
        self._in_flight.setdefault(key, set()).update(offsets)

    def gaps(self, key: SharePartitionId, offsets: Iterable[int]) -> None:
        pending = self._pending.setdefault(key, {})
        for offset in offsets:
            pending[offset] = GAP

    def acknowledge(self, key: SharePartitionId, offset: int, ack: AcknowledgeType) -> None:
        if self.mode is AcknowledgementMode.IMPLICIT:
            raise IllegalStateError("Implicit acknowledgement of delivery is being used.")
        in_flight = self._in_flight.get(key)
        if in_flight is None or offset not in in_flight:
            raise IllegalStateError("The record cannot be acknowledged.")
        in_flight.discard(offset)
        self._pending.setdefault(key, {})[offset] = int(AcknowledgeType(ack))

    def before_poll(self) -> None:
        """A poll starts: implicit mode accepts the last poll's records; explicit mode
        refuses to go on while one is unacknowledged."""
        if self.mode is AcknowledgementMode.IMPLICIT:
            self.accept_all()
        elif any(self._in_flight.values()):
            raise IllegalStateError(
                "All records must be acknowledged in explicit acknowledgement mode."
            )
        self._in_flight.clear()

    def accept_all(self) -> None:
        """Implicit mode: accept every delivered record not acknowledged yet."""
        if self.mode is not AcknowledgementMode.IMPLICIT:
            return
        for key, offsets in self._in_flight.items():
            pending = self._pending.setdefault(key, {})
            for offset in offsets:
                pending[offset] = int(AcknowledgeType.ACCEPT)
        self._in_flight.clear()

    def take(
        self, keys: Iterable[SharePartitionId] | None = None
    ) -> dict[SharePartitionId, dict[int, int]]:
        """The pending acknowledgements (of ``keys``, or all), no longer pending."""
        chosen = list(self._pending) if keys is None else [k for k in keys if k in self._pending]
        return {k: acks for k in chosen if (acks := self._pending.pop(k))}

    def forget(self, keys: Iterable[SharePartitionId]) -> None:
        """The partitions' records are no longer held (their session ended)."""
        for key in keys:
            self._in_flight.pop(key, None)
            self._pending.pop(key, None)

    def has_pending(self) -> bool:
        return any(self._pending.values())


def check_fatal(error: ErrorCode, message: str | None, what: str) -> None:
    """Raise the errors a consumer cannot go on after (authorization, a malformed request)."""
    if error in _FATAL:
        raise KafkaError(error, message or f"{what}: {error.name}")


_FATAL = frozenset(
    {
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)
