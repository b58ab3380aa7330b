"""Broker metrics in the Prometheus text exposition format (version 0.0.4), served over HTTP.

The endpoint runs on ``metrics.port`` (off when unset) and answers ``GET /metrics``; any other
path is 404, any other method 405. The format, one sample per line:

    # HELP <name> <text>
    # TYPE <name> counter|gauge|histogram
    <name>{label="value",...} <number>

Label values escape backslash, double quote and newline. Histograms expose cumulative
``_bucket{le="..."}`` series ending with ``le="+Inf"``, then ``_sum`` and ``_count``.

Two kinds of figures:

- events counted as they happen: requests and their latency per API (``RequestMetrics``, fed
  by the dispatcher), bytes in (produce) and out (consumer fetch) and replication bytes out per
  topic, ISR shrinks and expands (seen as metadata changes of partitions this broker leads, so
  both metadata backends count them), group rebalances per group type (counted by the group
  coordinator's state machine);
- state read at scrape time (``BrokerMetrics``): purgatory sizes, partitions led,
  under-replicated partitions, offline partitions and the active-controller flag, log size and
  offsets per local partition, the groups this broker coordinates by type and state, and
  consumer-group lag for partitions this broker leads (high watermark minus committed
  offset);
- the metrics clients push (KIP-714 client telemetry), the latest value per client
  instance, with counts of instances, pushes and series (kbroker/telemetry/service.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controller.interface import TopicInfo
from kbroker.group.events import CLASSIC_GROUP, CONSUMER_GROUP, SHARE_GROUP, GroupState
from kbroker.purgatory import Purgatory
from wire.api_keys import ApiKey
from wire.errors import ErrorCode

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Request latency buckets, seconds: from sub-millisecond metadata calls to long-poll fetches.
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
MAX_HTTP_REQUEST_BYTES = 8192
HTTP_READ_TIMEOUT = 5.0

Labels = tuple[tuple[str, str], ...]

# The states a group of each type is listed in, each exposed even at zero, as Kafka exposes
# consumer-group-count and share-group-count for every state. Dead is left out: a dead group
# is removed at once and never listed.
GROUP_STATES: dict[str, tuple[GroupState, ...]] = {
    CLASSIC_GROUP: (
        GroupState.EMPTY,
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.STABLE,
    ),
    CONSUMER_GROUP: (
        GroupState.EMPTY,
        GroupState.ASSIGNING,
        GroupState.RECONCILING,
        GroupState.STABLE,
    ),
    SHARE_GROUP: (GroupState.EMPTY, GroupState.STABLE),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class Exposition:
    """Accumulates metric families and renders the text format."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: Labels, value: float) -> None:
        self._lines.append(f"{name}{_labels(labels)} {_number(value)}")

    def render(self) -> str:
        return "\n".join(self._lines) + "\n"


@dataclass
class Histogram:
    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        self.total += value
        self.count += 1
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break

    def expose(self, out: Exposition, name: str, labels: Labels) -> None:
        cumulative = 0
        for bound, n in zip(self.buckets, self.counts, strict=True):
            cumulative += n
            out.sample(f"{name}_bucket", (*labels, ("le", _number(bound))), cumulative)
        out.sample(f"{name}_bucket", (*labels, ("le", "+Inf")), self.count)
        out.sample(f"{name}_sum", labels, self.total)
        out.sample(f"{name}_count", labels, self.count)


# Looked up once per request: a dict is cheaper than building the enum member each time.
_API_NAMES: dict[int, str] = {key.value: key.name for key in ApiKey}


def _api_name(api_key: int) -> str:
    return _API_NAMES.get(api_key) or str(api_key)


