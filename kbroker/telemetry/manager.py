"""The telemetry core (KIP-714): client instances, their subscriptions and push timing.

Pure: time comes in as milliseconds on every call, the subscriptions as the metadata
backend's table, and the answers go out as values or ``KafkaError``; the handlers
(kbroker/handlers/telemetry.py) do the rest. The rules are those of Kafka's
ClientMetricsManager:

- GetTelemetrySubscriptions with the zero UUID gets a new client instance id. A client
  instance is matched against every subscription once, when first seen or after the
  subscriptions changed: it gets the union of the matching subscriptions' metrics (just
  ``*`` when one of them asks for all), the shortest of their intervals (300000 ms when
  none matches, with no metrics) and a subscription id, a CRC-32C of that metric set and
  interval XORed with the instance id's hash, so every broker computes the same id.
- A client may ask again only once per push interval since its last request
  (THROTTLING_QUOTA_EXCEEDED otherwise), unless its last push failed with
  UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.
- A push is checked in Kafka's order: a zero or reserved instance id (INVALID_REQUEST), a
  push after a terminating one (INVALID_REQUEST), too early (THROTTLING_QUOTA_EXCEEDED;
  the first push after a GetTelemetrySubscriptions is never early, since clients add
  jitter, and a terminating push never is), a subscription id that is not the instance's
  current one (UNKNOWN_SUBSCRIPTION_ID: the client fetches its subscription again), an
  unknown compression type (UNSUPPORTED_COMPRESSION_TYPE), more than ``telemetry.max.bytes``
  (TELEMETRY_TOO_LARGE).
- An instance not heard from for max(60 s, 3 push intervals) is forgotten, and so is the
  least recently seen one past MAX_INSTANCES (Kafka's cache size); ``take_dropped`` hands
  the forgotten and terminated ids to whoever keeps their pushed metrics.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import crc32c

from controller.embedded import kafka_uuid_string, random_kafka_uuid
from kbroker.telemetry import subscriptions as sub
from wire.errors import ErrorCode, KafkaError

# Kafka's broker-side cache of client instances (16k active client connections per broker).
MAX_INSTANCES = 16384
MIN_EXPIRY_MS = 60_000
EXPIRY_SCAN_MS = 1_000
# What a broker accepts, in Kafka's order of preference: clients use the first they support.
ZSTD, LZ4, GZIP, SNAPPY, NONE = 4, 3, 1, 2, 0
ACCEPTED_COMPRESSION_TYPES = (ZSTD, LZ4, GZIP, SNAPPY)
KNOWN_COMPRESSION_TYPES = frozenset({NONE, GZIP, SNAPPY, LZ4, ZSTD})
# Kafka's reserved ids: the zero UUID and the metadata topic's id.
RESERVED_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})
# Errors after which a client may fetch its subscription again at once.
REFETCH_ERRORS = frozenset(
    {ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE}
)


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """What the broker knows of the client sending the request (the match selectors)."""

    client_id: str
    software_name: str | None
    software_version: str | None
    source_address: str
    source_port: int


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    client: ClientInfo
    subscription_id: int
    subscriptions_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    last_get_ms: int | None = None
    last_push_ms: int | None = None
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE

    @property
    def expiry_ms(self) -> int:
        return max(MIN_EXPIRY_MS, 3 * self.push_interval_ms)


@dataclass(frozen=True, slots=True)
class SubscriptionAnswer:
    """The body of a successful GetTelemetrySubscriptions response."""

    instance_id: uuid.UUID
    subscription_id: int
    metrics: tuple[str, ...]
    push_interval_ms: int


def kafka_uuid_hash(value: uuid.UUID) -> int:
    """Java's Uuid.hashCode(): the halves XORed, then folded to a signed int32."""
    mixed = (value.int >> 64) ^ (value.int & (2**64 - 1))
    folded = ((mixed >> 32) ^ mixed) & 0xFFFFFFFF
    return folded - 2**32 if folded >= 2**31 else folded


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    digest = crc32c.crc32c(f"{','.join(metrics)}|{interval_ms}".encode())
    signed = digest - 2**32 if digest >= 2**31 else digest
    return signed ^ kafka_uuid_hash(instance_id)


