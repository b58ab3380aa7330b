"""bench/share_warmup.py: the share benchmark measures only once no consumer can still lose
partitions to a member that joins late (issue 26: the Java client fails the acknowledgements
of records from partitions taken away from it with NotLeaderOrFollowerException), and no
warm-up record is still locked when it starts."""

from __future__ import annotations

from bench.share_warmup import HEARTBEAT_INTERVAL_S, WarmUp


def test_not_settled_while_a_consumer_has_no_records_of_its_own() -> None:
    # The first member alone acknowledged a record of every partition: the other three have
    # not joined yet, and joining takes partitions from it.
    warm_up = WarmUp(partitions=8)
    assert not warm_up.settled([8, 0, 0, 0], now=0.0, lag=0)
    assert not warm_up.settled([12, 3, 0, 2], now=60.0, lag=0)


def test_settles_two_heartbeat_intervals_after_the_last_consumer_joined() -> None:
    warm_up = WarmUp(partitions=8)
    assert not warm_up.settled([10, 2, 1, 1], now=100.0, lag=0)
    # A member that lost partitions hears of it at its next heartbeat.
    assert not warm_up.settled([12, 4, 2, 2], now=100.0 + HEARTBEAT_INTERVAL_S, lag=0)
    assert warm_up.settled([14, 6, 4, 4], now=100.0 + 2 * HEARTBEAT_INTERVAL_S, lag=0)


def test_needs_a_record_per_partition_acknowledged() -> None:
    warm_up = WarmUp(partitions=8)
    assert not warm_up.settled([1, 1, 1, 1], now=0.0, lag=0)
    assert not warm_up.settled([1, 1, 1, 1], now=100.0, lag=0)


def test_more_consumers_than_partitions_share_them() -> None:
    # One partition, eight consumers: a warm-up record reaches one of them only.
    warm_up = WarmUp(partitions=1)
    assert not warm_up.settled([0] * 8, now=0.0, lag=0)
    assert not warm_up.settled([1] + [0] * 7, now=1.0, lag=0)
    assert warm_up.settled([1] + [0] * 7, now=1.0 + 2 * HEARTBEAT_INTERVAL_S, lag=0)


def test_waits_for_every_warm_up_record_to_be_acknowledged() -> None:
    # 8 partitions x 8 consumers: a warm-up record acquired by a fetch that crossed its
    # partition's move cannot be acknowledged and stays locked for 30 s; the measurement
    # would run into it (the partition's in-flight limit).
    warm_up = WarmUp(partitions=8)
    joined = [2] * 8
    assert not warm_up.settled(joined, now=0.0, lag=1)
    assert not warm_up.settled(joined, now=2 * HEARTBEAT_INTERVAL_S, lag=1)
    assert not warm_up.settled(joined, now=30.0, lag=None)
    assert warm_up.settled(joined, now=31.0, lag=0)
