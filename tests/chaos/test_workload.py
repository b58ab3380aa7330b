"""The workload's topic creation against a cluster whose brokers are still registering."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from chaos.workload import create_until_registered


class Admin:
    """Answers CreateTopics with the given errors in turn (None: created)."""

    def __init__(self, *answers: int | None) -> None:
        self.answers = list(answers)
        self.calls = 0

    def create_topics(self, topics: list[NewTopic], **_: Any) -> dict[str, Future[None]]:
        self.calls += 1
        future: Future[None] = Future()
        code = self.answers.pop(0)
        if code is None:
            future.set_result(None)
        else:
            future.set_exception(KafkaException(KafkaError(code)))
        return {topics[0].topic: future}


TOPIC = NewTopic("chaos", 3, 3)


def test_creation_is_retried_while_a_broker_is_not_registered_yet() -> None:
    admin = Admin(KafkaError.INVALID_REPLICATION_FACTOR, None)
    create_until_registered(admin, TOPIC, time.monotonic() + 30)  # type: ignore[arg-type]
    assert admin.calls == 2


def test_a_retry_that_finds_the_topic_created_is_done() -> None:
    admin = Admin(KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.TOPIC_ALREADY_EXISTS)
    create_until_registered(admin, TOPIC, time.monotonic() + 30)  # type: ignore[arg-type]
    assert admin.calls == 2


def test_other_errors_and_the_deadline_end_it() -> None:
    with pytest.raises(KafkaException):
        create_until_registered(Admin(KafkaError.POLICY_VIOLATION), TOPIC, time.monotonic() + 30)  # type: ignore[arg-type]
    late = Admin(KafkaError.INVALID_REPLICATION_FACTOR)
    with pytest.raises(KafkaException):
        create_until_registered(late, TOPIC, time.monotonic() - 1)  # type: ignore[arg-type]
