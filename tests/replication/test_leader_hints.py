"""KIP-951: NOT_LEADER_OR_FOLLOWER answers name the current leader and its endpoint."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from controller.interface import BrokerInfo, PartitionInfo, TopicInfo
from kbroker.fetch_sessions import FetchSessionCache
from kbroker.handlers.fetch import handle_fetch
from kbroker.handlers.produce import handle_produce
from kbroker.purgatory import Purgatory
from kbroker.quotas import QuotaManager
from wire.errors import ErrorCode
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.request_header import RequestHeader
from wire.records.record import Record, build_batch

TOPIC = TopicInfo(
    name="t",
    topic_id=uuid.uuid4(),
    partitions=(PartitionInfo(0, 2, 9, (2, 1), (2, 1)),),
)


class Metadata:
    def topic(self, name: str) -> TopicInfo | None:
        return TOPIC if name == "t" else None

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return TOPIC if topic_id == TOPIC.topic_id else None

    def brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(1, "h1", 1), BrokerInfo(2, "h2", 2)]


def follower_broker() -> Any:
    return SimpleNamespace(
        metadata=Metadata(),
        partition=lambda topic, index: None,
        fetch_purgatory=Purgatory(),
        clock=lambda: 0.0,
        quotas=QuotaManager(dict, clock=lambda: 0.0),
        fetch_sessions=FetchSessionCache(),
        replica_manager=SimpleNamespace(offline=set()),
        authorizer=None,
    )


def header(key: int, version: int) -> RequestHeader:
    return RequestHeader(request_api_key=key, request_api_version=version, correlation_id=1)


async def test_produce_v10_names_the_leader() -> None:
    batch = build_batch([Record(0, 0, None, b"v", [])])
    request = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(
                name="t", partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    response = await handle_produce(follower_broker(), header(0, 10), request, 10)
    assert response is not None
    result = response.responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (result.current_leader.leader_id, result.current_leader.leader_epoch) == (2, 9)
    assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [(2, "h2", 2)]
    # Before v10 the fields do not exist.
    old = await handle_produce(follower_broker(), header(0, 9), request, 9)
    assert old is not None and old.node_endpoints == []


async def test_fetch_v16_names_the_leader() -> None:
    request = FetchRequest(
        max_wait_ms=0,
        topics=[
            FetchTopic(
                topic_id=TOPIC.topic_id,
                partitions=[FetchPartition(partition=0, partition_max_bytes=1000)],
            )
        ],
    )
    response = await handle_fetch(follower_broker(), header(1, 16), request, 16)
    data = response.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert data.current_leader.leader_id == 2
    assert [e.node_id for e in response.node_endpoints] == [2]
