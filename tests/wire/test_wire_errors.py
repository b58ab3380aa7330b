"""Error codes and exception types."""

from __future__ import annotations

from wire.errors import (
    DecodeError,
    EncodeError,
    ErrorCode,
    KafkaError,
    UnsupportedVersionError,
)


def test_codes_are_contiguous_from_minus_one() -> None:
    assert sorted(c.value for c in ErrorCode) == list(range(-1, 134))


def test_known_codes() -> None:
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.INVALID_TOPIC_EXCEPTION == 17
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.UNKNOWN_PRODUCER_ID == 59
    assert ErrorCode.UNKNOWN_TOPIC_ID == 100
    assert ErrorCode.INCONSISTENT_TOPIC_ID == 103


def test_retriable() -> None:
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode.REQUEST_TIMED_OUT.retriable
    assert ErrorCode.NOT_ENOUGH_REPLICAS.retriable
    assert not ErrorCode.NONE.retriable
    assert not ErrorCode.TOPIC_ALREADY_EXISTS.retriable
    assert not ErrorCode.UNKNOWN_SERVER_ERROR.retriable


def test_kafka_error() -> None:
    e = KafkaError(ErrorCode.INVALID_CONFIG, "bad")
    assert e.code is ErrorCode.INVALID_CONFIG and e.message == "bad"
    assert "INVALID_CONFIG" in str(e)
    assert KafkaError(ErrorCode.NONE).message is None


def test_hierarchy() -> None:
    assert issubclass(UnsupportedVersionError, DecodeError)
    assert not issubclass(EncodeError, DecodeError)
    assert DecodeError("x").header is None
