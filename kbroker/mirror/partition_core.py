"""One mirror partition's fetcher, pure: its state, its backoff and its truncation decisions.

A mirror partition copies a source cluster's partition into the local partition this broker
leads, batch for batch and at the same offsets. Its life, driven by the async shell
(kbroker/mirror/link.py) with an injected clock:

- CHECKING: before the first fetch (and after the source says our fetch offset is out of its
  range), ask the source, through OffsetForLeaderEpoch, where the epoch of our last batch ends
  in its log (KIP-101). The batches keep the source's partition leader epochs, so the same
  comparison a follower makes with its leader tells whether the source's log diverged from
  ours (an unclean leader election there, or a topic deleted and created again). An empty
  local log needs no check.
- FETCHING: Fetch from our log end offset, append what comes back unchanged.
- BACKING_OFF: after an error, wait (exponential backoff with a cap, as Kafka's clients do
  with retry.backoff.ms and retry.backoff.max.ms, KIP-580) and refresh the source's metadata
  first when the error says the leader moved.
- PAUSED: the operator paused the link (``kbroker mirrors pause``).
- DIVERGED: the source has no epoch history to compare with, or none at or below ours; the
  partition stops rather than guessing what to delete, and says so in ``describe``.

Out of range has the two meanings it has for a follower: our log ends before the source's
log start (retention or DeleteRecords there removed what we miss: start over, empty, at the
source's log start), or it runs past the source's end (check the divergence point again).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

UNDEFINED_EPOCH = -1


class MirrorState(enum.Enum):
    CHECKING = "checking"
    FETCHING = "fetching"
    BACKING_OFF = "backing-off"
    PAUSED = "paused"
    DIVERGED = "diverged"


@dataclass(frozen=True, slots=True)
class Backoff:
    initial_ms: float
    max_ms: float

    def delay_ms(self, failures: int) -> float:
        """The wait after the ``failures``-th consecutive failure (1-based)."""
        return min(self.max_ms, self.initial_ms * 2 ** max(0, failures - 1))


@dataclass(frozen=True, slots=True)
class Truncate:
    """Truncate the local log to ``offset`` (below its end) and check again."""

    offset: int


@dataclass(frozen=True, slots=True)
class StartOver:
    """Drop the local log and continue, empty, at the source's log start ``offset``."""

    offset: int


@dataclass(frozen=True, slots=True)
class Continue:
    """The logs agree up to our end: fetch from there."""


@dataclass(frozen=True, slots=True)
class Diverged:
    reason: str


Decision = Truncate | StartOver | Continue | Diverged


def check_divergence(
    *, requested_epoch: int, source_epoch: int, source_end_offset: int, log_end_offset: int
) -> Decision:
    """Where our log stands against the source's answer to OffsetForLeaderEpoch for the epoch
    of our last batch (``requested_epoch``): the source answers the greatest epoch it has at
    or below it and the offset where that epoch ends in its log.

    Both logs agree up to min(source end, our end): when the source's end is below ours the
    tail past it never was, or no longer is, in the source (it is truncated, and checked
    again with the epoch of the new last batch, so a lower epoch answered here converges as
    KIP-279 does). An undefined answer means the source lost the history we copied."""
    if source_epoch == UNDEFINED_EPOCH or source_end_offset < 0:
        return Diverged(f"the source has no leader epoch at or below {requested_epoch}")
    if source_end_offset < log_end_offset:
        return Truncate(source_end_offset)
    return Continue()


