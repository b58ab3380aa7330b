"""Whether a partial request arrives fast enough (issue 29), sans-IO.

A client that sends a request a byte at a time holds its connection, its buffer and, for a
large request, a share of the request-memory pool, for as long as request.read.timeout.ms
allows (30 s). Real clients write a request at once and the network delivers it at link
speed; so a partial request that, over the last ``window_seconds`` of being read, gained
fewer than ``min_bytes_per_second`` a second is dropped. Only time the broker spent
reading counts: a connection it stopped reading (for want of memory, or to throttle it) is
not the client's fault.

The meter is fed once per sweep of the listener (about a second) with the bytes of the
partial request received so far.
"""

from __future__ import annotations

import collections


class ProgressMeter:
    def __init__(self, min_bytes_per_second: float, window_seconds: float) -> None:
        self._rate = min_bytes_per_second
        self._window = window_seconds
        # (reading time, bytes received) at each observation of the current request.
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self._reading_time = 0.0
        self._last_seen: float | None = None

    def restart(self) -> None:
        """The request completed: the next one is measured afresh."""
        self._samples.clear()
        self._reading_time = 0.0
        self._last_seen = None

    def too_slow(self, now: float, received: int, reading: bool) -> bool:
        """Observe the partial request (``received`` bytes so far, 0: none) at ``now``;
        True when it must be dropped."""
        samples = self._samples
        if received == 0 or (samples and received < samples[-1][1]):
            self.restart()
            if received == 0:
                return False
        last, self._last_seen = self._last_seen, now
        if not reading:
            # The time until the next observation does not count.
            self._last_seen = None
            return False
        if last is not None:
            self._reading_time += now - last
        clock = self._reading_time
        samples.append((clock, received))
        while len(samples) > 1 and samples[1][0] <= clock - self._window:
            samples.popleft()
        start, start_received = samples[0]
        span = clock - start
        return span >= self._window and received - start_received < self._rate * span
