"""DescribeTopicPartitions (KIP-966) through the broker: the answers Kafka 4.3 gave to the
same requests (sorting, paging by cursor, errors)."""

from __future__ import annotations

from kbroker.broker import Broker
from tests.server.conftest import RawClient
from tests.server.test_data_path import create_topic
from wire.errors import ErrorCode
from wire.messages.describe_topic_partitions_request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from wire.messages.describe_topic_partitions_response import DescribeTopicPartitionsResponse

DESCRIBE_TOPIC_PARTITIONS = 75
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (KIP-430).
ALL_TOPIC_OPERATIONS = 3576

Page = tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]


async def describe(
    client: RawClient, topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> Page:
    request = DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=n) for n in topics],
        response_partition_limit=limit,
        cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    response = await client.call(DESCRIBE_TOPIC_PARTITIONS, 0, request)
    assert isinstance(response, DescribeTopicPartitionsResponse)
    page = [
        (t.name or "", t.error_code, [p.partition_index for p in t.partitions])
        for t in response.topics
    ]
    after = response.next_cursor
    return page, None if after is None else (after.topic_name, after.partition_index)


async def test_topics_sorted_and_paged(broker: Broker, client: RawClient) -> None:
    for name, count in (("a", 3), ("b", 2), ("c", 1)):
        await create_topic(client, name, partitions=count)
    ok = ErrorCode.NONE
    assert await describe(client, ["c", "a", "nosuch"]) == (
        [
            ("a", ok, [0, 1, 2]),
            ("c", ok, [0]),
            ("nosuch", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
        ],
        None,
    )
    abc = ["a", "b", "c"]
    assert await describe(client, abc, 2) == ([("a", ok, [0, 1])], ("a", 2))
    # A topic that ends exactly at the limit: the cursor is the next topic's first partition.
    assert await describe(client, abc, 3) == ([("a", ok, [0, 1, 2])], ("b", 0))
    assert await describe(client, abc, 2, ("a", 2)) == ([("a", ok, [2]), ("b", ok, [0])], ("b", 1))
    assert await describe(client, ["a", "b"], 2, ("a", 7)) == (
        [("a", ok, []), ("b", ok, [0, 1])],
        None,
    )
    # A limit below one is one.
    assert await describe(client, ["a"], 0) == ([("a", ok, [0])], ("a", 1))
    bad = ErrorCode.INVALID_REQUEST
    assert await describe(client, ["a", "c"], 2, ("b", 0)) == (
        [("a", bad, []), ("c", bad, [])],
        None,
    )
    # No topics named: every topic, paged the same way.
    everything, _ = await describe(client, [], 100)
    assert [name for name, _, _ in everything] == sorted(broker.metadata.topics())


async def test_partition_details_and_operations(broker: Broker, client: RawClient) -> None:
    await create_topic(client, "d", partitions=2)
    request = DescribeTopicPartitionsRequest(topics=[TopicRequest(name="d")])
    response = await client.call(DESCRIBE_TOPIC_PARTITIONS, 0, request)
    assert isinstance(response, DescribeTopicPartitionsResponse)
    (topic,) = response.topics
    info = broker.metadata.topic("d")
    assert info is not None
    assert (topic.topic_id, topic.is_internal, topic.topic_authorized_operations) == (
        info.topic_id,
        False,
        ALL_TOPIC_OPERATIONS,
    )
    first = topic.partitions[0]
    assert (first.leader_id, first.replica_nodes, first.isr_nodes, first.offline_replicas) == (
        broker.config.broker_id,
        [broker.config.broker_id],
        [broker.config.broker_id],
        [],
    )
    # Eligible leader replicas are not kept: empty lists, which the Java clients need.
    assert first.eligible_leader_replicas == [] and first.last_known_elr == []
