"""The requests both shells build through the core, and how their answers are read."""

from __future__ import annotations

import pytest

from kbroker.client_core.fetched import CREATE_TIME, LOG_APPEND_TIME, decode_fetched
from kbroker.client_core.requests import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    create_topics_request,
    delete_records_request,
    fetch_request,
    list_offsets_request,
    list_offsets_results,
    offset_commit_request,
    offset_commit_results,
    offset_fetch_request,
    offset_fetch_results,
    produce_answer,
    produce_request,
)
from wire.errors import ErrorCode, KafkaError
from wire.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from wire.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from wire.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from wire.messages.produce_response import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from wire.records.record import Record, build_batch


def test_list_offsets_groups_partitions_by_topic() -> None:
    request = list_offsets_request([("a", 0), ("b", 1), ("a", 2)], EARLIEST)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics] == [
        ("a", [0, 2]),
        ("b", [1]),
    ]
    assert {p.timestamp for t in request.topics for p in t.partitions} == {EARLIEST}


def test_list_offsets_results_by_version() -> None:
    partitions = [
        ListOffsetsPartitionResponse(partition_index=0, offset=7, old_style_offsets=[5]),
        ListOffsetsPartitionResponse(
            partition_index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
        ),
    ]
    response = ListOffsetsResponse(
        topics=[ListOffsetsTopicResponse(name="a", partitions=partitions)]
    )
    assert list_offsets_results(response, 1)[("a", 0)] == (ErrorCode.NONE, 7)
    assert list_offsets_results(response, 0)[("a", 0)] == (ErrorCode.NONE, 5)
    assert list_offsets_results(response, 0)[("a", 1)] == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)


def test_offset_fetch_by_version() -> None:
    assert offset_fetch_request("g", 8).groups[0].group_id == "g"
    old = offset_fetch_request("g", 7)
    assert (old.group_id, old.topics) == ("g", None)
    with pytest.raises(KafkaError, match="v2"):
        offset_fetch_request("g", 1)
    partition = OffsetFetchResponsePartition(partition_index=0, committed_offset=9, metadata="m")
    v7 = OffsetFetchResponse(
        topics=[OffsetFetchResponseTopic(name="t", partitions=[partition])],
        error_code=ErrorCode.NONE,
    )
    assert offset_fetch_results(v7, 7) == (ErrorCode.NONE, {("t", 0): (ErrorCode.NONE, 9, "m")})
    group = OffsetFetchResponseGroup(
        group_id="g",
        error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        topics=[
            OffsetFetchResponseTopics(
                name="t",
                partitions=[OffsetFetchResponsePartitions(partition_index=1, committed_offset=-1)],
            )
        ],
    )
    error, found = offset_fetch_results(OffsetFetchResponse(groups=[group]), 8)
    assert error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert found == {("t", 1): (ErrorCode.NONE, -1, "")}


def test_offset_commit_as_an_admin() -> None:
    request = offset_commit_request("g", {("t", 1): (5, "x"), ("t", 0): (3, "")})
    assert (request.generation_id_or_member_epoch, request.member_id) == (-1, "")
    assert [p.partition_index for p in request.topics[0].partitions] == [0, 1]
    response = OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name="t",
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=0, error_code=ErrorCode.NOT_COORDINATOR
                    )
                ],
            )
        ]
    )
    assert offset_commit_results(response) == {("t", 0): ErrorCode.NOT_COORDINATOR}


def test_admin_requests() -> None:
    create = create_topics_request({"a": 3, "b": 1}, 2, {"cleanup.policy": "compact"}, 500)
    assert [(t.name, t.num_partitions, t.replication_factor) for t in create.topics] == [
        ("a", 3, 2),
        ("b", 1, 2),
    ]
    assert create.topics[1].configs[0].value == "compact"
    delete = delete_records_request(("t", 4), 10, 500)
    assert delete.topics[0].partitions[0].offset == 10
    fetch = fetch_request(("t", 2), 42, 1000, 5)
    assert fetch.topics[0].partitions[0].fetch_offset == 42
    assert fetch.isolation_level == 0
    produce = produce_request(("t", 2), b"batch", 500)
    assert (produce.acks, produce.topic_data[0].partition_data[0].records) == (-1, b"batch")
    assert produce.transactional_id is None


def test_transactional_reads_and_writes() -> None:
    assert fetch_request(("t", 0), 0, 1000, 5, READ_COMMITTED).isolation_level == 1
    assert list_offsets_request([("t", 0)], LATEST, READ_COMMITTED).isolation_level == 1
    assert list_offsets_request([("t", 0)], LATEST).isolation_level == 0
    assert produce_request(("t", 0), b"batch", 500, "tx-1").transactional_id == "tx-1"


def produce_response(error: int, **partition: object) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name="t",
                partition_responses=[
                    PartitionProduceResponse(index=0, error_code=error, base_offset=11, **partition)  # type: ignore[arg-type]
                ],
            )
        ],
        node_endpoints=[NodeEndpoint(node_id=2, host="h", port=1)],
    )


def test_produce_answer() -> None:
    answer, base = produce_answer(produce_response(ErrorCode.NONE), ("t", 0))
    assert (answer.error, base) == (ErrorCode.NONE, 11)
    # A batch the broker already has (KIP-98): the first append stands.
    answer, base = produce_answer(produce_response(ErrorCode.DUPLICATE_SEQUENCE_NUMBER), ("t", 0))
    assert (answer.error, base) == (ErrorCode.NONE, 11)
    moved = produce_response(
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        current_leader=LeaderIdAndEpoch(leader_id=2, leader_epoch=9),
        error_message="moved",
    )
    answer, _ = produce_answer(moved, ("t", 0))
    assert (answer.hint, answer.endpoints, answer.message) == ((2, 9), [(2, "h", 1)], "moved")
    missing, _ = produce_answer(moved, ("t", 1))
    assert missing.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_decode_fetched_skips_control_batches_and_earlier_records() -> None:
    data = (
        build_batch([Record(offset=o, timestamp=1, key=None, value=b"%d" % o) for o in (0, 1, 2)])
        + build_batch(
            [Record(offset=3, timestamp=1, key=None, value=b"\0\0\0\0")],
            base_offset=3,
            transactional=True,
            control=True,
        )
        + build_batch(
            [Record(offset=4, timestamp=1, key=b"k", value=b"4")], base_offset=4, timestamp_type=1
        )
    )
    records, next_offset = decode_fetched(data[:-3], 1)
    assert [(r.offset, r.timestamp_type) for r in records] == [(1, CREATE_TIME), (2, CREATE_TIME)]
    assert next_offset == 4
    records, next_offset = decode_fetched(data, 1)
    assert [(r.offset, r.key, r.timestamp_type) for r in records][-1] == (4, b"k", LOG_APPEND_TIME)
    assert next_offset == 5
