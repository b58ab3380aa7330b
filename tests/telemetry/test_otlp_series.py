"""Pushed OTLP metrics: decoding (compressed, bounded, malformed) and the exported series
(labels, names, kinds, delta sums, bounds, drops)."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    AGGREGATION_TEMPORALITY_DELTA,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from kbroker.metrics import Exposition
from kbroker.telemetry.manager import ClientInfo
from kbroker.telemetry.otlp import COUNTER, GAUGE, Point, decode_push
from kbroker.telemetry.series import TelemetrySeries
from kbroker.telemetry.service import ClientTelemetry
from wire.errors import ErrorCode, KafkaError
from wire.records.compression import GZIP, NONE, ZSTD, compress


def point(value: float, **attributes: str) -> NumberDataPoint:
    p = NumberDataPoint(as_double=value)
    p.attributes.extend(
        KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()
    )
    return p


def metrics_data(*metrics: Metric) -> bytes:
    data = MetricsData(
        resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=list(metrics))])]
    )
    return data.SerializeToString()


def gauge(name: str, *points: NumberDataPoint) -> Metric:
    return Metric(name=name, gauge=Gauge(data_points=list(points)))


def total(
    name: str, *points: NumberDataPoint, delta: bool = False, monotonic: bool = True
) -> Metric:
    temporality = AGGREGATION_TEMPORALITY_DELTA if delta else AGGREGATION_TEMPORALITY_CUMULATIVE
    return Metric(
        name=name,
        sum=Sum(
            data_points=list(points), aggregation_temporality=temporality, is_monotonic=monotonic
        ),
    )


PAYLOAD = metrics_data(
    gauge("org.apache.kafka.producer.node.request.latency.avg", point(2.5, node_id="1")),
    total("org.apache.kafka.producer.record.send.total", point(10)),
    total("org.apache.kafka.producer.delta", point(3), delta=True),
    Metric(name="histo", histogram=Histogram(data_points=[HistogramDataPoint(count=1)])),
)


@pytest.mark.parametrize("codec", [NONE, GZIP, ZSTD])
def test_a_push_decodes_to_points(codec: int) -> None:
    decoded = decode_push(codec, compress(codec, PAYLOAD), 10_000)
    assert decoded.points == [
        Point(
            "org.apache.kafka.producer.node.request.latency.avg", GAUGE, (("node_id", "1"),), 2.5
        ),
        Point("org.apache.kafka.producer.record.send.total", COUNTER, (), 10.0),
        Point("org.apache.kafka.producer.delta", COUNTER, (), 3.0, delta=True),
    ]
    assert decoded.skipped == 1


def test_bad_or_oversized_pushes_are_refused() -> None:
    with pytest.raises(KafkaError) as caught:
        decode_push(ZSTD, compress(ZSTD, PAYLOAD), len(PAYLOAD) - 1)
    assert caught.value.code == ErrorCode.TELEMETRY_TOO_LARGE
    with pytest.raises(KafkaError) as caught:
        decode_push(ZSTD, b"not zstd", 10_000)
    assert caught.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(KafkaError) as caught:
        decode_push(NONE, b"\xff\xff\xff", 10_000)
    assert caught.value.code == ErrorCode.INVALID_RECORD


LABELS = (("client_instance_id", "abc"), ("client_id", "app"))


def test_series_keep_the_latest_push_and_add_up_deltas() -> None:
    series = TelemetrySeries()
    who = uuid.uuid4()
    series.record(who, LABELS, [Point("a.b", GAUGE, (), 1.0), Point("d", COUNTER, (), 3.0, True)])
    series.record(who, LABELS, [Point("a.b", GAUGE, (), 2.0), Point("d", COUNTER, (), 4.0, True)])
    assert series.families() == {
        "a_b": (GAUGE, [(LABELS, 2.0)]),
        "d": (COUNTER, [(LABELS, 7.0)]),
    }
    series.record(who, LABELS, [Point("a.b", GAUGE, (), 5.0)])
    assert list(series.families()) == ["a_b"] and len(series) == 1
    series.drop([who])
    assert series.families() == {} and len(series) == 0


def test_series_names_and_labels_are_prometheus_safe_and_never_the_brokers() -> None:
    series = TelemetrySeries()
    series.record(
        uuid.uuid4(),
        LABELS,
        [
            Point("9.lives-x", GAUGE, (("node.id", "1"), ("client_id", "spoof")), 1.0),
            Point("kbroker.requests_total", COUNTER, (), 1.0),
            Point("9.lives-x", COUNTER, (), 1.0),
        ],
    )
    assert series.families() == {"_9_lives_x": (GAUGE, [((*LABELS, ("node_id", "1")), 1.0)])}
    assert series.dropped_points == 2


def test_series_are_bounded() -> None:
    series = TelemetrySeries(max_clients=2, max_series_per_client=3, max_series=5)
    many = [Point(f"m{i}", GAUGE, (), float(i)) for i in range(10)]
    first, second, third = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    series.record(first, LABELS, many)
    assert len(series) == 3 and series.dropped_points == 7
    series.record(second, LABELS, many)
    assert len(series) == 5  # the total bound leaves the second client two
    series.record(third, LABELS, many)  # the least recently pushed client makes room
    assert series.clients() == 2 and len(series) == 5


def test_the_service_exports_accepted_pushes_and_forgets_terminated_clients() -> None:
    now = [0]
    table = {"all": {"metrics": "*", "interval.ms": "1000"}}
    telemetry = ClientTelemetry(10_000, lambda: table, clock_ms=lambda: now[0])
    client = ClientInfo("app", "apache-kafka-java", "4.3.0", "127.0.0.1", 1)
    answer = telemetry.get_subscriptions(uuid.UUID(int=0), client)
    payload = compress(ZSTD, PAYLOAD)
    telemetry.push(answer.instance_id, answer.subscription_id, False, ZSTD, payload, client)
    out = Exposition()
    telemetry.expose(out)
    text = out.render()
    assert 'org_apache_kafka_producer_record_send_total{client_instance_id="' in text
    assert 'client_software_name="apache-kafka-java",client_software_version="4.3.0"} 10' in text
    assert "# TYPE org_apache_kafka_producer_record_send_total counter" in text
    now[0] = 1000
    with pytest.raises(KafkaError):
        telemetry.push(answer.instance_id, answer.subscription_id, False, ZSTD, b"junk", client)
    now[0] = 1100
    telemetry.push(answer.instance_id, answer.subscription_id, True, ZSTD, payload, client)
    assert len(telemetry.series) == 0
    assert telemetry.pushes == {"NONE": 2, "INVALID_RECORD": 1}
