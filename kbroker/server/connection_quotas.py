"""Connection limits (KIP-402, KIP-612): the pure bookkeeping, no sockets.

Kafka's rules, which the listener's accept loop (listener.py) follows:

- ``max.connections`` (broker-wide) and ``listener.name.<l>.max.connections``: when a
  listener is at its limit, or the broker is, the listener stops accepting until a
  connection closes; clients wait in the kernel's backlog. The inter-broker listener is
  exempt from the broker-wide limit, so replication keeps working when clients use it up.
- ``max.connection.creation.rate`` (broker-wide) and
  ``listener.name.<l>.max.connection.creation.rate``: accepting is delayed so that no more
  connections are created per second than the rate, over a one-second sliding window.
- ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``: a connection past
  its address's limit is accepted and closed at once.
- The ``connection_creation_rate`` client quota of an IP entity (or the default IP): a
  connection past the address's rate is accepted, and closed after the delay that brings
  the rate back to the quota (KIP-612), without being served.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    max_connections: int
    max_creation_rate: int
    # The inter-broker listener is exempt from the broker-wide max.connections.
    inter_broker: bool = False


@dataclass(frozen=True, slots=True)
class ConnectionLimitsConfig:
    max_connections: int
    max_creation_rate: int
    max_per_ip: int
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    listeners: dict[str, ListenerLimits] = field(default_factory=dict)


RATE_WINDOW_SECONDS = 1.0
MAX_TRACKED_ADDRESSES = 10_000


class ConnectionQuotas:
    """Counts connections by listener and address and answers the accept loop's
    questions; times are seconds from any monotonic clock."""

    def __init__(
        self,
        config: ConnectionLimitsConfig,
        ip_rate: Callable[[str], float | None] = lambda ip: None,
    ) -> None:
        self.config = config
        # The connection_creation_rate quota of an address (client quotas), if any.
        self._ip_rate = ip_rate
        self.total = 0
        self.by_listener: collections.Counter[str] = collections.Counter()
        self.by_ip: collections.Counter[str] = collections.Counter()
        self._created: dict[str | None, collections.deque[float]] = {}

    def _listener(self, name: str) -> ListenerLimits:
        return self.config.listeners.get(
            name, ListenerLimits(self.config.max_connections, self.config.max_creation_rate)
        )

    def slot_available(self, listener: str) -> bool:
        """May ``listener`` accept another connection now?"""
        limits = self._listener(listener)
        if self.by_listener[listener] >= limits.max_connections:
            return False
        return limits.inter_broker or self.total < self.config.max_connections

    def creation_delay(self, listener: str, now: float) -> float:
        """Seconds to wait before ``listener`` may accept, by the broker's and the
        listener's creation rates; 0 when it may accept now."""
        delay = self._delay(None, self.config.max_creation_rate, now)
        return max(delay, self._delay(listener, self._listener(listener).max_creation_rate, now))

    def _delay(self, key: str | None, rate: int, now: float) -> float:
        window = self._created.setdefault(key, collections.deque())
        while window and window[0] <= now - RATE_WINDOW_SECONDS:
            window.popleft()

        if len(window) < rate:
            return 0.0
        return window[len(window) - rate] + RATE_WINDOW_SECONDS - now

    def ip_throttle(self, ip: str, now: float) -> float:
        """Seconds to hold a new connection from `ip` before closing it, 0 to serve it; a
        served one counts towards the address's creation rate."""
        rate = self._ip_rate(ip)
        if rate is None:
            return 0.0
        key = f"ip:{ip}"
        if len(self._created) > MAX_TRACKED_ADDRESSES:
            # Forget the addresses that created nothing in the last window.
            for old in [k for k, w in self._created.items() if k and (not w or w[-1] <= now - 1)]:
                del self._created[old]
        delay = self._delay(key, max(1, int(rate)), now)
        if delay == 0:
            self._created[key].append(now)
        return delay

    def limit_for_ip(self, ip: str) -> int:
        return self.config.per_ip_overrides.get(ip, self.config.max_per_ip)

    def open(self, listener: str, ip: str, now: float) -> bool:
        """Count a connection just accepted; False (nothing counted) when its address is
        at its limit, and the connection must be closed."""
        if self.by_ip[ip] >= self.limit_for_ip(ip):
            return False
        self.total += 1
        self.by_listener[listener] += 1
        self.by_ip[ip] += 1
        for key in (None, listener):
            self._created.setdefault(key, collections.deque()).append(now)
        return True

    def close(self, listener: str, ip: str) -> None:
        self.total -= 1
        self.by_listener[listener] -= 1
        self.by_ip[ip] -= 1
        if not self.by_ip[ip]:
            del self.by_ip[ip]
