"""Client-metrics configs: Kafka 4.3's validation (codes and messages as it answers them),
normalized values, matching."""

from __future__ import annotations

import pytest

from kbroker.telemetry import subscriptions as sub
from wire.errors import ErrorCode, KafkaError


@pytest.mark.parametrize(
    ("configs", "code", "message"),
    [
        ({"foo": "1"}, ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: foo"),
        (
            {"interval.ms": None},
            ErrorCode.INVALID_REQUEST,
            "Null value not supported for : interval.ms",
        ),
        (
            {"interval.ms": "50"},
            ErrorCode.INVALID_REQUEST,
            "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        (
            {"interval.ms": "abc"},
            ErrorCode.INVALID_CONFIG,
            "Invalid value abc for configuration interval.ms: Not a number of type INT",
        ),
        (
            {"interval.ms": "99999999999"},
            ErrorCode.INVALID_CONFIG,
            "Invalid value 99999999999 for configuration interval.ms: Not a number of type INT",
        ),
        (
            {"metrics": " a. , b.,,"},
            ErrorCode.INVALID_CONFIG,
            "Configuration 'metrics' values must not be empty.",
        ),
        (
            {"match": "foo=bar"},
            ErrorCode.INVALID_CONFIG,
            "Illegal client matching pattern: foo=bar",
        ),
        (
            {"match": "client_id=["},
            ErrorCode.INVALID_CONFIG,
            "Illegal client matching pattern: client_id=[",
        ),
        (
            {"match": "client_id="},
            ErrorCode.INVALID_CONFIG,
            "Illegal client matching pattern: client_id=",
        ),
        (
            {"match": "client_id=a=b"},
            ErrorCode.INVALID_CONFIG,
            "Illegal client matching pattern: client_id=a=b",
        ),
        ({"match": "=a"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: =a"),
    ],
)
def test_invalid_configs_answer_as_kafka(
    configs: dict[str, str | None], code: ErrorCode, message: str
) -> None:
    with pytest.raises(KafkaError) as caught:
        sub.normalize(configs)
    assert (caught.value.code, caught.value.message) == (code, message)


def test_values_are_kept_as_kafka_describes_them() -> None:
    assert sub.normalize(
        {"interval.ms": " +200 ", "metrics": "", "match": " client_id = a.* , client_source_port=1"}
    ) == {"interval.ms": "200", "metrics": "", "match": "client_id = a.*,client_source_port=1"}
    with pytest.raises(KafkaError) as caught:
        sub.check_name("")
    assert caught.value.message == "Subscription name can't be empty"


def test_a_subscription_matches_when_every_pattern_matches_the_whole_attribute() -> None:
    s = sub.parse_subscription(
        "s", {"match": "client_id=app-.*,client_software_name=apache-kafka-java"}
    )
    java = {"client_id": "app-1", "client_software_name": "apache-kafka-java"}
    assert s.matches(java)
    assert not s.matches({**java, "client_id": "my-app-1"})  # the whole value, not a search
    assert not s.matches({**java, "client_software_name": None})  # unknown attribute
    everyone = sub.parse_subscription("all", {"metrics": "*"})
    assert everyone.matches({}) and everyone.metrics == ("*",)
    assert everyone.interval_ms == 300_000


def test_patterns_run_on_re2() -> None:
    # Matched against what clients send: linear time, so backtracking patterns are refused
    # (lookaround, backreferences) and a nested repetition on a long id returns at once.
    with pytest.raises(KafkaError) as info:
        sub.parse_subscription("s", {"match": "client_id=(?=app).*"})
    assert info.value.code == ErrorCode.INVALID_CONFIG
    nested = sub.parse_subscription("s", {"match": "client_id=(a+)+$"})
    assert not nested.matches({"client_id": "a" * 5000 + "b"})
    posix = sub.parse_subscription("s", {"match": "client_id=[[:alpha:]]+"})
    assert posix.matches({"client_id": "app"})


def test_describe_shows_defaults_and_settings_with_their_sources() -> None:
    entries = {e.name: e for e in sub.describe({"interval.ms": "1000"})}
    assert list(entries) == ["interval.ms", "match", "metrics"]
    assert entries["interval.ms"].source == 7 and entries["interval.ms"].synonyms
    assert (entries["metrics"].value, entries["metrics"].source) == ("", 5)
    assert entries["metrics"].type == 7 and entries["interval.ms"].type == 3
