"""Event-loop stalls: when the broker's one asyncio thread runs late, by how much, and where.

Every request waits while a callback runs too long (a big decompression, a scan of many
partitions, a synchronous write), so the tail of produce and fetch latency is the event
loop's stalls. The loop beats: a timer re-armed every ``period``; a beat that runs more than
``threshold`` after it was due is a stall of that lateness. A watchdog thread looks at the
beat that is due: once it is overdue by the threshold, the watchdog takes the loop thread's
stack (``sys._current_frames``) while the stall is still going on, so the stall is reported
with the code that caused it rather than with the code that ran after it (the watchdog looks
every ``WATCH_INTERVAL`` while the loop keeps time, so shorter stalls may go without a
place). Python switches threads every few milliseconds (``sys.getswitchinterval``), so the
watchdog gets to run while the loop is busy in Python code; a stall inside one long C call is
sampled when it returns, and is reported without a place when the beat came first.

``StallTracker`` decides (no threads, no clock); ``LoopStallMonitor`` runs the beat and the
watchdog, logs stalls (``StallReports``: the first of each ``LOG_EVERY`` seconds and any
longer one, with the count of the others) and exposes them as metrics. The threshold is
``event.loop.stall.threshold.ms`` (ours; -1 turns the watch off).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from kbroker.metrics import Exposition, Histogram

log = logging.getLogger(__name__)

# Stall durations, seconds: from just over a typical threshold to a loop frozen for minutes.
STALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LOG_EVERY = 10.0
# Stalls kept for a look from a debugger or a test.
RECENT_KEPT = 64
# How often the watchdog looks while the loop keeps time (seconds). A stall shorter than this
# may end before the watchdog sees it: it is counted, and reported without its place.
WATCH_INTERVAL = 0.25
# Places named for one stall: the first few causes are what an operator acts on.
PLACES_KEPT = 3
# Where a stall happened when the loop was found waiting in its selector, its timer due.
IDLE = "no callback (the loop was waiting in its selector: the process waited for a CPU)"
# Frames of the stalled stack named in the report, innermost first.
FRAMES_SHOWN = 4
_REPO = str(Path(__file__).resolve().parent.parent) + "/"


@dataclass(frozen=True, slots=True)
class Stall:
    """The loop ran a beat ``seconds`` late; ``where``: the code it was running meanwhile
    (None: none found, the loop was waiting for a CPU or the stall ended before a sample)."""

    seconds: float
    where: str | None


class StallTracker:
    """The decisions: which beat is due, whether the watchdog should sample now, and whether
    a beat that ran was a stall. Beats are numbered, so a sample the watchdog took for a beat
    that has run since is dropped rather than given to the next one. A stall may have several
    causes one after the other (a long callback, then another): each place a sample finds is
    kept, up to ``PLACES_KEPT``."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._beat = 0
        self._due = 0.0
        self._places: list[str] = []

    def expect(self, due: float) -> None:
        """The loop armed its next beat for ``due``."""
        self._beat += 1
        self._due = due
        self._places = []

    def should_sample(self, now: float) -> int | None:
        """The number of the beat to sample the stack for (it is overdue by the threshold),
        else None."""
        if now - self._due > self.threshold and len(self._places) < PLACES_KEPT:
            return self._beat
        return None

    def sampled(self, beat: int, where: str) -> None:
        """A sample for ``beat``: ``where`` the loop was, or ``IDLE`` (a loop that waits in
        its selector past a due timer runs nothing: the process is waiting for a CPU)."""
        if beat == self._beat and where != IDLE and where not in self._places:
            self._places.append(where)

    def ran(self, now: float) -> Stall | None:
        """The armed beat ran at ``now``: a stall if it ran past the threshold."""
        late = now - self._due
        if late <= self.threshold:
            return None
        return Stall(late, "; then ".join(self._places) or None)


