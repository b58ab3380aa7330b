"""KIP-1263 (Kafka 4.3): a consumer group computes a new target assignment at most once per
``consumer.assignment.interval.ms``; members keep reconciling towards the last target
meanwhile, less the topics they no longer subscribe to. Pure state machine, fake clock."""

from __future__ import annotations

import uuid

from kbroker.group.consumer_heartbeat import ConsumerGroupSettings
from kbroker.group.consumer_records import TARGET_ASSIGNMENT_METADATA, ConsumerGroupKey
from tests.group.test_consumer_heartbeat import Harness, T, _replayed, parts

T2 = uuid.UUID(int=11)


def paced(interval_ms: int) -> Harness:
    """A harness whose groups assign at most once per ``interval_ms``, except group "fast"."""
    return Harness(
        settings=lambda group_id: ConsumerGroupSettings(
            45_000, 5_000, 0 if group_id == "fast" else interval_ms
        )
    )


def assignments_written(h: Harness) -> int:
    return sum(
        1
        for key, _ in h.stored
        if isinstance(key, ConsumerGroupKey) and key.record == TARGET_ASSIGNMENT_METADATA
    )


def test_joins_within_the_interval_wait_for_one_assignment() -> None:
    h = paced(1_000)
    first = h.heartbeat("a", 0)
    # A group that never assigned assigns at once.
    assert first is not None and (first.member_epoch, parts(first)) == (1, {0, 1, 2, 3})
    h.now += 10
    second = h.heartbeat("b", 0)
    third = h.heartbeat("c", 0)
    # They join at the epoch of the last target, with nothing yet, as in Kafka.
    assert second is not None and (second.member_epoch, parts(second)) == (1, set())
    assert third is not None and (third.member_epoch, parts(third)) == (1, set())
    assert h.core.describe_consumer_group("g").state == "Assigning"
    h.now += 500
    held = h.heartbeat("a", 1)
    assert held is not None and (held.member_epoch, held.assignment) == (1, None)
    h.now += 490
    # The first heartbeat after the interval computes one target for both joins.
    due = h.heartbeat("a", 1)
    assert due is not None and due.member_epoch == 1 and len(parts(due) or ()) == 2
    assert assignments_written(h) == 2
    assert h.group().consumer.assignment_epoch == 3
    h.owners_are_unique()


def test_a_group_with_an_interval_of_zero_assigns_at_every_change() -> None:
    h = paced(60_000)
    h.heartbeat("a", 0, group="fast")
    second = h.heartbeat("b", 0, group="fast")
    assert second is not None and second.member_epoch == 2
    assert assignments_written(h) == 2


def test_a_stable_member_gives_up_a_topic_it_left_while_the_target_lags() -> None:
    h = paced(1_000)
    h.topics.table["t2"] = (T2, 2)
    joined = h.heartbeat("a", 0, topics=("t", "t2"))
    assert joined is not None and joined.assignment is not None
    assert set(joined.assignment) == {T, T2}
    h.now += 10
    # The subscription changes within the interval: no new target, but t2 is revoked now.
    narrowed = h.heartbeat("a", 1, topics=("t",))
    assert narrowed is not None and narrowed.member_epoch == 1
    assert narrowed.assignment is not None and set(narrowed.assignment) == {T}
    assert h.group().consumer.assignment_epoch == 1
    revoked = h.heartbeat("a", 1, owned={T: frozenset({0, 1, 2, 3})})
    assert revoked is not None and revoked.member_epoch == 1
    assert not h.group().consumer.members["a"].pending_revocation
    h.now += 1_000
    caught_up = h.heartbeat("a", 1)
    assert caught_up is not None and caught_up.member_epoch == 2
    assert h.group().consumer.targets["a"] == {T: frozenset({0, 1, 2, 3})}


def test_a_replayed_group_keeps_its_last_assignment_time() -> None:
    h = paced(1_000)
    h.heartbeat("a", 0)
    h.now += 100
    other = paced(1_000)
    other.now = h.now
    other.core.begin_load(0)
    other.core.complete_load(0, _replayed(h.stored))
    joined = other.heartbeat("b", 0)
    # 100 ms after the replayed group's last assignment: b waits for the interval.
    assert joined is not None and (joined.member_epoch, parts(joined)) == (1, set())
    other.now += 900
    due = other.heartbeat("b", 1)
    # The target is computed: b moves to its epoch and waits for a to release its half.
    assert due is not None and due.member_epoch == 2
    assert len(other.group().consumer.targets["b"][T]) == 2
