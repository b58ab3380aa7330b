"""Incremental fetch sessions (KIP-227), sans-IO: the session cache and what one Fetch
request means against it.

A client that fetches many partitions sends them all once (``session_epoch`` 0: a full
fetch that asks for a session) and is answered with a ``session_id``. After that it sends
only what changed (``session_epoch`` 1, 2, ...): partitions whose fetch position or limits
moved, partitions to add, and ``forgotten_topics_data``; the broker answers only for the
partitions with something new: records, an error, or a high watermark, last stable offset
or log start offset other than the last one it sent. ``session_epoch`` -1 is a full fetch
without a session (and closes ``session_id`` if it names one).

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions (Kafka's default
1,000). When it is full a new session may take the slot of a session that was idle longer
than ``min.incremental.fetch.session.eviction.ms`` (120 s), or else of a smaller session
of a consumer (followers' sessions are privileged and evicted only when stale, and a
consumer never evicts one); failing that the client gets session id 0 and keeps sending
full fetches. Errors, as Kafka answers them: FETCH_SESSION_ID_NOT_FOUND for an unknown
session, INVALID_FETCH_SESSION_EPOCH for an epoch other than the next expected one.

The handler asks ``begin()`` for a context, fetches the partitions it names (all the
session's, in their original order) as for a full request, then ``finish()`` trims the
response and remembers what was sent. Nothing here reads the clock: ``now`` is passed in.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from wire.errors import ErrorCode
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.fetch_response import FetchResponse

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
INT32_MAX = 2**31 - 1
DEFAULT_SLOTS = 1000
DEFAULT_EVICTION_SECONDS = 120.0

# (topic name, partition); the topic id rides along in the stored request partition.
Key = tuple[str, int]


@dataclass
class _Partition:
    topic_id: object
    wanted: FetchPartition
    # What the last response sent for it (None: never sent): hw, lso, log start.
    sent: tuple[int, int, int] | None = None


@dataclass
class FetchSession:
    session_id: int
    privileged: bool
    next_epoch: int
    last_used: float
    partitions: dict[Key, _Partition] = field(default_factory=dict)

    def next(self) -> None:
        # Epochs wrap to 1, never to 0 or -1 (KIP-227).
        self.next_epoch = 1 if self.next_epoch >= INT32_MAX else self.next_epoch + 1


@dataclass
class FetchContext:
    """What to fetch for one request, and how to answer."""

    request: FetchRequest
    session: FetchSession | None = None
    incremental: bool = False
    error: ErrorCode = ErrorCode.NONE

    def idle(self, key: Key, current: tuple[int, int, int], readable_end: int, offset: int) -> bool:
        """In an incremental fetch: a partition whose high watermark, LSO and log start
        are those last sent (``current``) and whose fetch ``offset`` has nothing below
        ``readable_end`` to read would be left out of the answer, so it need not be read
        at all (this is what makes a session of many idle partitions cheap)."""
        if not self.incremental or self.session is None:
            return False
        state = self.session.partitions.get(key)
        return state is not None and state.sent == current and offset >= readable_end

    def finish(self, response: FetchResponse, names: Iterable[str | None]) -> FetchResponse:
        """Set the session id; in an incremental answer keep only what changed; remember
        what was sent. ``names`` are the topic names of the response's topics, in order."""
        session = self.session
        if session is None:
            response.session_id = 0
            return response
        response.session_id = session.session_id
        kept_topics = []
        for topic, name in zip(response.responses, names, strict=True):
            kept = []
            for data in topic.partitions:
                state = session.partitions.get((name or "", data.partition_index))
                now = (data.high_watermark, data.last_stable_offset, data.log_start_offset)
                changed = (
                    not self.incremental
                    or state is None
                    or data.error_code != ErrorCode.NONE
                    or bool(data.records)
                    or state.sent != now
                )
                if changed:
                    kept.append(data)
                    if state is not None:
                        state.sent = now
            if kept:
                topic.partitions = kept
                kept_topics.append(topic)
        response.responses = kept_topics
        return response


