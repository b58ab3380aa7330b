"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599): the pure part, no IO.

Quotas are set per entity: a user, a client id, both, or the default of either
(``None`` names the default entity, ``<default>`` in ZooKeeper), with keys
``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s), ``request_percentage``
(percent of one request thread's time), ``controller_mutation_rate`` (partitions/s).

A request from user U with client id C is governed by the first entity that has the
quota, in Kafka's order (its DefaultQuotaCallback):

1. user U, client C        2. user U, client <default>       3. user U
4. user <default>, client C  5. user <default>, client <default>  6. user <default>
7. client C                8. client <default>

The usage is metered per matched entity with the default names filled in by U and C, so
e.g. a user quota is shared by all the user's client ids. Usage is a rate over
``quota.window.num`` samples of ``quota.window.size.seconds`` each, measured as Kafka's
Rate does (the elapsed time is at least all samples but one); past the quota, the throttle
time is (rate - quota) / quota x that elapsed time, at most the whole window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# Which keys an entity of a given set of types may have (Kafka's QuotaConfigs).
CLIENT_KEYS = frozenset(
    {PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE}
)
IP_KEYS = frozenset({CONNECTION_CREATION_RATE})
# Kafka's quota configs of type LONG or INT: whole numbers only; the others are DOUBLE.
WHOLE_NUMBER_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONNECTION_CREATION_RATE})

# An entity: sorted (type, name) pairs; a name of None is that type's default entity.
QuotaEntity = tuple[tuple[str, str | None], ...]
QuotaTable = Mapping[QuotaEntity, Mapping[str, float]]


def entity(user: str | None | bool = False, client_id: str | None | bool = False) -> QuotaEntity:
    """An entity of a user and/or client id; False leaves the type out, None is default."""
    parts: list[tuple[str, str | None]] = []
    if user is not False:
        parts.append((USER, user if isinstance(user, str) else None))
    if client_id is not False:
        parts.append((CLIENT_ID, client_id if isinstance(client_id, str) else None))
    return tuple(sorted(parts))


def valid_keys(key: QuotaEntity) -> frozenset[str]:
    types = {t for t, _ in key}
    if types == {IP}:
        return IP_KEYS
    if IP in types or not types:
        return frozenset()
    return CLIENT_KEYS


def _precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, QuotaEntity]]:
    """(entity to look up, entity to meter) in Kafka's order."""
    return [
        (entity(user, client_id), entity(user, client_id)),
        (entity(user, None), entity(user, client_id)),
        (entity(user), entity(user)),
        (entity(None, client_id), entity(user, client_id)),
        (entity(None, None), entity(user, client_id)),
        (entity(None), entity(user)),
        (entity(client_id=client_id), entity(client_id=client_id)),
        (entity(client_id=None), entity(client_id=client_id)),
    ]


class SampledRate:
    """Kafka's Rate over SampledStat: `samples` windows of `window` seconds."""

    def __init__(self, samples: int, window: float) -> None:
        self.samples = samples
        self.window = window
        # [start time, value] of each sample, oldest first.
        self._values: list[list[float]] = []

    def record(self, value: float, now: float) -> None:
        values = self._values
        if not values or now >= values[-1][0] + self.window:
            values.append([now, 0.0])
            del values[: -self.samples]
        values[-1][1] += value

    def _purge(self, now: float) -> None:
        # Kafka's SampledStat.purgeObsoleteSamples: a sample started samples x window ago
        # or earlier is obsolete.
        horizon = now - self.samples * self.window
        self._values = [v for v in self._values if v[0] > horizon]

    def elapsed(self, now: float) -> float:
        """Kafka's Rate.windowSize: the measured span, at least samples - 1 windows."""
        self._purge(now)
        span = now - self._values[0][0] if self._values else 0.0
        full = int(span // self.window)
        if full < self.samples - 1:
            span += (self.samples - 1 - full) * self.window
        return span

    def measure(self, now: float) -> float:
        """Per second."""
        elapsed = self.elapsed(now)
        return sum(v[1] for v in self._values) / elapsed if elapsed > 0 else 0.0


class QuotaManager:
    """Meters usage against the quotas table; `clock` gives seconds."""

    def __init__(
        self,
        source: Callable[[], QuotaTable],
        *,
        samples: int = 11,
        window_seconds: float = 1.0,
        clock: Callable[[], float],
    ) -> None:
        # The metadata backend's table, read on each request (no copy: it is replaced,
        # never changed, when quotas change).
        self._source = source
        self.samples = samples
        self.window = window_seconds
        self.clock = clock
        self._rates: dict[tuple[str, QuotaEntity], SampledRate] = {}
        # The quota keys some entity has, for the table they were read from.
        self._keys_of: tuple[QuotaTable | None, frozenset[str]] = (None, frozenset())
        # Throttle totals per quota type, for the metrics endpoint.
        self.throttled: dict[str, int] = {}
        self.throttle_ms_total: dict[str, int] = {}

    def defines(self, key: str) -> bool:
        """Does any entity have quota `key`? (Cheap: recomputed only when the table is
        replaced, so a request path can skip metering nobody asked for.)"""
        quotas = self._source()
        if self._keys_of[0] is not quotas:
            self._keys_of = (quotas, frozenset(k for values in quotas.values() for k in values))
        return key in self._keys_of[1]

    def quota_for(self, key: str, user: str, client_id: str) -> tuple[QuotaEntity, float] | None:
        """(metered entity, bound) of the first entity with quota `key`, or None."""
        quotas = self._source()
        if not quotas:
            return None
        for lookup, metered in _precedence(user, client_id):
            bound = quotas.get(lookup, {}).get(key)
            if bound is not None:
                return metered, bound
        return None

    def _throttle_ms(self, rate: SampledRate, bound: float, now: float) -> int:
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        if bound <= 0:
            return math.ceil(self.samples * self.window * 1000)
        throttle = min((observed - bound) / bound * rate.elapsed(now), self.samples * self.window)
        return math.ceil(throttle * 1000)

    def exceeded(self, key: str, user: str, client_id: str) -> bool:
        """Is the client over quota `key` already (KIP-599's strict check, before a
        mutation is made)?"""
        found = self.quota_for(key, user, client_id)
        if found is None:
            return False
        rate = self._rates.get((key, found[0]))
        return rate is not None and self._throttle_ms(rate, found[1], self.clock()) > 0

    def record(
        self, key: str, user: str, client_id: str, value: float, *, count: bool = True
    ) -> int:
        """Record `value` against quota `key`; the throttle time in ms (0 if within).
        `count` False only records (a negative value takes back an earlier record)."""
        found = self.quota_for(key, user, client_id)
        if found is None:
            return 0
        metered, bound = found
        now = self.clock()
        rate = self._rates.get((key, metered))
        if rate is None:
            rate = self._rates[(key, metered)] = SampledRate(self.samples, self.window)
        rate.record(value, now)
        if not count:
            return 0
        throttle_ms = self._throttle_ms(rate, bound, now)
        if not throttle_ms:
            return 0
        self.throttled[key] = self.throttled.get(key, 0) + 1
        self.throttle_ms_total[key] = self.throttle_ms_total.get(key, 0) + throttle_ms
        return throttle_ms
