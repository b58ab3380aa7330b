"""Follower truncation points (KIP-101 / KIP-279)."""

from __future__ import annotations

from replication.epochs import truncation_offset


def local(entries: dict[int, tuple[int, int]]):  # type: ignore[no-untyped-def]
    return lambda epoch: entries.get(epoch, (-1, -1))


def test_same_epoch_truncates_to_the_leader_end() -> None:
    offset = truncation_offset(
        requested_epoch=3,
        leader_epoch=3,
        leader_end_offset=10,
        local_end_for=local({}),
        log_end_offset=15,
        high_watermark=8,
    )
    assert offset == 10


def test_never_beyond_the_local_end() -> None:
    offset = truncation_offset(
        requested_epoch=3,
        leader_epoch=3,
        leader_end_offset=20,
        local_end_for=local({}),
        log_end_offset=15,
        high_watermark=8,
    )
    assert offset == 15


def test_an_epoch_the_leader_never_had_uses_the_smaller_end() -> None:
    # The follower led epoch 4 (never replicated); the leader's history stops at epoch 2,
    # which ends at 12 in the leader's log and at 11 in the follower's.
    offset = truncation_offset(
        requested_epoch=4,
        leader_epoch=2,
        leader_end_offset=12,
        local_end_for=local({2: (2, 11)}),
        log_end_offset=20,
        high_watermark=5,
    )
    assert offset == 11


def test_undefined_answer_falls_back_to_the_high_watermark() -> None:
    offset = truncation_offset(
        requested_epoch=4,
        leader_epoch=-1,
        leader_end_offset=-1,
        local_end_for=local({}),
        log_end_offset=20,
        high_watermark=5,
    )
    assert offset == 5
