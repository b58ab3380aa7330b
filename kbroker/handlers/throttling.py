"""Client quota enforcement at the end of a request (DESIGN.md: the quota manager is
consulted at the end of Produce/Fetch): record the bytes against the client's quota, put
the throttle time in the response when its version has the field, and have the
connection muted for that long (kbroker.server.connection.THROTTLE_MS, KIP-219)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.quotas import CONTROLLER_MUTATION_RATE
from kbroker.server.connection import THROTTLE_MS
from wire.errors import ErrorCode, KafkaError
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

# The principal of every connection until listeners authenticate (Kafka's
# KafkaPrincipal.ANONYMOUS): user quotas for it, or the <default> user, apply to all.
ANONYMOUS = "ANONYMOUS"


def throttle(
    broker: Broker,
    header: RequestHeader,
    quota: str,
    amount: float,
    response: object,
    has_field: bool,
    *,
    withheld: bool = False,
) -> int:
    """Record `amount` against `quota` for this request's client; returns the throttle
    time (ms). `withheld`: the caller sends nothing when throttled (a fetch answers empty,
    as Kafka's does), so the amount is not counted then."""
    client_id = header.client_id or ""
    throttle_ms = broker.quotas.record(quota, ANONYMOUS, client_id, amount)
    if throttle_ms > 0:
        if withheld:
            broker.quotas.record(quota, ANONYMOUS, client_id, -amount, count=False)
        THROTTLE_MS.set(throttle_ms)
        if has_field:
            response.throttle_time_ms = throttle_ms  # type: ignore[attr-defined]
    return throttle_ms


class MutationQuota:
    """controller_mutation_rate for one CreateTopics, CreatePartitions or DeleteTopics
    request (KIP-599): partitions created or deleted count as mutations. With a `strict`
    quota (the versions that know THROTTLING_QUOTA_EXCEEDED) a topic is refused while the
    client is over its quota; older versions are always served, then throttled."""

    def __init__(self, broker: Broker, header: RequestHeader, strict: bool) -> None:
        self._broker = broker
        self._header = header
        self._strict = strict
        self._client_id = header.client_id or ""

    def check(self) -> None:
        quotas = self._broker.quotas
        if self._strict and quotas.exceeded(CONTROLLER_MUTATION_RATE, ANONYMOUS, self._client_id):
            raise KafkaError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded."
            )

    def record(self, partitions: int) -> None:
        quotas = self._broker.quotas
        quotas.record(CONTROLLER_MUTATION_RATE, ANONYMOUS, self._client_id, partitions, count=False)

    def finish(self, response: object, has_field: bool) -> None:
        """Throttle time (and a muted channel) when the client ended over its quota."""
        throttle(self._broker, self._header, CONTROLLER_MUTATION_RATE, 0, response, has_field)
