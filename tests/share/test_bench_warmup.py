"""bench/share_warmup.py: the share benchmark measures only once no consumer can still lose
partitions to a member that joins late (issue 26: the Java client fails the acknowledgements
of records from partitions taken away from it with NotLeaderOrFollowerException)."""

from __future__ import annotations

from bench.share_warmup import HEARTBEAT_INTERVAL_S, WarmUp


def test_not_settled_while_a_consumer_has_no_records_of_its_own() -> None:
    # The first member alone acknowledged a record of every partition: the other three have
    # not joined yet, and joining takes partitions from it.
    warm_up = WarmUp(partitions=8)
    assert not warm_up.settled([8, 0, 0, 0], now=0.0)
    assert not warm_up.settled([12, 3, 0, 2], now=60.0)


def test_settles_two_heartbeat_intervals_after_the_last_consumer_joined() -> None:
    warm_up = WarmUp(partitions=8)
    assert not warm_up.settled([10, 2, 1, 1], now=100.0)
    # A member that lost partitions hears of it at its next heartbeat.
    assert not warm_up.settled([12, 4, 2, 2], now=100.0 + HEARTBEAT_INTERVAL_S)
    assert warm_up.settled([14, 6, 4, 4], now=100.0 + 2 * HEARTBEAT_INTERVAL_S)


def test_needs_a_record_per_partition_acknowledged() -> None:
    warm_up = WarmUp(partitions=8)
    assert not warm_up.settled([1, 1, 1, 1], now=0.0)
    assert not warm_up.settled([1, 1, 1, 1], now=100.0)


def test_more_consumers_than_partitions_share_them() -> None:
    # One partition, eight consumers: a warm-up record reaches one of them only.
    warm_up = WarmUp(partitions=1)
    assert not warm_up.settled([0] * 8, now=0.0)
    assert not warm_up.settled([1] + [0] * 7, now=1.0)
    assert warm_up.settled([1] + [0] * 7, now=1.0 + 2 * HEARTBEAT_INTERVAL_S)
