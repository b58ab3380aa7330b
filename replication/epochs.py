"""Where a follower truncates before fetching from a new leader (KIP-101, KIP-279), pure.

The follower asks the leader, through OffsetForLeaderEpoch, where the follower's latest epoch
ends in the leader's log. The leader answers the greatest epoch it knows that is not above the
one asked for, and that epoch's end offset in its log:

- same epoch: both logs agree up to the leader's end offset for it;
- a lower epoch: the follower's log holds an epoch the leader never had; the logs agree up to
  where that lower epoch ends in both logs (KIP-279 takes the smaller of the two ends);
- undefined (-1): the leader has no epoch history to compare with (an old or empty log), so
  the follower keeps only what it knows to be committed, its high watermark (KIP-101's
  fallback).

The result never exceeds the follower's own log end offset.
"""

from __future__ import annotations

from collections.abc import Callable

UNDEFINED_EPOCH = -1


def truncation_offset(
    *,
    requested_epoch: int,
    leader_epoch: int,
    leader_end_offset: int,
    local_end_for: Callable[[int], tuple[int, int]],
    log_end_offset: int,
    high_watermark: int,
) -> int:
    """The offset the follower truncates its log to; ``local_end_for(epoch)`` is the
    follower's own (epoch, end offset) lookup."""
    if leader_epoch == UNDEFINED_EPOCH or leader_end_offset < 0:
        return min(high_watermark, log_end_offset)
    target = leader_end_offset
    if leader_epoch < requested_epoch:
        local_epoch, local_end = local_end_for(leader_epoch)
        if local_epoch == UNDEFINED_EPOCH or local_end < 0:
            return min(high_watermark, log_end_offset, target)
        target = min(target, local_end)
    return min(target, log_end_offset)
