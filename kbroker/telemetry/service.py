"""The broker's client telemetry: the thin shell around the pure core.

It feeds the core (kbroker/telemetry/manager.py) the metadata backend's subscriptions and
the clock, decodes accepted pushes (kbroker/telemetry/otlp.py) into the exported series
(kbroker/telemetry/series.py), drops the series of instances the core forgot or that
terminated, and shows it all on the metrics endpoint.
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Callable, Mapping

from kbroker.metrics import Exposition
from kbroker.telemetry import otlp
from kbroker.telemetry.manager import (
    ClientInfo,
    SubscriptionAnswer,
    TelemetryManager,
    kafka_uuid_string,
)
from kbroker.telemetry.series import TelemetrySeries
from wire.errors import ErrorCode, KafkaError

Subscriptions = Callable[[], Mapping[str, Mapping[str, str]]]


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ClientTelemetry:
    def __init__(
        self,
        telemetry_max_bytes: int,
        subscriptions: Subscriptions,
        *,
        clock_ms: Callable[[], int] = _now_ms,
        manager: TelemetryManager | None = None,
        series: TelemetrySeries | None = None,
    ) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self.manager = manager or TelemetryManager(telemetry_max_bytes)
        self.series = series or TelemetrySeries()
        # Pushes answered, by error name (NONE for the accepted ones).
        self.pushes: collections.Counter[str] = collections.Counter()
        self._subscriptions = subscriptions
        self._clock_ms = clock_ms

    def get_subscriptions(self, requested: uuid.UUID, client: ClientInfo) -> SubscriptionAnswer:
        self.manager.update_subscriptions(self._subscriptions())
        try:
            return self.manager.get_subscriptions(requested, client, self._clock_ms())
        finally:
            self._forget_dropped()

    def push(
        self,
        instance_id: uuid.UUID,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        metrics: bytes,
        client: ClientInfo,
    ) -> None:
        """Accept a push and export its metrics, or raise the KafkaError to answer."""
        self.manager.update_subscriptions(self._subscriptions())
        try:
            instance = self.manager.push(
                instance_id,
                subscription_id,
                terminating,
                compression_type,
                len(metrics),
                client,
                self._clock_ms(),
            )
            if metrics:
                try:
                    decoded = otlp.decode_push(compression_type, metrics, self.telemetry_max_bytes)
                except KafkaError as exc:
                    self.manager.failed_export(instance_id, exc.code)
                    raise
                info = instance.client
                labels = (
                    ("client_instance_id", kafka_uuid_string(instance_id)),
                    ("client_id", info.client_id),
                    ("client_software_name", info.software_name or ""),
                    ("client_software_version", info.software_version or ""),
                )
                self.series.record(instance_id, labels, decoded.points)
        except KafkaError as exc:
            self.pushes[exc.code.name] += 1
            raise
        finally:
            self._forget_dropped()
        self.pushes[ErrorCode.NONE.name] += 1

    def _forget_dropped(self) -> None:
        self.series.drop(self.manager.take_dropped())

    def expose(self, out: Exposition) -> None:
        self.manager.expire(self._clock_ms())
        self._forget_dropped()
        out.family(
            "kbroker_client_telemetry_instances",
            "gauge",
            "Client instances known to this broker's telemetry (KIP-714).",
        )
        out.sample("kbroker_client_telemetry_instances", (), len(self.manager))
        out.family(
            "kbroker_client_telemetry_pushes_total",
            "counter",
            "PushTelemetry requests answered, by error (NONE: accepted).",
        )
        for result, count in sorted(self.pushes.items()):
            out.sample("kbroker_client_telemetry_pushes_total", (("error", result),), count)
        out.family(
            "kbroker_client_telemetry_series",
            "gauge",
            "Series of client-pushed metrics exported here.",
        )
        out.sample("kbroker_client_telemetry_series", (), len(self.series))
        out.family(
            "kbroker_client_telemetry_dropped_points_total",
            "counter",
            "Pushed data points not exported: past a bound, a reserved name or a kind clash.",
        )
        out.sample("kbroker_client_telemetry_dropped_points_total", (), self.series.dropped_points)
        for name, (kind, samples) in self.series.families().items():
            out.family(name, kind, "Pushed by clients (KIP-714 client telemetry).")
            for labels, value in samples:
                out.sample(name, labels, value)
