"""The ElectLeaders handler over the embedded backend and over a backend that elects."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from controller.embedded import EmbeddedMetadata
from kbroker.config import BrokerConfig
from kbroker.handlers.elect_leaders import handle_elect_leaders
from wire.errors import ErrorCode
from wire.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from wire.messages.request_header import RequestHeader

HEADER = RequestHeader(request_api_key=43, request_api_version=2, correlation_id=1)


async def embedded(tmp_path: Path) -> EmbeddedMetadata:
    config = BrokerConfig.from_properties(
        {"broker.id": "1", "log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:9092"}
    )
    metadata = EmbeddedMetadata(config)
    await metadata.start()
    await metadata.create_topic("t", 2, 1)
    return metadata


def codes(response: Any) -> dict[tuple[str, int], int]:
    return {
        (r.topic, p.partition_id): p.error_code
        for r in response.replica_election_results
        for p in r.partition_result
    }


async def test_embedded_partitions_never_need_an_election(tmp_path: Path) -> None:
    broker = SimpleNamespace(authorizer=None, metadata=await embedded(tmp_path))
    request = ElectLeadersRequest(
        topic_partitions=[
            TopicPartitions(topic="t", partitions=[0, 1, 5]),
            TopicPartitions(topic="nope", partitions=[0]),
        ]
    )
    response = await handle_elect_leaders(broker, HEADER, request, 2)  # type: ignore[arg-type]
    assert codes(response) == {
        ("t", 0): ErrorCode.ELECTION_NOT_NEEDED,
        ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
        ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


class Electing:
    """A backend that elects: wraps the embedded one and records the calls."""

    def __init__(self, inner: EmbeddedMetadata, *, controller: bool = True) -> None:
        self.inner = inner
        self.controller = controller
        self.calls: list[tuple[list[tuple[str, int]], bool]] = []

    def is_controller(self) -> bool:
        return self.controller

    def topic(self, name: str) -> Any:
        return self.inner.topic(name)

    def topics(self) -> Any:
        return self.inner.topics()

    async def elect_leaders(
        self, partitions: Sequence[tuple[str, int]], *, unclean: bool
    ) -> dict[tuple[str, int], ErrorCode]:
        self.calls.append((list(partitions), unclean))
        return dict.fromkeys(partitions, ErrorCode.NONE)


async def test_null_topics_mean_every_partition_and_the_type_is_passed(tmp_path: Path) -> None:
    backend = Electing(await embedded(tmp_path))
    broker = SimpleNamespace(authorizer=None, metadata=backend)
    request = ElectLeadersRequest(election_type=1, topic_partitions=None)
    response = await handle_elect_leaders(broker, HEADER, request, 1)  # type: ignore[arg-type]
    assert backend.calls == [([("t", 0), ("t", 1)], True)]
    assert set(codes(response).values()) == {ErrorCode.NONE}
    # v0 has no election type: always preferred.
    await handle_elect_leaders(broker, HEADER, request, 0)  # type: ignore[arg-type]
    assert backend.calls[-1][1] is False


async def test_a_broker_that_is_not_the_controller_refuses(tmp_path: Path) -> None:
    backend = Electing(await embedded(tmp_path), controller=False)
    broker = SimpleNamespace(authorizer=None, metadata=backend)
    request = ElectLeadersRequest(topic_partitions=[TopicPartitions(topic="t", partitions=[0])])
    response = await handle_elect_leaders(broker, HEADER, request, 2)  # type: ignore[arg-type]
    assert response.error_code == ErrorCode.NOT_CONTROLLER
    assert codes(response) == {("t", 0): ErrorCode.NOT_CONTROLLER}
    assert backend.calls == []
