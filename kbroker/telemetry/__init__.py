"""Client telemetry (KIP-714): subscriptions, the client instances that fetch and push them,
and the metrics they push, exported on the broker's Prometheus endpoint.

- ``subscriptions``: the CLIENT_METRICS config resources (``metrics``, ``interval.ms``,
  ``match``) with Kafka's validation, and what a subscription is once parsed;
- ``manager``: the pure core deciding GetTelemetrySubscriptions and PushTelemetry answers;
- ``otlp``: decoding a push's OpenTelemetry ``MetricsData``;
- ``series``: the latest pushed values per client instance, bounded, as Prometheus samples.
"""
