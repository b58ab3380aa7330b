"""The share partition's pure state machine (KIP-932), scenarios as data where they are, with
the answers Kafka 4.3 gave to the same sequences (sent with raw ShareFetch/ShareAcknowledge
requests to ../shared/kafka-4.3): batch-aligned acquisition, acknowledgement types and their
errors, releases counted against the delivery limit, lock expiry, the in-flight limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.share.share_partition import (
    AckBatch,
    AckType,
    Acquired,
    AcquireMode,
    LogBatch,
    RecordState,
    Run,
    SharePartition,
)
from wire.errors import ErrorCode, KafkaError

LOCK = 30_000
BATCH = AcquireMode.BATCH_OPTIMIZED
LIMIT = AcquireMode.RECORD_LIMIT
A, B = "member-a", "member-b"


def partition(
    start: int = 0, *, max_delivery: int = 5, max_in_flight: int = 2000
) -> SharePartition:
    return SharePartition(start, max_delivery=max_delivery, max_in_flight=max_in_flight)


def log(*ranges: tuple[int, int]) -> list[LogBatch]:
    return [LogBatch(first, last) for first, last in ranges]


def ack(
    sp: SharePartition,
    member: str,
    first: int,
    last: int,
    *types: AckType,
    now: int = 0,
    renew: bool = False,
) -> None:
    sp.acknowledge(member, [AckBatch(first, last, tuple(int(t) for t in types))], now, LOCK, renew)


def refused(
    sp: SharePartition, member: str, first: int, last: int, *types: AckType, renew: bool = False
) -> tuple[int, str | None]:
    with pytest.raises(KafkaError) as caught:
        ack(sp, member, first, last, *types, renew=renew)
    return caught.value.code, caught.value.message


def test_a_whole_batch_is_acquired_even_past_max_records() -> None:
    sp = partition()
    assert sp.acquire(A, log((0, 9)), 5, BATCH, 0, LOCK) == [Acquired(0, 9, 1)]
    assert sp.in_flight() == 10 and sp.next_fetch_offset() == 10


def test_record_limit_mode_takes_exactly_max_records() -> None:
    sp = partition()
    assert sp.acquire(A, log((0, 9)), 3, LIMIT, 0, LOCK) == [Acquired(0, 2, 1)]
    assert sp.next_fetch_offset() == 3
    assert sp.acquire(B, log((0, 9)), 3, LIMIT, 0, LOCK) == [Acquired(3, 5, 1)]


def test_kafka_43_sequence_accept_release_reject_gap_then_redelivery() -> None:
    # Kafka 4.3: fetch 0-9, ack [accept, accept, release, reject, gap] for 0-4, and the same
    # ShareFetch hands back offset 2 with delivery count 2; 5-9 stay with the member.
    sp = partition()
    sp.acquire(A, log((0, 9)), 5, BATCH, 0, LOCK)
    ack(sp, A, 0, 4, AckType.ACCEPT, AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP)
    assert sp.start_offset == 2
    assert sp.acquire(A, log((0, 9)), 5, BATCH, 0, LOCK) == [Acquired(2, 2, 2)]
    # The session closes: what the member holds becomes available, counts kept.
    assert sp.release_member(A)
    assert sp.acquire(A, log((0, 9)), 20, BATCH, 0, LOCK) == [Acquired(2, 2, 3), Acquired(5, 9, 2)]


def test_acknowledgement_errors_as_kafka_answers_them() -> None:
    sp = partition()
    assert refused(sp, A, 0, 0, AckType.ACCEPT) == (
        ErrorCode.INVALID_RECORD_STATE,
        "Batch record not found. The request batch offsets are not found in the cache.",
    )
    sp.acquire(A, log((0, 5)), 500, BATCH, 0, LOCK)
    assert refused(sp, B, 0, 0, AckType.ACCEPT) == (
        ErrorCode.INVALID_RECORD_STATE,
        "Member is not the owner of offset",
    )
    assert refused(sp, B, 0, 5, AckType.ACCEPT) == (
        ErrorCode.INVALID_RECORD_STATE,
        "Member is not the owner of batch record",
    )
    assert refused(sp, A, 100, 100, AckType.ACCEPT) == (
        ErrorCode.INVALID_REQUEST,
        "Batch record not found. The first offset in request is past acquired records.",
    )
    assert refused(sp, A, 3, 3, AckType.RENEW) == (ErrorCode.INVALID_REQUEST, None)
    ack(sp, A, 2, 5, AckType.ACCEPT)
    assert refused(sp, A, 2, 2, AckType.ACCEPT) == (
        ErrorCode.INVALID_RECORD_STATE,
        "The offset cannot be acknowledged. The offset is not acquired.",
    )
    assert refused(sp, A, 0, 1, AckType.ACCEPT, AckType.ACCEPT, AckType.ACCEPT)[0] == (
        ErrorCode.INVALID_REQUEST
    )


def test_a_refused_acknowledgement_changes_nothing() -> None:
    sp = partition()
    sp.acquire(A, log((0, 3)), 500, BATCH, 0, LOCK)
    sp.acquire(B, log((4, 5)), 500, BATCH, 0, LOCK)
    with pytest.raises(KafkaError):
        sp.acknowledge(A, [AckBatch(0, 1, (1,)), AckBatch(4, 4, (1,))], 0, LOCK, False)
    assert [r.state for r in sp.runs] == [RecordState.ACQUIRED, RecordState.ACQUIRED]


def test_released_past_the_delivery_limit_is_archived() -> None:
    sp = partition(max_delivery=2)
    sp.acquire(A, log((0, 5)), 500, BATCH, 0, LOCK)
    ack(sp, A, 0, 1, AckType.RELEASE)
    assert sp.acquire(A, log((0, 5)), 500, BATCH, 0, LOCK) == [Acquired(0, 1, 2)]
    ack(sp, A, 0, 1, AckType.RELEASE)
    # Archived, hence done: the start offset moves past them.
    assert sp.start_offset == 2
    assert sp.acquire(A, log((0, 5)), 500, BATCH, 0, LOCK) == []


def test_a_lock_that_expires_redelivers_then_archives() -> None:
    # Kafka 4.3 with a 15 s lock and a limit of 2: redelivered at 15.0 s with count 2, then
    # never again.
    lock = 15_000
    sp = partition(max_delivery=2)
    sp.acquire(A, log((0, 2)), 500, BATCH, 0, lock)
    assert sp.next_deadline() == lock
    assert not sp.expire_locks(lock - 1)
    assert sp.expire_locks(lock)
    assert sp.acquire(A, log((0, 2)), 500, BATCH, lock, lock) == [Acquired(0, 2, 2)]
    assert sp.expire_locks(2 * lock)
    assert sp.start_offset == 3 and sp.in_flight() == 0
    assert sp.next_deadline() is None


def test_renew_extends_the_lock() -> None:
    sp = partition()
    sp.acquire(A, log((0, 2)), 500, BATCH, 0, LOCK)
    ack(sp, A, 1, 1, AckType.RENEW, now=20_000, renew=True)
    sp.expire_locks(LOCK)
    assert [(r.first, r.last, r.state) for r in sp.runs] == [
        (0, 0, RecordState.AVAILABLE),
        (1, 1, RecordState.ACQUIRED),
        (2, 2, RecordState.AVAILABLE),
    ]


def test_no_new_batch_beyond_the_in_flight_limit() -> None:
    # Kafka 4.3 with share.partition.max.record.locks=100 and a batch of 3,000: the whole
    # batch, then nothing more until records are done.
    sp = partition(max_in_flight=100)
    assert sp.acquire(A, log((0, 2999), (3000, 3009)), 1000, BATCH, 0, LOCK) == [
        Acquired(0, 2999, 1)
    ]
    assert sp.acquire(A, log((3000, 3009)), 1000, BATCH, 0, LOCK) == []
    ack(sp, A, 0, 2999, AckType.ACCEPT)
    assert sp.acquire(A, log((3000, 3009)), 1000, BATCH, 0, LOCK) == [Acquired(3000, 3009, 1)]


def test_control_batches_and_holes_are_archived_gaps() -> None:
    sp = partition()
    batches = [LogBatch(0, 1), LogBatch(2, 2, skip=True), LogBatch(5, 6)]
    assert sp.acquire(A, batches, 500, BATCH, 0, LOCK) == [Acquired(0, 1, 1), Acquired(5, 6, 1)]
    ack(sp, A, 0, 1, AckType.ACCEPT)
    assert sp.start_offset == 5


def test_persisted_runs_store_acquired_as_available() -> None:
    sp = partition()
    sp.acquire(A, log((0, 3)), 500, BATCH, 0, LOCK)
    ack(sp, A, 1, 1, AckType.ACCEPT)
    assert sp.persisted_runs() == [
        Run(0, 0, RecordState.AVAILABLE, 1),
        Run(1, 1, RecordState.ACKNOWLEDGED, 1),
        Run(2, 3, RecordState.AVAILABLE, 1),
    ]
    again = SharePartition(0, sp.persisted_runs(), max_delivery=5, max_in_flight=2000)
    assert again.acquire(B, log((0, 3)), 500, BATCH, 0, LOCK) == [
        Acquired(0, 0, 2),
        Acquired(2, 3, 2),
    ]


def test_state_is_written_from_the_start_offset_before_the_acknowledgement() -> None:
    # Kafka 4.3's __share_group_state after ten records of one batch were accepted: start
    # offset 0, batch 0-9 acknowledged, delivery complete count 10 (its start offset moves
    # only once the write is done); the next write starts where that one moved it.
    sp = partition()
    sp.acquire(A, log((0, 9), (10, 14)), 500, BATCH, 0, LOCK)
    ack(sp, A, 0, 9, AckType.ACCEPT)
    assert sp.start_offset == 10
    first = sp.state_to_write()
    assert (first.start_offset, first.delivery_complete_count) == (0, 10)
    assert first.runs == [
        Run(0, 9, RecordState.ACKNOWLEDGED, 1),
        Run(10, 14, RecordState.AVAILABLE, 1),
    ]
    # Acknowledged while the write is under way: not part of it, so kept for the next.
    ack(sp, A, 10, 11, AckType.ACCEPT)
    sp.written(first)
    second = sp.state_to_write()
    assert (second.start_offset, second.delivery_complete_count) == (10, 2)
    assert second.runs == [
        Run(10, 11, RecordState.ACKNOWLEDGED, 1),
        Run(12, 14, RecordState.AVAILABLE, 1),
    ]
    sp.written(second)
    assert sp.state_to_write().start_offset == 12
    # A state loaded from such a write is done up to where it says.
    loaded = SharePartition(0, first.runs, max_delivery=5, max_in_flight=2000)
    assert (loaded.start_offset, loaded.state_to_write().start_offset) == (10, 10)


def test_move_start_drops_what_the_log_no_longer_has() -> None:
    sp = partition()
    sp.acquire(A, log((0, 9)), 500, BATCH, 0, LOCK)
    sp.move_start(4)
    assert sp.start_offset == 4 and sp.runs[0].first == 4
    sp.move_start(2)
    assert sp.start_offset == 4


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["acquire", "ack", "expire", "release"]),
            st.sampled_from([A, B]),
            st.integers(0, 40),
            st.integers(0, 5),
            st.sampled_from(list(AckType)),
        ),
        max_size=40,
    )
)
def test_random_schedules_keep_the_runs_whole(
    steps: list[tuple[str, str, int, int, AckType]],
) -> None:
    """Whatever happens, the runs cover [start, fetch end) without a hole or an overlap, no
    run is done at the head, and a record is never held by two members."""
    sp = partition(max_delivery=3, max_in_flight=25)
    now = 0
    logged = [LogBatch(i * 5, i * 5 + 4) for i in range(10)]
    for action, member, offset, span, ack_type in steps:
        now += 1000
        if action == "acquire":
            start = sp.next_fetch_offset()
            sp.acquire(
                member, [b for b in logged if b.last_offset >= start], span + 1, BATCH, now, LOCK
            )
        elif action == "ack":
            try:
                sp.acknowledge(
                    member, [AckBatch(offset, offset + span, (int(ack_type),))], now, LOCK, True
                )
            except KafkaError:
                pass
        elif action == "expire":
            sp.expire_locks(now + offset * 1000)
        else:
            sp.release_member(member)
        runs = sp.runs
        expected = sp.start_offset
        for run in runs:
            assert run.first == expected and run.last >= run.first
            assert (run.member is not None) == (run.state is RecordState.ACQUIRED)
            expected = run.last + 1
        assert expected == sp.fetch_end
        assert not runs or runs[0].state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
