"""Incremental fetch sessions (KIP-227): the cache as scenarios with a fake clock, and the
Fetch handler against an in-process broker."""

from __future__ import annotations

import random

from kbroker.broker import Broker
from kbroker.fetch_sessions import FetchSessionCache
from tests.server.conftest import RawClient
from tests.server.test_data_path import create_topic, produce, records
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from wire.messages.fetch_response import FetchResponse
from wire.records.record import build_batch

V = 12


def request(
    session_id: int, epoch: int, partitions: dict[str, list[tuple[int, int]]], **extra: object
) -> FetchRequest:
    extra = {"max_wait_ms": 0, "min_bytes": 0, **extra}
    return FetchRequest(
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                topic=name,
                partitions=[
                    FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                    for p, o in parts
                ],
            )
            for name, parts in partitions.items()
        ],
        **extra,  # type: ignore[arg-type]
    )


def names(r: FetchRequest) -> list[str | None]:
    return [t.topic for t in r.topics]


def test_sessions_are_created_used_and_refused_by_epoch() -> None:
    cache = FetchSessionCache(slots=2, rng=random.Random(1))
    first = request(0, 0, {"a": [(0, 0), (1, 0)]})
    ctx = cache.begin(first, names(first), False, now=0.0)
    assert ctx.session is not None and not ctx.incremental
    sid = ctx.session.session_id
    # Epoch 1 adds b-0 and changes a-1's position; the widened request has all three.
    inc = request(sid, 1, {"a": [(1, 5)], "b": [(0, 0)]})
    ctx = cache.begin(inc, names(inc), False, now=1.0)
    assert ctx.incremental
    widened = {
        (t.topic, p.partition): p.fetch_offset for t in ctx.request.topics for p in t.partitions
    }
    assert widened == {("a", 0): 0, ("a", 1): 5, ("b", 0): 0}
    # The same epoch again, an unknown session.
    again = cache.begin(inc, names(inc), False, now=2.0)
    assert again.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    unknown = request(sid + 1, 1, {})
    assert cache.begin(unknown, [], False, now=2.0).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # Forgetting a partition, then closing the session with epoch -1.
    forget = request(sid, 2, {}, forgotten_topics_data=[ForgottenTopic(topic="a", partitions=[0])])
    ctx = cache.begin(forget, [], False, now=3.0)
    assert [(t.topic, p.partition) for t in ctx.request.topics for p in t.partitions] == [
        ("a", 1),
        ("b", 0),
    ]
    close = request(sid, -1, {"a": [(0, 0)]})
    assert cache.begin(close, names(close), False, now=4.0).session is None
    assert sid not in cache.sessions


def test_a_full_cache_evicts_stale_then_smaller_consumer_sessions() -> None:
    cache = FetchSessionCache(slots=2, eviction_seconds=120, rng=random.Random(2))

    def new(parts: int, follower: bool, now: float) -> int | None:
        r = request(0, 0, {"t": [(p, 0) for p in range(parts)]})
        session = cache.begin(r, names(r), follower, now).session
        return None if session is None else session.session_id

    small = new(2, False, 0.0)
    follower = new(1, True, 0.0)
    assert small is not None and follower is not None
    # A consumer with fewer partitions than every unprivileged session gets none.
    assert new(1, False, 10.0) is None
    # A bigger consumer session takes the smaller consumer's slot, never the follower's.
    big = new(5, False, 20.0)
    assert big is not None and set(cache.sessions) == {follower, big}
    # No unprivileged session is smaller than 4 partitions; the follower's is privileged.
    assert new(4, False, 30.0) is None
    # Idle past min.incremental.fetch.session.eviction.ms: any session may be replaced.
    late = new(1, False, 200.0)
    assert late is not None and len(cache.sessions) == 2


async def fetch(client: RawClient, r: FetchRequest) -> FetchResponse:
    response = await client.call(ApiKey.FETCH, V, r)
    assert isinstance(response, FetchResponse)
    return response


def partitions_of(response: FetchResponse) -> dict[tuple[str, int], int]:
    return {
        (t.topic, p.partition_index): p.high_watermark
        for t in response.responses
        for p in t.partitions
    }


async def test_incremental_answers_carry_only_what_changed(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "s", partitions=3)
    full = await fetch(client, request(0, 0, {"s": [(0, 0), (1, 0), (2, 0)]}))
    sid = full.session_id
    assert sid > 0 and len(partitions_of(full)) == 3
    nothing = await fetch(client, request(sid, 1, {}))
    assert nothing.session_id == sid and partitions_of(nothing) == {}
    await produce(client, "s", build_batch(records(0, 3)), partition=1)
    changed = await fetch(client, request(sid, 2, {}))
    assert partitions_of(changed) == {("s", 1): 3}
    assert changed.responses[0].partitions[0].records
    # The client moves its position; the records are not sent again, nothing else changed.
    moved = await fetch(client, request(sid, 3, {"s": [(1, 3)]}))
    assert partitions_of(moved) == {}
    wrong = await fetch(client, request(sid, 3, {}))
    assert wrong.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH and wrong.responses == []
    plain = await fetch(client, request(0, -1, {"s": [(0, 0)]}))
    assert plain.session_id == 0 and len(partitions_of(plain)) == 1


async def test_an_idle_session_still_long_polls(broker: Broker, client: RawClient) -> None:
    """Idle partitions are not read, but an incremental fetch still waits for them: it
    returns at max_wait_ms with nothing, or as soon as one of them gets records."""
    import asyncio
    import time

    await create_topic(client, "w", partitions=2)
    sid = (await fetch(client, request(0, 0, {"w": [(0, 0), (1, 0)]}))).session_id
    started = time.monotonic()
    quiet = await fetch(client, request(sid, 1, {}, max_wait_ms=500, min_bytes=1))
    assert partitions_of(quiet) == {} and time.monotonic() - started >= 0.45
    other = await RawClient.connect(broker.port)
    try:
        waiting = asyncio.ensure_future(
            fetch(client, request(sid, 2, {}, max_wait_ms=10_000, min_bytes=1))
        )
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await produce(other, "w", build_batch(records(0, 2)), partition=0)
        woken = await waiting
        assert partitions_of(woken) == {("w", 0): 2} and time.monotonic() - started < 5
    finally:
        await other.close()
