"""A leader's view of its followers: high watermark and ISR changes, pure (DESIGN rule 3).

Driven by events with explicit times (milliseconds); nothing here reads a clock or does IO.

- The high watermark is the minimum log end offset over the ISR (the leader's own log end
  offset included) and never goes down. A follower whose log end offset is not known yet
  (just after an election) holds it back until it fetches or leaves the ISR.
- A follower is caught up at a fetch when its fetch offset reaches the leader's log end
  offset; when it only reaches the log end offset the leader had at the follower's previous
  fetch, it was caught up at that previous fetch (Kafka's lastCaughtUpTime rule).
- Shrink: ISR followers not caught up within replica.lag.time.max.ms.
- Expand: a follower outside the ISR whose log end offset reached the high watermark and
  the start of the leader's current epoch (so it holds every record of this epoch the ISR
  may have acknowledged).
- ISR changes are only proposed here; the caller writes them conditionally and applies them
  with ``set_isr`` once written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

UNKNOWN = -1


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = UNKNOWN
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    leader_leo_at_last_fetch: int = UNKNOWN


class LeaderIsr:
    """ISR and high-watermark bookkeeping of one partition this broker leads."""

    def __init__(
        self,
        me: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        high_watermark: int,
        epoch_start_offset: int,
        now_ms: float,
    ) -> None:
        self.me = me
        self.isr: tuple[int, ...] = tuple(isr)
        self.high_watermark = high_watermark
        self.epoch_start_offset = epoch_start_offset
        # A new leader gives every follower a full lag period before judging it.
        self.followers = {
            r: FollowerProgress(last_caught_up_ms=now_ms) for r in replicas if r != me
        }

    def set_replicas(self, replicas: Iterable[int], now_ms: float) -> None:
        wanted = {r for r in replicas if r != self.me}
        for r in list(self.followers):
            if r not in wanted:
                del self.followers[r]
        for r in wanted:
            self.followers.setdefault(r, FollowerProgress(last_caught_up_ms=now_ms))

    def set_isr(self, isr: Iterable[int]) -> None:
        self.isr = tuple(isr)

    def on_follower_fetch(
        self, replica: int, fetch_offset: int, leader_leo: int, now_ms: float
    ) -> None:
        progress = self.followers.get(replica)
        if progress is None:
            return
        if fetch_offset >= leader_leo:
            progress.last_caught_up_ms = now_ms
        elif fetch_offset >= progress.leader_leo_at_last_fetch >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        progress.leader_leo_at_last_fetch = leader_leo

    def update_high_watermark(self, leader_leo: int) -> bool:
        """Recompute the high watermark; True when it moved."""
        ends = [leader_leo]
        for r in self.isr:
            if r == self.me:
                continue
            progress = self.followers.get(r)
            ends.append(progress.log_end_offset if progress is not None else UNKNOWN)
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def shrink_candidates(self, now_ms: float, lag_max_ms: float) -> set[int]:
        """ISR followers that have not been caught up for longer than ``lag_max_ms``."""
        out: set[int] = set()
        for r in self.isr:
            progress = self.followers.get(r)
            if r != self.me and progress is not None:
                if now_ms - progress.last_caught_up_ms > lag_max_ms:
                    out.add(r)
        return out

    def expand_candidates(self) -> set[int]:
        """Followers outside the ISR that have caught up with the committed records."""
        threshold = max(self.high_watermark, self.epoch_start_offset)
        return {
            r
            for r, progress in self.followers.items()
            if r not in self.isr and progress.log_end_offset >= threshold
        }