class MirrorPartitionCore:
    """The state of one mirror partition on the broker leading it locally."""

    def __init__(self, backoff: Backoff, now_ms: float, *, log_end_offset: int) -> None:
        self._backoff = backoff
        self.state = MirrorState.FETCHING if log_end_offset == 0 else MirrorState.CHECKING
        self._resume_state = self.state
        self.failures = 0
        self.retry_at_ms = now_ms
        self.needs_metadata = True
        self.last_error = ""
        self.source_high_watermark = -1
        self.log_end_offset = log_end_offset
        self.last_fetch_ms = -1.0
        # When a fetch last found nothing left to copy (-1: never).
        self.caught_up_ms = -1.0

    @property
    def lag(self) -> int:
        """Records (offsets) the source has committed that we have not copied; -1 unknown."""
        if self.source_high_watermark < 0:
            return -1
        return max(0, self.source_high_watermark - self.log_end_offset)

    def lag_ms(self, now_ms: float) -> float:
        """How long the mirror has been behind: 0 while caught up, else the time since a
        fetch last found it caught up; -1 when none has since this broker took the
        partition on (a first copy still under way)."""
        if self.lag == 0:
            return 0.0
        return max(0.0, now_ms - self.caught_up_ms) if self.caught_up_ms >= 0 else -1.0

    def wants_check(self, now_ms: float) -> bool:
        return self._due(now_ms) and self.state is MirrorState.CHECKING

    def wants_fetch(self, now_ms: float) -> bool:
        return self._due(now_ms) and self.state is MirrorState.FETCHING

    def _due(self, now_ms: float) -> bool:
        if self.state is MirrorState.BACKING_OFF and now_ms >= self.retry_at_ms:
            self.state = self._resume_state
        return self.state in (MirrorState.CHECKING, MirrorState.FETCHING)

    # Operator ----------------------------------------------------------------------------

    def pause(self) -> None:
        if self.state is not MirrorState.DIVERGED:
            if self.state is not MirrorState.PAUSED:
                self._resume_state = (
                    self._resume_state if self.state is MirrorState.BACKING_OFF else self.state
                )
            self.state = MirrorState.PAUSED

    def resume(self, now_ms: float) -> None:
        if self.state is MirrorState.PAUSED:
            self.state = self._resume_state
            self.retry_at_ms = now_ms

    # Source answers ----------------------------------------------------------------------

    def on_metadata(self) -> None:
        """The source's metadata was refreshed: its leaders are known again."""
        self.needs_metadata = False

    def on_checked(self, decision: Decision, now_ms: float) -> None:
        """The shell applied ``decision`` to the log (truncated or started over)."""
        self._succeeded()
        if isinstance(decision, Diverged):
            self.state = MirrorState.DIVERGED
            self.last_error = decision.reason
        elif isinstance(decision, Truncate):
            # Check again with the epoch of the new last batch.
            self.state = MirrorState.CHECKING
        else:
            self.state = MirrorState.FETCHING
        self._resume_state = self.state
        self.retry_at_ms = now_ms

    def on_fetched(self, log_end_offset: int, source_high_watermark: int, now_ms: float) -> None:
        self._succeeded()
        self.log_end_offset = log_end_offset
        self.source_high_watermark = source_high_watermark
        self.last_fetch_ms = now_ms
        if self.lag == 0:
            self.caught_up_ms = now_ms

    def on_out_of_range(self, source_log_start: int, now_ms: float) -> Decision:
        """The source refused our fetch offset (OFFSET_OUT_OF_RANGE)."""
        if source_log_start > self.log_end_offset:
            return StartOver(source_log_start)
        self.state = self._resume_state = MirrorState.CHECKING
        self.retry_at_ms = now_ms
        return Continue()

    def on_started_over(self, offset: int, now_ms: float) -> None:
        self.log_end_offset = offset
        self.state = self._resume_state = MirrorState.FETCHING
        self.retry_at_ms = now_ms

    def on_error(self, error: str, now_ms: float, *, leader_moved: bool) -> None:
        """A connection error or a source error for this partition: back off, and refresh
        the source's metadata before the next attempt when the leader may have moved."""
        if self.state in (MirrorState.PAUSED, MirrorState.DIVERGED):
            return
        self.failures += 1
        self.last_error = error
        self.needs_metadata = self.needs_metadata or leader_moved
        if self.state is not MirrorState.BACKING_OFF:
            self._resume_state = self.state
        self.state = MirrorState.BACKING_OFF
        self.retry_at_ms = now_ms + self._backoff.delay_ms(self.failures)

    def _succeeded(self) -> None:
        self.failures = 0
        self.last_error = ""