class StallReports:
    """Which stalls get a log line: the first in each ``every`` seconds, and any longer than
    every one reported in that window (so a long stall is never hidden behind a short one),
    with the count of the others."""

    def __init__(self, every: float = LOG_EVERY) -> None:
        self._every = every
        self._window_start = float("-inf")
        self._window_longest = 0.0
        self.unreported = 0

    def should_report(self, stall: Stall, now: float) -> bool:
        if now - self._window_start >= self._every:
            self._window_start = now
            self._window_longest = 0.0
        if stall.seconds <= self._window_longest:
            self.unreported += 1
            return False
        self._window_longest = stall.seconds
        return True


def describe_stack(frame: FrameType | None) -> str:
    """The innermost frames of a stack as ``path:line function``, innermost first; ``IDLE``
    when the loop is waiting in its selector."""
    caller = frame.f_back if frame is not None else None
    if caller is not None and caller.f_code.co_name == "_run_once":
        return IDLE
    parts = []
    while frame is not None and len(parts) < FRAMES_SHOWN:
        path = frame.f_code.co_filename.removeprefix(_REPO)
        parts.append(f"{path}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(parts) or "?"


class LoopStallMonitor:
    """The beat on the running loop and the watchdog thread; started and stopped with the
    broker."""

    def __init__(self, threshold_ms: int) -> None:
        self.enabled = threshold_ms >= 0
        self._tracker = StallTracker(max(threshold_ms, 1) / 1000)
        # Beats and watchdog checks at half the threshold keep the lateness measured within
        # half a threshold, at a cost of a few callbacks a second.
        self._period = max(self._tracker.threshold / 2, 0.005)
        self._watch_interval = max(self._tracker.threshold, WATCH_INTERVAL)
        self.stalls = Histogram(STALL_BUCKETS)
        self.longest = 0.0
        self.recent: deque[Stall] = deque(maxlen=RECENT_KEPT)
        self._reports = StallReports()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._loop_thread = 0
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    def start(self) -> None:
        if not self.enabled:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._arm(self._loop.time())
        self._watchdog = threading.Thread(target=self._watch, name="loop-stall-watchdog")
        self._watchdog.daemon = True
        self._watchdog.start()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join()
            self._watchdog = None

    def _arm(self, now: float) -> None:
        assert self._loop is not None
        due = now + self._period
        self._tracker.expect(due)
        self._handle = self._loop.call_at(due, self._beat)

    def _beat(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        stall = self._tracker.ran(now)
        if stall is not None:
            self._record(stall, now)
        self._arm(now)

    def _record(self, stall: Stall, now: float) -> None:
        self.stalls.observe(stall.seconds)
        self.longest = max(self.longest, stall.seconds)
        self.recent.append(stall)
        if not self._reports.should_report(stall, now):
            return
        unreported, self._reports.unreported = self._reports.unreported, 0
        log.warning(
            "event loop stalled %.0f ms in %s%s",
            stall.seconds * 1000,
            stall.where or IDLE,
            f" ({unreported} shorter stalls not reported)" if unreported else "",
        )

    def _watch(self) -> None:
        # Each wake-up takes the GIL from the loop's thread, which costs the loop far more
        # than the check itself (a forced switch, then waiting to be scheduled again): while
        # the loop keeps time the watchdog looks only every WATCH_INTERVAL; once it finds a
        # stall, it samples every period until the stall ends, to find each of its causes.
        # The loop's clock is time.monotonic (BaseEventLoop.time).
        interval = self._watch_interval
        while not self._stop.wait(interval):
            beat = self._tracker.should_sample(time.monotonic())
            if beat is None:
                interval = self._watch_interval
                continue
            frame = sys._current_frames().get(self._loop_thread)
            self._tracker.sampled(beat, describe_stack(frame))
            interval = self._period

    def expose(self, out: Exposition) -> None:
        if not self.enabled:
            return
        out.family(
            "kbroker_event_loop_stall_seconds",
            "histogram",
            "Event-loop stalls longer than event.loop.stall.threshold.ms, by length.",
        )
        self.stalls.expose(out, "kbroker_event_loop_stall_seconds", ())
        out.family(
            "kbroker_event_loop_longest_stall_seconds", "gauge", "The longest stall since start."
        )
        out.sample("kbroker_event_loop_longest_stall_seconds", (), self.longest)