@dataclass
class TelemetryManager:
    """Client instances and their subscriptions (see the module docstring)."""

    telemetry_max_bytes: int
    max_instances: int = MAX_INSTANCES
    new_id: Callable[[], uuid.UUID] = random_kafka_uuid
    _instances: collections.OrderedDict[uuid.UUID, ClientInstance] = field(
        default_factory=collections.OrderedDict
    )
    _table: Mapping[str, Mapping[str, str]] | None = None
    _subscriptions: tuple[sub.Subscription, ...] = ()
    _version: int = 0
    _dropped: list[uuid.UUID] = field(default_factory=list)
    _last_scan_ms: int | None = None

    # --- subscriptions ---------------------------------------------------------------------

    def update_subscriptions(self, table: Mapping[str, Mapping[str, str]]) -> None:
        """The metadata backend's subscriptions (the same object until they change): each
        instance is matched again at its next request once they changed."""
        if table is self._table:
            return
        self._table = table
        parsed = tuple(
            sorted(
                (s for s in (_parse(name, configs) for name, configs in table.items()) if s),
                key=lambda s: s.name,
            )
        )
        if parsed != self._subscriptions:
            self._subscriptions = parsed
            self._version += 1

    @property
    def subscriptions(self) -> tuple[sub.Subscription, ...]:
        return self._subscriptions

    # --- requests --------------------------------------------------------------------------

    def get_subscriptions(
        self, requested: uuid.UUID, client: ClientInfo, now_ms: int
    ) -> SubscriptionAnswer:
        """GetTelemetrySubscriptions; KafkaError(THROTTLING_QUOTA_EXCEEDED) when too early."""
        self.expire(now_ms)
        instance_id = requested
        if instance_id == uuid.UUID(int=0):
            instance_id = self.new_id()
            while instance_id in self._instances or instance_id in RESERVED_IDS:
                instance_id = self.new_id()
        instance = self._instance(instance_id, client, now_ms)
        last = max(instance.last_get_ms or 0, instance.last_push_ms or 0)
        if instance.last_get_ms is None and instance.last_push_ms is None:
            due = True
        else:
            due = now_ms - last >= instance.push_interval_ms
        if due:
            instance.last_get_ms = now_ms
        elif instance.last_error not in REFETCH_ERRORS:
            raise KafkaError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{instance_id}] arrived before the next push "
                "interval time",
            )
        instance.last_error = ErrorCode.NONE
        return SubscriptionAnswer(
            instance_id, instance.subscription_id, instance.metrics, instance.push_interval_ms
        )

    def push(
        self,
        instance_id: uuid.UUID,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        size: int,
        client: ClientInfo,
        now_ms: int,
    ) -> ClientInstance:
        """Check a PushTelemetry; the instance whose metrics to export, else KafkaError."""
        if instance_id in RESERVED_IDS:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid request from the client [{instance_id}], invalid client instance id",
            )
        self.expire(now_ms)
        instance = self._instance(instance_id, client, now_ms)
        try:
            self._check_push(instance, subscription_id, terminating, compression_type, size, now_ms)
        except KafkaError as exc:
            instance.last_error = exc.code
            raise
        finally:
            instance.terminating = terminating
            if terminating:
                self._dropped.append(instance_id)
        instance.last_error = ErrorCode.NONE
        return instance

    def _check_push(
        self,
        instance: ClientInstance,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        size: int,
        now_ms: int,
    ) -> None:
        who = instance.instance_id
        if instance.terminating:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Client [{who}] sent the previous request with state terminating to TRUE, "
                "can not accept any requests after that",
            )
        # The first push after a fetch is accepted early: clients add jitter to the interval.
        accept = instance.last_get_ms is not None and (
            instance.last_push_ms is None or instance.last_get_ms > instance.last_push_ms
        )
        if not accept:
            accept = (
                instance.last_push_ms is None
                or now_ms - instance.last_push_ms >= instance.push_interval_ms
            )
        if accept:
            instance.last_push_ms = now_ms
        elif not terminating:
            raise KafkaError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{who}] arrived before the next push interval time",
            )
        if subscription_id != instance.subscription_id:
            raise KafkaError(
                ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                f"Unknown client subscription id for the client [{who}]",
            )
        if compression_type not in KNOWN_COMPRESSION_TYPES:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"Unknown compression type [{compression_type}] is received in telemetry "
                f"request from [{who}]",
            )
        if size > self.telemetry_max_bytes:
            raise KafkaError(
                ErrorCode.TELEMETRY_TOO_LARGE,
                f"Telemetry request from [{who}] is larger than the maximum allowed size "
                f"[{self.telemetry_max_bytes}]",
            )

    def failed_export(self, instance_id: uuid.UUID, code: ErrorCode) -> None:
        """The accepted push's metrics could not be read (too large once decompressed,
        malformed): remembered as the instance's last error, as Kafka does."""
        instance = self._instances.get(instance_id)
        if instance is not None:
            instance.last_error = code

    # --- instances -------------------------------------------------------------------------

    def _instance(self, instance_id: uuid.UUID, client: ClientInfo, now_ms: int) -> ClientInstance:
        """The known instance (matched again if the subscriptions changed), or a new one;
        either way the most recently seen."""
        instance = self._instances.get(instance_id)
        if instance is None or instance.subscriptions_version != self._version:
            attributes = instance.client if instance is not None else client
            instance = self._match(instance_id, attributes)
            self._instances[instance_id] = instance
        self._instances.move_to_end(instance_id)
        instance.last_seen_ms = now_ms
        while len(self._instances) > self.max_instances:
            evicted, _ = self._instances.popitem(last=False)
            self._dropped.append(evicted)
        return instance

    def _match(self, instance_id: uuid.UUID, client: ClientInfo) -> ClientInstance:
        attributes = {
            sub.CLIENT_INSTANCE_ID: kafka_uuid_string(instance_id),
            sub.CLIENT_ID: client.client_id,
            sub.CLIENT_SOFTWARE_NAME: client.software_name,
            sub.CLIENT_SOFTWARE_VERSION: client.software_version,
            sub.CLIENT_SOURCE_ADDRESS: client.source_address,
            sub.CLIENT_SOURCE_PORT: str(client.source_port),
        }
        metrics: set[str] = set()
        interval = sub.DEFAULT_INTERVAL_MS
        for subscription in self._subscriptions:
            if subscription.matches(attributes):
                metrics.update(subscription.metrics)
                interval = min(interval, subscription.interval_ms)
        chosen = (sub.ALL_METRICS,) if sub.ALL_METRICS in metrics else tuple(sorted(metrics))
        return ClientInstance(
            instance_id=instance_id,
            client=client,
            subscription_id=subscription_id(chosen, interval, instance_id),
            subscriptions_version=self._version,
            metrics=chosen,
            push_interval_ms=interval,
        )

    def instance(self, instance_id: uuid.UUID) -> ClientInstance | None:
        return self._instances.get(instance_id)

    def __len__(self) -> int:
        return len(self._instances)

    def expire(self, now_ms: int) -> None:
        """Forget the instances not heard from for their expiry time. Expiry times differ
        (they follow the push interval), so every instance is looked at, at most once every
        EXPIRY_SCAN_MS."""
        if self._last_scan_ms is not None and now_ms - self._last_scan_ms < EXPIRY_SCAN_MS:
            return
        self._last_scan_ms = now_ms
        for instance_id, instance in list(self._instances.items()):
            if now_ms - instance.last_seen_ms >= instance.expiry_ms:
                del self._instances[instance_id]
                self._dropped.append(instance_id)

    def take_dropped(self) -> list[uuid.UUID]:
        """The instances forgotten or terminated since the last call."""
        dropped, self._dropped = self._dropped, []
        return dropped


def _parse(name: str, configs: Mapping[str, str]) -> sub.Subscription | None:
    """A stored subscription; None for one that no longer validates (written by another
    tool), which matches no client."""
    try:
        return sub.parse_subscription(name, configs)
    except KafkaError:
        return None
