"""The fetch rate cap of a mirror link on one broker (``kbroker.mirror.fetch.max.bytes.per.second``
in the link's record, kbroker/mirror/link_configs.py).

Like Kafka's replication throttles (``follower.replication.throttled.rate``, KIP-73), the
cap holds per broker: every fetcher of the link's topics on a broker shares one budget, so a
link whose partitions are led by three brokers copies at up to three times the cap. Pacing:
each fetch answer's bytes push the time the next fetch may be sent by bytes / rate, so over
any stretch the link copies at most the cap plus one fetch; each fetch asks for at most a
second's worth (at least one batch still comes back, as Kafka answers min-one-batch). A
change of the rate applies from the next fetch: the cap is dynamic.
"""

from __future__ import annotations

# A fetch never asks for less than this, so a very low cap still moves whole small batches.
MIN_FETCH_BYTES = 1024


class LinkThrottle:
    def __init__(self, rate: int | None = None) -> None:
        self.rate = rate
        self._next_at = 0.0

    def set_rate(self, rate: int | None) -> None:
        if rate != self.rate:
            self.rate = rate
            # What was paced at the old rate is not carried over.
            self._next_at = 0.0

    def delay(self, now: float) -> float:
        """Seconds to wait before the next fetch may be sent."""
        return 0.0 if self.rate is None else max(0.0, self._next_at - now)

    def fetch_max_bytes(self, wanted: int) -> int:
        """What one fetch may ask for: ``wanted``, or a second's worth of the cap."""
        return wanted if self.rate is None else max(MIN_FETCH_BYTES, min(wanted, self.rate))

    def record(self, size: int, now: float) -> None:
        """``size`` bytes were appended from a fetch answer at ``now``."""
        if self.rate is not None:
            self._next_at = max(self._next_at, now) + size / self.rate
