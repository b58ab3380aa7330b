"""The metrics of a PushTelemetry: an OpenTelemetry ``MetricsData`` protobuf (OTLP v1,
KIP-714), compressed with the push's compression type.

Decoded with the OpenTelemetry project's generated classes, after decompression bounded by
``telemetry.max.bytes``. Only what a Prometheus endpoint can show as the latest value is
kept: gauges, and sums (monotonic sums are counters; a sum sent as deltas is marked so its
values can be added up). Histograms, exponential histograms and summaries, which neither
the Java client nor librdkafka push, are counted and left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    MetricsData,
    NumberDataPoint,
)

from wire.errors import ErrorCode, KafkaError
from wire.records.compression import DecompressionLimitError, decompress

GAUGE = "gauge"
COUNTER = "counter"


@dataclass(frozen=True, slots=True)
class Point:
    """One data point: the metric's name and kind, the point's attributes (sorted), its
    value, and whether the value is a delta to add to the previous one."""

    name: str
    kind: str
    attributes: tuple[tuple[str, str], ...]
    value: float
    delta: bool = False


@dataclass(frozen=True, slots=True)
class Decoded:
    points: list[Point]
    # Data points of metric types that are not exported.
    skipped: int


def decode_push(compression_type: int, payload: bytes, max_bytes: int) -> Decoded:
    """The points of a push; KafkaError TELEMETRY_TOO_LARGE when the payload decompresses
    past ``max_bytes``, INVALID_RECORD when it cannot be read."""
    try:
        data = decompress(compression_type, payload, max_bytes=max_bytes)
    except DecompressionLimitError as exc:
        raise KafkaError(ErrorCode.TELEMETRY_TOO_LARGE, str(exc)) from exc
    except KafkaError as exc:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"cannot decompress metrics: {exc}") from exc
    if len(data) > max_bytes:
        raise KafkaError(
            ErrorCode.TELEMETRY_TOO_LARGE, f"metrics of {len(data)} bytes, more than {max_bytes}"
        )
    message = MetricsData()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"not an OTLP MetricsData: {exc}") from exc
    return _points(message)


def _points(message: MetricsData) -> Decoded:
    points: list[Point] = []
    skipped = 0
    for resource_metrics in message.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    points += [_point(metric.name, GAUGE, p) for p in metric.gauge.data_points]
                elif kind == "sum":
                    total = metric.sum
                    delta = total.aggregation_temporality == AGGREGATION_TEMPORALITY_DELTA
                    points += [
                        _point(metric.name, COUNTER if total.is_monotonic else GAUGE, p, delta)
                        for p in total.data_points
                    ]
                elif kind is not None:
                    skipped += len(getattr(metric, kind).data_points)
    return Decoded(points, skipped)


def _point(name: str, kind: str, point: NumberDataPoint, delta: bool = False) -> Point:
    value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
    attributes = tuple(sorted((a.key, _text(a.value)) for a in point.attributes))
    return Point(name, kind, attributes, float(value), delta)


def _text(value: AnyValue) -> str:
    which = value.WhichOneof("value")
    if which is None:
        return ""
    if which in ("string_value", "bool_value", "int_value", "double_value"):
        item = getattr(value, which)
        return str(item).lower() if which == "bool_value" else str(item)
    return str(getattr(value, which)).strip()
