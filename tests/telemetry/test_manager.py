"""The telemetry core with a fake clock: client instance ids, subscription ids, push timing
and Kafka's error order (kbroker/telemetry/manager.py)."""

from __future__ import annotations

import uuid

import pytest

from kbroker.telemetry.manager import ClientInfo, TelemetryManager, subscription_id
from wire.errors import ErrorCode, KafkaError

ZERO = uuid.UUID(int=0)
JAVA = ClientInfo("app-1", "apache-kafka-java", "4.3.0", "127.0.0.1", 50000)
RDKAFKA = ClientInfo("other", "librdkafka", "2.16.0", "10.0.0.2", 40000)
PRODUCERS = {"prod": {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}}


def manager(table: dict[str, dict[str, str]] | None = None) -> TelemetryManager:
    m = TelemetryManager(telemetry_max_bytes=1000)
    m.update_subscriptions(PRODUCERS if table is None else table)
    return m


def code_of(call: object, *args: object) -> ErrorCode:
    with pytest.raises(KafkaError) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value.code


def test_a_new_client_gets_an_id_and_the_matching_subscription() -> None:
    m = manager(
        {
            **PRODUCERS,
            "java": {
                "metrics": "org.apache.kafka.consumer.",
                "match": "client_software_name=apache-kafka-java",
                "interval.ms": "5000",
            },
            "nobody": {"metrics": "x.", "match": "client_id=nobody"},
        }
    )
    answer = m.get_subscriptions(ZERO, JAVA, 0)
    assert answer.instance_id != ZERO
    # The union of the matching subscriptions' metrics, their shortest interval.
    assert answer.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.")
    assert answer.push_interval_ms == 1000
    other = m.get_subscriptions(ZERO, RDKAFKA, 0)
    assert other.metrics == ("org.apache.kafka.producer.",)
    assert other.instance_id != answer.instance_id
    # The id is a function of what was subscribed: every broker computes the same.
    assert answer.subscription_id == subscription_id(answer.metrics, 1000, answer.instance_id)


def test_no_matching_subscription_means_no_metrics_and_the_default_interval() -> None:
    answer = manager({}).get_subscriptions(ZERO, JAVA, 0)
    assert answer.metrics == () and answer.push_interval_ms == 300_000
    everything = manager({"all": {"metrics": "*,org."}}).get_subscriptions(ZERO, JAVA, 0)
    assert everything.metrics == ("*",)


def test_asking_again_before_the_interval_is_throttled() -> None:
    m = manager()
    first = m.get_subscriptions(ZERO, JAVA, 0)
    assert code_of(m.get_subscriptions, first.instance_id, JAVA, 500) == (
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )
    assert m.get_subscriptions(first.instance_id, JAVA, 1000) == first


def test_a_subscription_change_gives_a_new_id_at_once() -> None:
    m = manager()
    first = m.get_subscriptions(ZERO, JAVA, 0)
    m.update_subscriptions({"prod": {"metrics": "org.apache.kafka.", "interval.ms": "2000"}})
    # Not throttled: the instance is matched again, as new.
    again = m.get_subscriptions(first.instance_id, JAVA, 10)
    assert again.instance_id == first.instance_id
    assert again.subscription_id != first.subscription_id
    assert again.metrics == ("org.apache.kafka.",) and again.push_interval_ms == 2000
    # The push with the old id is told to fetch again, and may do so at once.
    assert code_of(m.push, first.instance_id, first.subscription_id, False, 4, 10, JAVA, 20) == (
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    )
    assert m.get_subscriptions(first.instance_id, JAVA, 30) == again


def test_push_timing() -> None:
    m = manager()
    a = m.get_subscriptions(ZERO, JAVA, 0)
    push = lambda at, terminating=False: m.push(  # noqa: E731
        a.instance_id, a.subscription_id, terminating, 4, 10, JAVA, at
    )
    # The first push after a fetch is accepted early (clients add jitter).
    push(600)
    assert code_of(push, 1200) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    push(1600)
    # A terminating push is never early, and nothing is accepted after it.
    push(1700, True)
    assert code_of(push, 5000) == ErrorCode.INVALID_REQUEST
    assert a.instance_id in m.take_dropped()


def test_push_errors_in_kafkas_order() -> None:
    m = manager()
    a = m.get_subscriptions(ZERO, JAVA, 0)
    assert code_of(m.push, ZERO, 0, False, 4, 10, JAVA, 0) == ErrorCode.INVALID_REQUEST
    assert code_of(m.push, uuid.UUID(int=1), 0, False, 4, 10, JAVA, 0) == ErrorCode.INVALID_REQUEST
    assert code_of(m.push, a.instance_id, a.subscription_id, False, 9, 10, JAVA, 0) == (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    )
    # After UNSUPPORTED_COMPRESSION_TYPE the client may fetch again at once (the push
    # interval still runs from the refused push).
    m.get_subscriptions(a.instance_id, JAVA, 1)
    # Too early comes before a wrong subscription id.
    assert code_of(m.push, a.instance_id, 12345, False, 4, 10, JAVA, 3) == (
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )
    assert code_of(m.push, a.instance_id, a.subscription_id, False, 0, 1001, JAVA, 1000) == (
        ErrorCode.TELEMETRY_TOO_LARGE
    )


def test_an_unknown_instance_id_from_another_broker_is_matched_here() -> None:
    first = manager().get_subscriptions(ZERO, JAVA, 0)
    elsewhere = manager()
    # The same subscriptions give the same subscription id on another broker.
    elsewhere.push(first.instance_id, first.subscription_id, False, 4, 10, JAVA, 5)


def test_instances_expire_after_three_intervals_or_a_minute_and_are_bounded() -> None:
    m = manager({"slow": {"metrics": "*", "interval.ms": "60000"}})
    slow = m.get_subscriptions(ZERO, JAVA, 0)
    quick = manager().get_subscriptions(ZERO, RDKAFKA, 0)
    m.update_subscriptions(
        {"slow": {"metrics": "*", "interval.ms": "60000", "match": "client_id=app-1"}, **PRODUCERS}
    )
    m.get_subscriptions(quick.instance_id, RDKAFKA, 1)
    m.get_subscriptions(slow.instance_id, JAVA, 2)
    m.expire(60_001)
    assert m.take_dropped() == [quick.instance_id]
    m.expire(180_002)
    assert m.take_dropped() == [slow.instance_id] and len(m) == 0
    small = TelemetryManager(telemetry_max_bytes=1000, max_instances=2)
    ids = [small.get_subscriptions(ZERO, JAVA, t).instance_id for t in range(3)]
    assert len(small) == 2 and small.take_dropped() == [ids[0]]