def _records_size(records: object) -> int:
    """Bytes of a records field: a file region or memoryview (``nbytes``) or bytes."""
    if records is None:
        return 0
    nbytes = getattr(records, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    return len(records)  # type: ignore[arg-type]


class RequestMetrics:
    """Per-API request counts, errors (closed connections) and latency; bytes per topic.

    ``topic_name`` resolves the topic ids of Produce v13+ and Fetch v13+ to names (None when
    unknown)."""

    def __init__(self, topic_name: Callable[[uuid.UUID], str | None]) -> None:
        self._topic_name = topic_name
        self.latency: dict[str, Histogram] = {}
        self.failed: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.replication_bytes_out: dict[str, int] = {}

    def observe(
        self, api_key: int, request: Any, response: Any, seconds: float, *, failed: bool
    ) -> None:
        """One request handled in ``seconds``; ``failed`` when the handler raised (then
        ``response`` is None; it is None for acks=0 produce requests too)."""
        api = _api_name(api_key)
        self.latency.setdefault(api, Histogram()).observe(seconds)
        if failed:
            self.failed[api] = self.failed.get(api, 0) + 1
        if api_key == ApiKey.PRODUCE:
            for topic in request.topic_data:
                size = sum(_records_size(p.records) for p in topic.partition_data)
                name = self._name(topic.name, topic.topic_id)
                self.bytes_in[name] = self.bytes_in.get(name, 0) + size
        elif api_key == ApiKey.FETCH and response is not None:
            replica = max(request.replica_id, request.replica_state.replica_id)
            target = self.replication_bytes_out if replica >= 0 else self.bytes_out
            for topic in response.responses:
                name = self._name(topic.topic, topic.topic_id)
                size = sum(_records_size(p.records) for p in topic.partitions)
                target[name] = target.get(name, 0) + size

    def _name(self, name: str, topic_id: uuid.UUID) -> str:
        """A topic's name, looked up for the versions that name it by id."""
        return name or self._topic_name(topic_id) or str(topic_id)

    def expose(self, out: Exposition) -> None:
        out.family(
            "kbroker_request_latency_seconds", "histogram", "Time to handle a request, per API."
        )
        for api, histogram in sorted(self.latency.items()):
            histogram.expose(out, "kbroker_request_latency_seconds", (("api", api),))
        out.family("kbroker_requests_total", "counter", "Requests handled, per API.")
        for api, histogram in sorted(self.latency.items()):
            out.sample("kbroker_requests_total", (("api", api),), histogram.count)
        out.family(
            "kbroker_requests_failed_total",
            "counter",
            "Requests whose handler raised instead of answering, per API.",
        )
        for api, n in sorted(self.failed.items()):
            out.sample("kbroker_requests_failed_total", (("api", api),), n)
        for name, values, text in (
            ("kbroker_bytes_in_total", self.bytes_in, "Record bytes produced, per topic."),
            ("kbroker_bytes_out_total", self.bytes_out, "Record bytes fetched by consumers."),
            (
                "kbroker_replication_bytes_out_total",
                self.replication_bytes_out,
                "Record bytes fetched by follower replicas, per topic.",
            ),
        ):
            out.family(name, "counter", text)
            for topic, n in sorted(values.items()):
                out.sample(name, (("topic", topic),), n)


class IsrChanges:
    """Counts ISR shrinks and expands of partitions led by ``broker_id``, from metadata
    change notifications (a change of ISR seen against the last known ISR)."""

    def __init__(self, broker_id: int, topics: Iterable[TopicInfo]) -> None:
        self._broker_id = broker_id
        self._isr: dict[tuple[str, int], frozenset[int]] = {}
        self.shrinks = 0
        self.expands = 0
        for topic in topics:
            self._remember(topic)

    def _remember(self, topic: TopicInfo) -> None:
        for p in topic.partitions:
            self._isr[(topic.name, p.partition)] = frozenset(p.isr)

    def on_topic_change(self, topic: TopicInfo | None, name: str) -> None:
        if topic is None:
            for key in [key for key in self._isr if key[0] == name]:
                del self._isr[key]
            return
        for p in topic.partitions:
            before = self._isr.get((name, p.partition))
            if before is not None and p.leader == self._broker_id:
                after = frozenset(p.isr)
                if after < before:
                    self.shrinks += 1
                elif after > before:
                    self.expands += 1
        self._remember(topic)


class BrokerMetrics:
    """Everything the endpoint shows for one broker."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.requests: RequestMetrics = broker.dispatcher.metrics
        self.isr = IsrChanges(broker.config.broker_id, broker.metadata.topics().values())
        broker.metadata.add_listener(self.isr.on_topic_change)

    def render(self) -> str:
        out = Exposition()
        self.requests.expose(out)
        self._expose_state(out)
        self._expose_limits(out)
        self._expose_logs(out)
        self._expose_groups(out)
        self._expose_group_lag(out)
        self._broker.share_partitions.expose(out)
        if self._broker.audit is not None:
            self._broker.audit.expose(out)
        self._broker.mirrors.expose(out)
        self._broker.telemetry.expose(out)
        self._broker.loop_stalls.expose(out)
        return out.render()

    def _expose_state(self, out: Exposition) -> None:
        broker = self._broker
        me = broker.config.broker_id
        out.family("kbroker_purgatory_size", "gauge", "Requests waiting in each purgatory.")
        for name, value in sorted(vars(broker).items()):
            if isinstance(value, Purgatory):
                label = name.removesuffix("_purgatory")
                out.sample("kbroker_purgatory_size", (("purgatory", label),), len(value))
        led = under = offline = 0
        for topic in broker.metadata.topics().values():
            for p in topic.partitions:
                if p.leader < 0:
                    offline += 1
                elif p.leader == me:
                    led += 1
                    under += len(p.isr) < len(p.replicas)
        controller = broker.metadata.controller_id() == me
        out.family("kbroker_leader_partitions", "gauge", "Partitions this broker leads.")
        out.sample("kbroker_leader_partitions", (), led)
        out.family(
            "kbroker_under_replicated_partitions",
            "gauge",
            "Partitions led here whose ISR is smaller than their replica set.",
        )
        out.sample("kbroker_under_replicated_partitions", (), under)
        out.family(
            "kbroker_offline_partitions",
            "gauge",
            "Partitions without a leader (reported by the active controller only).",
        )
        out.sample("kbroker_offline_partitions", (), offline if controller else 0)
        out.family("kbroker_active_controller", "gauge", "1 on the active controller.")
        out.sample("kbroker_active_controller", (), int(controller))
        out.family("kbroker_isr_shrinks_total", "counter", "ISR shrinks of partitions led here.")
        out.sample("kbroker_isr_shrinks_total", (), self.isr.shrinks)
        out.family("kbroker_isr_expands_total", "counter", "ISR expands of partitions led here.")
        out.sample("kbroker_isr_expands_total", (), self.isr.expands)

    def _expose_limits(self, out: Exposition) -> None:
        """Client quotas (throttles per quota type), the request memory pool and the
        connection counts (kbroker/quotas.py, kbroker/server/)."""
        quotas = self._broker.quotas
        out.family(
            "kbroker_quota_throttled_total", "counter", "Responses throttled, by quota type."
        )
        for key, count in sorted(quotas.throttled.items()):
            out.sample("kbroker_quota_throttled_total", (("quota", key),), count)
        out.family(
            "kbroker_quota_throttle_time_ms_total",
            "counter",
            "Throttle time given to clients, by quota type.",
        )
        for key, total in sorted(quotas.throttle_ms_total.items()):
            out.sample("kbroker_quota_throttle_time_ms_total", (("quota", key),), total)
        server = self._broker.server
        out.family(
            "kbroker_request_memory_bytes",
            "gauge",
            "Bytes of the queued.max.request.bytes pool in use by requests and unread responses.",
        )
        out.sample("kbroker_request_memory_bytes", (), server.pool.used)
        out.family(
            "kbroker_request_memory_waiting_connections",
            "gauge",
            "Connections not read until the request memory pool has room.",
        )
        out.sample("kbroker_request_memory_waiting_connections", (), server.pool.waiting)
        out.family(
            "kbroker_connections_expired_total",
            "counter",
            "Connections closed by the broker's sweep: idle, request read timeout, request "
            "arriving below request.read.min.bytes.per.second, client gone while not read.",
        )
        for kind, count in sorted(server.closed_by_sweep.items()):
            out.sample("kbroker_connections_expired_total", (("reason", kind),), count)
        out.family(
            "kbroker_connections_authenticating",
            "gauge",
            "Connections of a SASL listener accepted and not authenticated yet.",
        )
        for listener, count in sorted(server.in_authentication.items()):
            out.sample("kbroker_connections_authenticating", (("listener", listener),), count)
        out.family(
            "kbroker_tls_handshakes",
            "gauge",
            "TLS handshakes running, and accepted connections waiting for their address's turn "
            "(ssl.max.handshakes.per.ip).",
        )
        turns = server.handshake_turns
        out.sample("kbroker_tls_handshakes", (("state", "running"),), turns.running)
        out.sample("kbroker_tls_handshakes", (("state", "waiting"),), turns.waiting)
        out.family("kbroker_connections", "gauge", "Open client connections, by listener.")
        for listener, count in sorted(server.quotas.by_listener.items()):
            out.sample("kbroker_connections", (("listener", listener),), count)

    def _expose_logs(self, out: Exposition) -> None:
        logs = sorted(self._broker.logs.logs().items())
        for name, attribute, text in (
            ("kbroker_log_size_bytes", "size_bytes", "Bytes on disk of a partition's log."),
            ("kbroker_log_end_offset", "log_end_offset", "Next offset of a partition's log."),
            ("kbroker_log_start_offset", "log_start_offset", "First offset of a partition's log."),
        ):
            out.family(name, "gauge", text)
            for (topic, partition), partition_log in logs:
                labels = (("topic", topic), ("partition", str(partition)))
                out.sample(name, labels, getattr(partition_log, attribute))

    def _expose_groups(self, out: Exposition) -> None:
        """Groups this broker coordinates by type and state (Kafka's group-count by protocol,
        consumer-group-count and share-group-count by state, and the classic coordinator's
        NumGroups* gauges), and rebalances per type (Kafka's group-completed-rebalance-count,
        consumer-group-rebalance-count, share-group-rebalance-count)."""
        coordinator = self._broker.group_coordinator
        counts = {
            (group_type, state.value): 0
            for group_type, states in GROUP_STATES.items()
            for state in states
        }
        error, groups = coordinator.list_groups()
        if error == ErrorCode.NONE:
            for listing in groups:
                key = (listing.group_type, listing.state.value)
                counts[key] = counts.get(key, 0) + 1
        out.family(
            "kbroker_groups", "gauge", "Groups coordinated by this broker, by type and state."
        )
        for (group_type, state), n in counts.items():
            out.sample("kbroker_groups", (("type", group_type), ("state", state)), n)
        out.family(
            "kbroker_group_rebalances_total",
            "counter",
            "Rebalances of groups coordinated here, by type: a classic group's new generations, "
            "a consumer or share group's group epoch bumps.",
        )
        for group_type, n in coordinator.rebalances().items():
            out.sample("kbroker_group_rebalances_total", (("type", group_type),), n)

    def _expose_group_lag(self, out: Exposition) -> None:
        out.family(
            "kbroker_consumer_group_lag",
            "gauge",
            "High watermark minus committed offset, for partitions led by this broker.",
        )
        coordinator = self._broker.group_coordinator
        error, groups = coordinator.list_groups()
        if error != ErrorCode.NONE:
            return
        for listing in sorted(groups, key=lambda g: g.group_id):
            error, offsets = coordinator.fetch_offsets(listing.group_id, None)
            if error != ErrorCode.NONE:
                continue
            for (topic, index), value in sorted(offsets.items()):
                partition = self._broker.partition(topic, index)
                if value is None or partition is None or not partition.is_leader:
                    continue
                labels = (("group", listing.group_id), ("topic", topic), ("partition", str(index)))
                out.sample(
                    "kbroker_consumer_group_lag",
                    labels,
                    max(0, partition.high_watermark - value.offset),
                )


class MetricsServer:
    """A minimal HTTP/1.0 server for ``GET /metrics``; one request per connection."""

    def __init__(self, render: Callable[[], str]) -> None:
        self._render = render
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(
            self._serve, host or None, port, limit=MAX_HTTP_REQUEST_BYTES
        )
        bound = int(self._server.sockets[0].getsockname()[1])
        log.info("metrics endpoint listening on %s:%d", host or "*", bound)
        return bound

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HTTP_READ_TIMEOUT)
            status, body = self._answer(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            status, body = "400 Bad Request", "bad request\n"
        except ConnectionError:
            writer.close()
            return
        payload = body.encode()
        content_type = CONTENT_TYPE if status.startswith("200") else "text/plain"
        writer.write(
            f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
            + payload
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    def _answer(self, head: bytes) -> tuple[str, str]:
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3:
            return "400 Bad Request", "bad request\n"
        method, target, _ = parts
        if method != "GET":
            return "405 Method Not Allowed", "only GET\n"
        if target.split("?", 1)[0] != "/metrics":
            return "404 Not Found", "try /metrics\n"
        return "200 OK", self._render()
