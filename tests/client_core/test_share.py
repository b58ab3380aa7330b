"""The share consumer's pure cores (KIP-932) without sockets: membership through
ShareGroupHeartbeat answers, share-session epochs and the partitions each request names,
acquired records and gaps, acknowledgements in implicit and explicit mode."""

from __future__ import annotations

import uuid

import pytest

from kbroker.client_core.share import (
    AcknowledgementMode,
    Acknowledgements,
    AcknowledgeType,
    FetchConfig,
    IllegalStateError,
    ShareSession,
    acknowledgement_batches,
    acquired_records,
    sessions_to_close,
)
from kbroker.client_core.share_membership import ShareMembership
from wire.errors import ErrorCode, KafkaError
from wire.messages.share_group_heartbeat_response import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)
from wire.records.control import end_txn_marker
from wire.records.record import Record, build_batch

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def answer(epoch: int, assigned: dict[uuid.UUID, list[int]] | None = None, **kw: int) -> object:
    return ShareGroupHeartbeatResponse(
        member_epoch=epoch,
        heartbeat_interval_ms=kw.pop("interval", 5000),
        error_code=kw.pop("error", 0),
        assignment=None
        if assigned is None
        else Assignment(
            topic_partitions=[
                TopicPartitions(topic_id=t, partitions=ps) for t, ps in assigned.items()
            ]
        ),
    )


def test_membership_joins_rejoins_when_fenced_and_leaves() -> None:
    m = ShareMembership("g")
    assert m.due_ms is None
    m.subscribe(["b", "a", "a"], now_ms=100)
    assert m.due_ms == 100
    join = m.heartbeat_request()
    assert (join.member_id, join.member_epoch, join.subscribed_topic_names) == (
        m.member_id,
        0,
        ["a", "b"],
    )
    assert m.on_response(answer(1), 100) == ErrorCode.NONE
    assert (m.epoch, m.assignment, m.due_ms) == (1, frozenset(), 5100)
    # The subscription is sent again only when it changes.
    assert m.heartbeat_request().subscribed_topic_names is None
    m.on_response(answer(2, {T1: [0, 1]}, interval=500), 5100)
    assert (m.assignment, m.due_ms, m.assignment_version) == ({(T1, 0), (T1, 1)}, 5600, 1)
    # Unchanged assignment (null) keeps it.
    m.on_response(answer(2), 5600)
    assert m.assignment == {(T1, 0), (T1, 1)}
    # Fenced: nothing assigned, joins again at once with the same id and its subscription.
    assert m.on_response(answer(0, error=ErrorCode.FENCED_MEMBER_EPOCH), 6000) == (
        ErrorCode.FENCED_MEMBER_EPOCH
    )
    assert (m.epoch, m.assignment, m.due_ms) == (0, frozenset(), 6000)
    assert m.heartbeat_request().subscribed_topic_names == ["a", "b"]
    # A coordinator error is retried after a back-off; others are fatal.
    assert m.on_response(answer(0, error=ErrorCode.NOT_COORDINATOR), 7000) == (
        ErrorCode.NOT_COORDINATOR
    )
    assert m.due_ms == 7100
    with pytest.raises(KafkaError) as fatal:
        m.on_response(answer(0, error=ErrorCode.GROUP_AUTHORIZATION_FAILED), 7100)
    assert fatal.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert m.leave_request().member_epoch == -1


def named(request: object) -> list[tuple[uuid.UUID, int, list[tuple[int, int, list[int]]]]]:
    return [
        (
            t.topic_id,
            p.partition_index,
            [
                (b.first_offset, b.last_offset, b.acknowledge_types)
                for b in p.acknowledgement_batches
            ],
        )
        for t in request.topics  # type: ignore[attr-defined]
        for p in t.partitions
    ]


