"""Fair use of the request-memory budget (``queued.max.request.bytes``), sans-IO.

A request buffer grows as its bytes arrive (wire.frame.FrameDecoder), each step reserved
from the broker-wide pool first. Without a rule on who may take the pool, a few hundred
connections that each announce a 100 MB request and send part of it take all of it, and
no one else's request can arrive until they leave (issue 29). The rule:

- A request announcing at most ``small_request_bytes`` (the common case: metadata,
  fetches, produce batches) only needs room in the pool, unless its connection has not
  authenticated yet (on a SASL listener): anyone can send those, so they count as large.
- A larger request, while it has not fully arrived, takes from the part of the pool
  outside a reserve (``reserve_fraction`` of it), so partial large requests can never
  take the memory the small ones need; within that part each address holding partial
  large requests gets an equal share, and each of its connections an equal part of the
  address's share. A connection at its share stops being read (others wait, or it waits)
  until a partial large request somewhere completes or goes away.

Memory already granted is never taken back: a request that has arrived in part would have
to be dropped for it. Requests that stop progressing are dropped by the read-rate rule
instead (request_progress.py).
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Hashable


class Verdict(enum.Enum):
    GRANTED = "granted"
    # The pool has no room: wait for any release.
    POOL_FULL = "pool full"
    # The connection, or its address, holds its share of the partial large requests' part:
    # wait until a partial large request releases memory.
    OVER_SHARE = "over share"


class FairShare:
    """Who holds how much of the pool in partial large requests; answers whether one more
    growth step may be taken. ``capacity`` None means an unbounded pool."""

    def __init__(
        self,
        capacity: int | None,
        small_request_bytes: int,
        reserve_fraction: float = 0.25,
    ) -> None:
        self.capacity = capacity
        self.small_request_bytes = small_request_bytes
        self.large_budget = None if capacity is None else int(capacity * (1 - reserve_fraction))
        self.large_held = 0
        self._held: dict[Hashable, tuple[str, int]] = {}
        self._by_address: collections.Counter[str] = collections.Counter()
        self._connections_by_address: collections.Counter[str] = collections.Counter()

    def is_large(self, announced: int, trusted: bool = True) -> bool:
        """Whether a partial request of ``announced`` bytes takes from the shared part."""
        return announced > self.small_request_bytes or not trusted

    def decide(
        self,
        connection: Hashable,
        address: str,
        announced: int,
        extra: int,
        pool_used: int,
        trusted: bool = True,
    ) -> Verdict:
        """May ``connection`` (from ``address``), whose request announces ``announced``
        bytes, reserve ``extra`` more now that the pool has ``pool_used`` in use? An
        untrusted connection is one that has not authenticated yet."""
        capacity = self.capacity
        if capacity is None:
            return Verdict.GRANTED
        if pool_used + extra > capacity:
            return Verdict.POOL_FULL
        if not self.is_large(announced, trusted):
            return Verdict.GRANTED
        assert self.large_budget is not None
        if self.large_held + extra > self.large_budget:
            return Verdict.OVER_SHARE
        held = self._held.get(connection, (address, 0))[1]
        newcomer = held == 0
        addresses = len(self._by_address) + (address not in self._by_address)
        address_share = self.large_budget // addresses
        if self._by_address[address] + extra > address_share:
            return Verdict.OVER_SHARE
        peers = self._connections_by_address[address] + newcomer
        if held + extra > address_share // peers:
            return Verdict.OVER_SHARE
        return Verdict.GRANTED

    def hold(self, connection: Hashable, address: str, nbytes: int) -> None:
        """``connection`` now holds ``nbytes`` in a partial large request (0: none)."""
        _, before = self._held.pop(connection, (address, 0))
        self.large_held += nbytes - before
        if before:
            self._by_address[address] -= before
            self._connections_by_address[address] -= 1
        if nbytes:
            self._held[connection] = (address, nbytes)
            self._by_address[address] += nbytes
            self._connections_by_address[address] += 1
        if not self._connections_by_address[address]:
            del self._connections_by_address[address]
            del self._by_address[address]

    def held_by(self, connection: Hashable) -> int:
        return self._held.get(connection, ("", 0))[1]

    @property
    def holders(self) -> int:
        return len(self._held)