class FetchSessionCache:
    def __init__(
        self,
        slots: int = DEFAULT_SLOTS,
        eviction_seconds: float = DEFAULT_EVICTION_SECONDS,
        rng: random.Random | None = None,
    ) -> None:
        self.slots = slots
        self.eviction_seconds = eviction_seconds
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}

    def begin(
        self,
        request: FetchRequest,
        names: list[str | None],
        from_follower: bool,
        now: float,
    ) -> FetchContext:
        """The context of one Fetch request (``names``: its topics' names, None for an
        unknown topic id)."""
        epoch = request.session_epoch
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if request.session_id:
                self.sessions.pop(request.session_id, None)
            if epoch == FINAL_EPOCH:
                return FetchContext(request)
            session = self._create(request, names, from_follower, now)
            return FetchContext(request, session)
        session = self.sessions.get(request.session_id)
        if session is None:
            return FetchContext(request, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.next_epoch:
            return FetchContext(request, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        for topic, name in zip(request.topics, names, strict=True):
            for wanted in topic.partitions:
                key = (name or "", wanted.partition)
                state = session.partitions.get(key)
                if state is None:
                    session.partitions[key] = _Partition(topic.topic_id, wanted)
                else:
                    state.wanted = wanted
        for forgotten in request.forgotten_topics_data:
            name = forgotten.topic or self._name_of(session, forgotten.topic_id)
            for index in forgotten.partitions:
                session.partitions.pop((name, index), None)
        session.next()
        session.last_used = now
        expanded = _request_for(request, session)
        return FetchContext(expanded, session, incremental=True)

    @staticmethod
    def _name_of(session: FetchSession, topic_id: object) -> str:
        for (name, _), state in session.partitions.items():
            if state.topic_id == topic_id:
                return name
        return ""

    def _create(
        self,
        request: FetchRequest,
        names: list[str | None],
        privileged: bool,
        now: float,
    ) -> FetchSession | None:
        size = sum(len(t.partitions) for t in request.topics)
        if len(self.sessions) >= self.slots and not self._evict_for(size, privileged, now):
            return None
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, next_epoch=1, last_used=now)
        for topic, name in zip(request.topics, names, strict=True):
            for wanted in topic.partitions:
                session.partitions[(name or "", wanted.partition)] = _Partition(
                    topic.topic_id, wanted
                )
        self.sessions[session_id] = session
        return session

    def _evict_for(self, size: int, privileged: bool, now: float) -> bool:
        """Free a slot for a new session of ``size`` partitions, as Kafka's cache does:
        any stale session first, else (for a follower, or a bigger consumer session) the
        smallest unprivileged one."""
        stale = [s for s in self.sessions.values() if now - s.last_used > self.eviction_seconds]
        if stale:
            victim = min(stale, key=lambda s: s.last_used)
        else:
            candidates = [
                s
                for s in self.sessions.values()
                if not s.privileged and (privileged or len(s.partitions) < size)
            ]
            if not candidates:
                return False
            victim = min(candidates, key=lambda s: (len(s.partitions), s.last_used))
        del self.sessions[victim.session_id]
        return True

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, INT32_MAX)
            if session_id not in self.sessions:
                return session_id


def _request_for(request: FetchRequest, session: FetchSession) -> FetchRequest:
    """A full request for every partition of the session, grouped by topic in the order
    the session learnt them, with the incremental request's other settings."""
    topics: dict[str, FetchTopic] = {}
    for (name, _), state in session.partitions.items():
        topic = topics.get(name)
        if topic is None:
            topic = topics[name] = FetchTopic(topic=name, topic_id=state.topic_id, partitions=[])  # type: ignore[arg-type]
        topic.partitions.append(state.wanted)
    return FetchRequest(
        cluster_id=request.cluster_id,
        replica_id=request.replica_id,
        replica_state=request.replica_state,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=request.isolation_level,
        session_id=request.session_id,
        session_epoch=request.session_epoch,
        topics=list(topics.values()),
        rack_id=request.rack_id,
    )