def test_session_epochs_and_incremental_requests() -> None:
    s = ShareSession("g", "m")
    config = FetchConfig(max_records=7)
    opening = s.fetch_request({(T1, 0), (T1, 1)}, {}, config)
    assert opening.share_session_epoch == 0
    assert (opening.max_records, opening.batch_size) == (7, 7)
    assert named(opening) == [(T1, 0, []), (T1, 1, [])]
    with pytest.raises(IllegalStateError):
        s.acknowledge_request({})
    s.on_response(ErrorCode.NONE)
    # Next: only what changed, and the acknowledgements of the partitions still fetched.
    nxt = s.fetch_request({(T1, 1), (T2, 0)}, {(T1, 1): {5: 1, 6: 1, 8: 2}}, config)
    assert nxt.share_session_epoch == 1
    assert named(nxt) == [(T1, 1, [(5, 6, [1]), (8, 8, [2])]), (T2, 0, [])]
    assert [(f.topic_id, f.partitions) for f in nxt.forgotten_topics_data] == [(T1, [0])]
    s.on_response(ErrorCode.NONE)
    ack = s.acknowledge_request({(T2, 0): {3: 1, 4: 3}})
    assert ack.share_session_epoch == 2
    assert named(ack) == [(T2, 0, [(3, 4, [1, 3])])]
    assert s.acknowledge_request({}, close=True).share_session_epoch == -1
    # Other errors move the epoch on; a lost session starts again at 0 naming everything.
    s.on_response(ErrorCode.UNKNOWN_TOPIC_ID)
    assert s.epoch == 3
    s.on_response(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    assert (s.epoch, s.is_open, s.partitions) == (0, False, set())
    assert named(s.fetch_request({(T2, 0)}, {}, config)) == [(T2, 0, [])]
    s.epoch = 0x7FFFFFFF
    s.on_response(ErrorCode.NONE)
    assert s.epoch == 1


def test_acknowledgement_batches() -> None:
    assert acknowledgement_batches({}) == []
    assert acknowledgement_batches({3: 1, 1: 1, 2: 1, 7: 0}) == [(1, 3, [1]), (7, 7, [0])]
    assert acknowledgement_batches({1: 1, 2: 2, 3: 1}) == [(1, 3, [1, 2, 1])]


def test_only_acquired_records_are_delivered_and_acquired_offsets_without_one_are_gaps() -> None:
    data = (
        build_batch([Record(o, 1000 + o, None, b"v%d" % o) for o in range(10, 14)], base_offset=10)
        + build_batch(
            [end_txn_marker(False, 0, offset=14, timestamp=2000)],
            base_offset=14,
            producer_id=7,
            transactional=True,
            control=True,
        )
        + build_batch([Record(16, 3000, b"k", b"v16")], base_offset=15)
    )
    records, gaps = acquired_records("t", 3, data, [(11, 12, 2), (14, 16, 1)])
    assert [(r.topic, r.partition, r.offset, r.value, r.delivery_count) for r in records] == [
        ("t", 3, 11, b"v11", 2),
        ("t", 3, 12, b"v12", 2),
        ("t", 3, 16, b"v16", 1),
    ]
    # 14 is a transaction marker, 15 holds no record (compacted away).
    assert gaps == [14, 15]
    assert acquired_records("t", 3, data, []) == ([], [])


def test_implicit_mode_accepts_at_the_next_poll_and_refuses_acknowledge() -> None:
    acks = Acknowledgements(AcknowledgementMode.IMPLICIT)
    acks.delivered((T1, 0), [4, 5])
    acks.gaps((T1, 0), [6])
    with pytest.raises(IllegalStateError, match="Implicit acknowledgement"):
        acks.acknowledge((T1, 0), 4, AcknowledgeType.ACCEPT)
    acks.before_poll()
    assert acks.take() == {(T1, 0): {4: 1, 5: 1, 6: 0}}
    assert not acks.has_pending()


def test_explicit_mode_needs_every_record_settled_before_the_next_poll() -> None:
    acks = Acknowledgements(AcknowledgementMode.EXPLICIT)
    acks.delivered((T1, 0), [4, 5])
    acks.delivered((T2, 1), [9])
    acks.acknowledge((T1, 0), 4, AcknowledgeType.RELEASE)
    with pytest.raises(IllegalStateError, match="All records must be acknowledged"):
        acks.before_poll()
    acks.acknowledge((T1, 0), 5, AcknowledgeType.REJECT)
    acks.acknowledge((T2, 1), 9, AcknowledgeType.ACCEPT)
    with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
        acks.acknowledge((T2, 1), 9, AcknowledgeType.ACCEPT)
    acks.before_poll()
    assert acks.take([(T2, 1)]) == {(T2, 1): {9: 1}}
    acks.forget([(T1, 0)])
    assert acks.take() == {}


def test_only_sessions_of_partitions_no_longer_assigned_are_closed() -> None:
    sessions = {n: ShareSession("g", "m") for n in (1, 2, 3, 4)}
    for node, key in ((1, (T1, 0)), (2, (T1, 1)), (3, (T2, 0))):
        sessions[node].fetch_request({key}, {}, FetchConfig())
        sessions[node].on_response(ErrorCode.NONE)
    # Node 4 never opened a session; node 2's partition is assigned but its leader unknown
    # this round (not fetched): kept; node 3's partition was taken away: closed.
    assert sessions_to_close(sessions, [1], {(T1, 0), (T1, 1)}) == [3]
