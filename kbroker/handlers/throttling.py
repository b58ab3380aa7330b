"""Client quota enforcement at the end of a request (DESIGN.md: the quota manager is
consulted at the end of Produce/Fetch): record the bytes against the client's quota, put
the throttle time in the response when its version has the field, and have the
connection muted for that long (kbroker.server.connection.THROTTLE_MS, KIP-219)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.quotas import CONTROLLER_MUTATION_RATE, REQUEST_PERCENTAGE
from kbroker.server.connection import PRINCIPAL, THROTTLE_MS
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.fetch_request import FetchRequest
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker


def quota_user() -> str:
    """The user entity of this request's quotas: its principal's name (``alice`` for
    ``User:alice``; ``ANONYMOUS`` on a connection that did not authenticate), as Kafka
    names the user of a quota."""
    return PRINCIPAL.get().partition(":")[2]


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
    user = quota_user()
    throttle_ms = broker.quotas.record(quota, user, client_id, amount)
    if throttle_ms > 0:
        if withheld:
            broker.quotas.record(quota, user, client_id, -amount, count=False)
        THROTTLE_MS.set(throttle_ms)
        if has_field:
            response.throttle_time_ms = throttle_ms  # type: ignore[attr-defined]
    return throttle_ms


# Never charged to request_percentage, as in Kafka: what a client needs before it can be
# throttled at all (version discovery, authentication), and the brokers' own traffic.
_REQUEST_QUOTA_EXEMPT = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.WRITE_TXN_MARKERS,
    }
)
FETCH_REPLICA_STATE_VERSION = 15
# request_percentage is percent of one request thread: a second of handler time is 100.
PERCENT_PER_SECOND = 100.0


def exempt_from_request_quota(header: RequestHeader, request: object) -> bool:
    if header.request_api_key in _REQUEST_QUOTA_EXEMPT:
        return True
    # A follower's fetch (replica id >= 0; in replica_state from v15) is replication.
    if not isinstance(request, FetchRequest):
        return False
    if header.request_api_version >= FETCH_REPLICA_STATE_VERSION:
        return request.replica_state.replica_id >= 0
    return request.replica_id >= 0


def charge_request_time(
    broker: Broker, header: RequestHeader, seconds: float, response: object
) -> None:
    """Charge the time a request's handler ran against the client's request_percentage
    (KIP-124); over it, the response carries the longer of this and any byte-rate throttle
    (every response message has the field from some version on; older versions drop it)
    and the connection is muted for as long."""
    throttle_ms = broker.quotas.record(
        REQUEST_PERCENTAGE, quota_user(), header.client_id or "", seconds * PERCENT_PER_SECOND
    )
    if throttle_ms <= 0:
        return
    THROTTLE_MS.set(max(THROTTLE_MS.get(), throttle_ms))
    if response is not None and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)


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
        if self._strict and quotas.exceeded(
            CONTROLLER_MUTATION_RATE, quota_user(), self._client_id
        ):
            raise KafkaError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded."
            )

    def record(self, partitions: int) -> None:
        quotas = self._broker.quotas
        quotas.record(
            CONTROLLER_MUTATION_RATE, quota_user(), self._client_id, partitions, count=False
        )

    def finish(self, response: object, has_field: bool) -> None:
        """Throttle time (and a muted channel) when the client ended over its quota."""
        throttle(self._broker, self._header, CONTROLLER_MUTATION_RATE, 0, response, has_field)
