"""Client quota enforcement at the end of a request (DESIGN.md: the quota manager is
consulted at the end of Produce/Fetch): record the bytes against the client's quota, put
the throttle time in the response when its version has the field, and have the
connection muted for that long (kbroker.server.connection.THROTTLE_MS, KIP-219)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.server.connection import THROTTLE_MS
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
