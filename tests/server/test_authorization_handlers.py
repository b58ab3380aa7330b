"""Handlers ask the authorizer what Kafka's ask it, and answer Kafka's errors (issue 12,
item 4). The client is User:ANONYMOUS (a PLAINTEXT connection); ACLs name it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from tests.server.conftest import RawClient, broker_config, free_port
from tests.server.test_data_path import fetch, fetch_request, produce, records
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from wire.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from wire.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from wire.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from wire.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from wire.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from wire.messages.delete_groups_request import DeleteGroupsRequest
from wire.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from wire.messages.delete_topics_request import DeleteTopicsRequest
from wire.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from wire.messages.describe_cluster_request import DescribeClusterRequest
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.describe_groups_request import DescribeGroupsRequest
from wire.messages.describe_log_dirs_request import DescribeLogDirsRequest
from wire.messages.describe_producers_request import DescribeProducersRequest, TopicRequest
from wire.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from wire.messages.describe_topic_partitions_request import TopicRequest as DtpTopic
from wire.messages.describe_transactions_request import DescribeTransactionsRequest
from wire.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from wire.messages.end_txn_request import EndTxnRequest
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.heartbeat_request import HeartbeatRequest
from wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    IncrementalAlterConfigsRequest,
)
from wire.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from wire.messages.init_producer_id_request import InitProducerIdRequest
from wire.messages.join_group_request import JoinGroupRequest
from wire.messages.leave_group_request import LeaveGroupRequest
from wire.messages.list_groups_request import ListGroupsRequest
from wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from wire.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from wire.messages.list_transactions_request import ListTransactionsRequest
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from wire.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
)
from wire.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.sync_group_request import SyncGroupRequest
from wire.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from wire.records.record import build_batch

Op = AclOperation
DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def allow(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(
        resource_type, name, pattern, "User:ANONYMOUS", "*", operation, PermissionType.ALLOW
    )


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[tuple[Broker, RawClient]]:
    broker = Broker(
        broker_config(
            tmp_path / "data",
            free_port(),
            authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
            # A consumer group's target assignment follows each change at once (KIP-1263).
            group_consumer_assignment_interval_ms="0",
        )
    )
    await broker.start()
    for name in ("a", "b"):
        await broker.metadata.create_topic(name, 1, 1)
    client = await RawClient.connect(broker.port)
    try:
        yield broker, client
    finally:
        await client.close()
        await broker.stop()


async def _metadata(
    client: RawClient, names: list[str] | None, version: int = 12, **flags: bool
) -> dict[str, tuple[int, int]]:
    """Topic -> (error, authorized operations)."""
    request = MetadataRequest(
        topics=None if names is None else [MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=True,
        **flags,
    )
    response = await client.call(ApiKey.METADATA, version, request)
    return {t.name: (t.error_code, t.topic_authorized_operations) for t in response.topics}


async def test_metadata_shows_describable_topics_only(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "a", Op.READ)], [])
    not_requested = -(2**31)
    assert await _metadata(client, None) == {"a": (0, not_requested)}
    assert await _metadata(client, ["a", "b", "c"]) == {
        "a": (0, not_requested),
        "b": (DENIED, not_requested),
        "c": (DENIED, not_requested),
    }
    # Auto-creation needs CREATE on the cluster or the topic, besides DESCRIBE.
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "c", Op.DESCRIBE)], [])
    assert (await _metadata(client, ["c"]))["c"][0] == DENIED
    assert broker.metadata.topic("c") is None
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "c", Op.CREATE)], [])
    assert (await _metadata(client, ["c"]))["c"][0] == ErrorCode.NONE
    assert broker.metadata.topic("c") is not None

    with_ops = await _metadata(client, ["a"], include_topic_authorized_operations=True)
    assert with_ops == {"a": (0, (1 << Op.READ) | (1 << Op.DESCRIBE))}
    # The broker reuses its answer for a topic: the operations stay out of the next one.
    assert await _metadata(client, ["a"]) == {"a": (0, not_requested)}


async def test_describe_topic_partitions_shows_describable_topics_only(
    secured: tuple[Broker, RawClient],
) -> None:
    broker, client = secured
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "a", Op.READ)], [])

    async def describe(names: list[str]) -> dict[str, tuple[int, int]]:
        request = DescribeTopicPartitionsRequest(topics=[DtpTopic(name=n) for n in names])
        response = await client.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, request)
        return {t.name: (t.error_code, t.topic_authorized_operations) for t in response.topics}

    readable = (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert await describe([]) == {"a": (0, readable)}
    assert await describe(["a", "b", "nosuch"]) == {
        "a": (0, readable),
        "b": (DENIED, -(2**31)),
        "nosuch": (DENIED, -(2**31)),
    }


async def test_cluster_authorized_operations(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    request = MetadataRequest(topics=[], include_cluster_authorized_operations=True)
    assert (await client.call(ApiKey.METADATA, 8, request)).cluster_authorized_operations == 0
    await broker.metadata.alter_acls([allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.ALTER)], [])
    expected = (1 << Op.ALTER) | (1 << Op.DESCRIBE)
    response = await client.call(ApiKey.METADATA, 8, request)
    assert response.cluster_authorized_operations == expected
    describe = DescribeClusterRequest(include_cluster_authorized_operations=True)
    response = await client.call(ApiKey.DESCRIBE_CLUSTER, 0, describe)
    assert response.cluster_authorized_operations == expected


async def test_produce_fetch_and_list_offsets_need_their_operations(
    secured: tuple[Broker, RawClient],
) -> None:
    broker, client = secured
    batch = build_batch(records(0, 3))
    # No ACL: nothing is allowed (allow.everyone.if.no.acl.found is false).
    response = await produce(client, "a", batch)
    assert response.responses[0].partition_responses[0].error_code == DENIED
    await broker.metadata.alter_acls(
        [allow(ResourceType.TOPIC, "a", Op.WRITE), allow(ResourceType.TOPIC, "b", Op.READ)], []
    )
    response = await produce(client, "a", batch)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert (await produce(client, "b", batch)).responses[0].partition_responses[0].error_code == (
        DENIED
    )
    transactional = ProduceRequest(
        transactional_id="tx",
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name="a", partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    response = await client.call(ApiKey.PRODUCE, 9, transactional)
    assert response.responses[0].partition_responses[0].error_code == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )

    # WRITE does not allow reading; READ on b does.
    fetched = await fetch(client, broker, "a", 0)
    assert fetched.responses[0].partitions[0].error_code == DENIED
    assert fetched.responses[0].partitions[0].records == b""
    fetched = await fetch(client, broker, "a", 0, version=13)
    assert fetched.responses[0].partitions[0].error_code == DENIED
    assert (await fetch(client, broker, "b", 0)).responses[0].partitions[0].error_code == 0

    # ListOffsets needs DESCRIBE, which WRITE and READ both imply.
    await broker.metadata.create_topic("c", 1, 1)
    for topic, expected in (("a", ErrorCode.NONE), ("b", ErrorCode.NONE), ("c", DENIED)):
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsTopic(
                    name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)]
                )
            ],
        )
        response = await client.call(ApiKey.LIST_OFFSETS, 5, request)
        assert response.topics[0].partitions[0].error_code == expected, topic


async def test_follower_fetch_needs_cluster_action(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "a", Op.READ)], [])
    request = fetch_request(broker, "a", 0)
    request.replica_id = 2
    response = await client.call(ApiKey.FETCH, 12, request)
    assert response.responses[0].partitions[0].error_code == DENIED
    await broker.metadata.alter_acls(
        [allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)], []
    )
    response = await client.call(ApiKey.FETCH, 12, request)
    assert response.responses[0].partitions[0].error_code != DENIED


def _commit(group: str, *topics: str) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        topics=[
            OffsetCommitRequestTopic(
                name=t,
                partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=5)],
            )
            for t in topics
        ],
    )


def _commit_errors(response: object) -> dict[str, int]:
    return {t.name: t.partitions[0].error_code for t in response.topics}  # type: ignore[attr-defined]


async def test_group_and_offset_apis(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    group_denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    wildcard_read = allow(ResourceType.GROUP, "*", Op.READ)
    topic_acls = [allow(ResourceType.TOPIC, "a", Op.READ)]
    await broker.metadata.alter_acls([wildcard_read, *topic_acls], [])
    response = await client.call(ApiKey.OFFSET_COMMIT, 8, _commit("h", "a"))
    assert _commit_errors(response) == {"a": ErrorCode.NONE}
    await broker.metadata.alter_acls([], [wildcard_read])

    # No ACL on g: every group API refuses it.
    find = FindCoordinatorRequest(key="g")
    assert (await client.call(ApiKey.FIND_COORDINATOR, 3, find)).error_code == group_denied
    join = JoinGroupRequest(group_id="g", session_timeout_ms=10000, protocol_type="consumer")
    assert (await client.call(ApiKey.JOIN_GROUP, 5, join)).error_code == group_denied
    beat = HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    assert (await client.call(ApiKey.HEARTBEAT, 3, beat)).error_code == group_denied
    sync = SyncGroupRequest(group_id="g", generation_id=1, member_id="m")
    assert (await client.call(ApiKey.SYNC_GROUP, 3, sync)).error_code == group_denied
    leave = LeaveGroupRequest(group_id="g", member_id="m")
    assert (await client.call(ApiKey.LEAVE_GROUP, 1, leave)).error_code == group_denied
    described = await client.call(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"]))
    assert described.groups[0].error_code == group_denied
    deleted = await client.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["h"]))
    assert deleted.results[0].error_code == group_denied
    response = await client.call(ApiKey.OFFSET_COMMIT, 8, _commit("g", "a", "b"))
    assert _commit_errors(response) == {"a": group_denied, "b": group_denied}
    fetch_v7 = OffsetFetchRequest(group_id="h", topics=None)
    assert (await client.call(ApiKey.OFFSET_FETCH, 7, fetch_v7)).error_code == group_denied
    fetch_v8 = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="h", topics=None)])
    response = await client.call(ApiKey.OFFSET_FETCH, 8, fetch_v8)
    assert response.groups[0].error_code == group_denied

    # READ on g (which implies DESCRIBE) and on topic a only.
    await broker.metadata.alter_acls([allow(ResourceType.GROUP, "g", Op.READ)], [])
    find_response = await client.call(ApiKey.FIND_COORDINATOR, 3, find)
    assert find_response.error_code == ErrorCode.NONE
    response = await client.call(ApiKey.OFFSET_COMMIT, 8, _commit("g", "a", "b"))
    assert _commit_errors(response) == {"a": ErrorCode.NONE, "b": DENIED}
    fetch_named = OffsetFetchRequest(
        group_id="g",
        topics=[OffsetFetchRequestTopic(name=t, partition_indexes=[0]) for t in ("a", "b")],
    )
    response = await client.call(ApiKey.OFFSET_FETCH, 7, fetch_named)
    fetched = {t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code)
               for t in response.topics}  # fmt: skip
    assert fetched == {"a": (5, ErrorCode.NONE), "b": (-1, DENIED)}
    described = await client.call(
        ApiKey.DESCRIBE_GROUPS,
        5,
        DescribeGroupsRequest(groups=["g"], include_authorized_operations=True),
    )
    assert described.groups[0].error_code == ErrorCode.NONE
    assert described.groups[0].authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)

    # ListGroups: the describable groups, or all with DESCRIBE on the cluster.
    listed = await client.call(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
    assert [g.group_id for g in listed.groups] == ["g"]
    await broker.metadata.alter_acls([allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)], [])
    listed = await client.call(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
    assert sorted(g.group_id for g in listed.groups) == ["g", "h"]

    # Transactional ids: FindCoordinator and TxnOffsetCommit need them.
    txn_find = FindCoordinatorRequest(key="tx", key_type=1)
    response = await client.call(ApiKey.FIND_COORDINATOR, 3, txn_find)
    assert response.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    txn_commit = TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id="g",
        topics=[
            TxnOffsetCommitRequestTopic(
                name="a", partitions=[TxnOffsetCommitRequestPartition(partition_index=0)]
            )
        ],
    )
    response = await client.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit)
    assert _commit_errors(response) == {"a": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


def _join(group: str, *topics: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id="m-" + group,
        member_epoch=0,
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=list(topics),
        topic_partitions=[],
    )


async def test_consumer_group_apis_need_describe_on_their_topics(
    secured: tuple[Broker, RawClient],
) -> None:
    broker, client = secured
    # Without READ on the group, the group's error comes first, as in Kafka 4.3.
    response = await client.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, _join("cg", "a", "b"))
    assert response.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    await broker.metadata.alter_acls(
        [allow(ResourceType.GROUP, "cg", Op.READ), allow(ResourceType.TOPIC, "a", Op.DESCRIBE)],
        [],
    )
    # One subscribed topic it may not describe refuses the whole heartbeat, before the group
    # sees it (Kafka 4.3's KafkaApis, no error message); the group stays unknown.
    refused = await client.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, _join("cg", "a", "b"))
    assert (refused.error_code, refused.error_message, refused.member_epoch) == (DENIED, None, 0)
    assert broker.group_coordinator.describe_consumer_group("cg").error == (
        ErrorCode.GROUP_ID_NOT_FOUND
    )
    joined = await client.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, _join("cg", "a", "a"))
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.NONE, 1)
    assert [t.partitions for t in joined.assignment.topic_partitions] == [[0]]

    # ConsumerGroupDescribe: with DESCRIBE on a, the group; without it, Kafka 4.3's error in
    # place of the group, whose assignments would name a.
    describe = ConsumerGroupDescribeRequest(group_ids=["cg"])
    described = (await client.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, describe)).groups[0]
    assert (described.error_code, len(described.members)) == (ErrorCode.NONE, 1)
    await broker.metadata.alter_acls([], [allow(ResourceType.TOPIC, "a", Op.DESCRIBE)])
    described = (await client.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, describe)).groups[0]
    assert (described.group_id, described.error_code, described.members) == ("cg", DENIED, [])
    assert described.error_message == (
        "The group has described topic(s) that the client is not authorized to describe."
    )


async def test_regex_subscriptions_match_describable_topics_only(
    secured: tuple[Broker, RawClient],
) -> None:
    broker, client = secured
    await broker.metadata.alter_acls(
        [allow(ResourceType.GROUP, "cr", Op.READ), allow(ResourceType.TOPIC, "b", Op.DESCRIBE)],
        [],
    )
    join = ConsumerGroupHeartbeatRequest(
        group_id="cr",
        member_id="m",
        member_epoch=0,
        rebalance_timeout_ms=60_000,
        subscribed_topic_regex="[ab]",
        topic_partitions=[],
    )
    joined = await client.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join)
    assert joined.error_code == ErrorCode.NONE
    # A new regex is resolved at the member's next heartbeat (as Kafka resolves it off the
    # heartbeat's path), with the principal of that heartbeat.
    again = ConsumerGroupHeartbeatRequest(
        group_id="cr", member_id="m", member_epoch=joined.member_epoch
    )
    resolved = await client.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, again)
    b = broker.metadata.topic("b")
    assert b is not None and resolved.error_code == ErrorCode.NONE
    assert [(t.topic_id, t.partitions) for t in resolved.assignment.topic_partitions] == [
        (b.topic_id, [0])
    ]


async def test_producer_ids_and_transactions(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    idempotent = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    response = await client.call(ApiKey.INIT_PRODUCER_ID, 4, idempotent)
    assert (response.error_code, response.producer_id) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        -1,
    )
    # WRITE on any topic lets an idempotent producer in (KIP-679), as IDEMPOTENT_WRITE does.
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "a", Op.WRITE)], [])
    response = await client.call(ApiKey.INIT_PRODUCER_ID, 4, idempotent)
    assert response.error_code == ErrorCode.NONE and response.producer_id >= 0

    txn_denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    transactional = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000)
    txn_find = FindCoordinatorRequest(key="tx", key_type=1)
    assert (await client.call(ApiKey.INIT_PRODUCER_ID, 4, transactional)).error_code == txn_denied
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_topics=[AddPartitionsToTxnTopic(name="a", partitions=[0])],
    )
    response = await client.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
    assert response.results_by_topic_v3_and_below[0].results_by_partition[
        0
    ].partition_error_code == (txn_denied)
    offsets = AddOffsetsToTxnRequest(transactional_id="tx", group_id="g")
    assert (await client.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, offsets)).error_code == txn_denied
    end = EndTxnRequest(transactional_id="tx", committed=True)
    assert (await client.call(ApiKey.END_TXN, 3, end)).error_code == txn_denied
    describe = DescribeTransactionsRequest(transactional_ids=["tx"])
    response = await client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, describe)
    assert response.transaction_states[0].error_code == txn_denied

    await broker.metadata.alter_acls([allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE)], [])
    # WRITE implies DESCRIBE: the coordinator is found (its state topic created).
    assert (await client.call(ApiKey.FIND_COORDINATOR, 3, txn_find)).error_code == 0
    response = await client.call(ApiKey.INIT_PRODUCER_ID, 4, transactional)
    assert response.error_code == ErrorCode.NONE
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=response.producer_id,
        v3_and_below_producer_epoch=response.producer_epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnTopic(name="a", partitions=[0]),
            AddPartitionsToTxnTopic(name="b", partitions=[0]),
        ],
    )
    response = await client.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
    errors = {
        t.name: t.results_by_partition[0].partition_error_code
        for t in response.results_by_topic_v3_and_below
    }
    assert errors == {"a": ErrorCode.OPERATION_NOT_ATTEMPTED, "b": DENIED}
    offsets.producer_id, offsets.producer_epoch = add.v3_and_below_producer_id, 0
    response = await client.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, offsets)
    assert response.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    listed = await client.call(ApiKey.LIST_TRANSACTIONS, 0, ListTransactionsRequest())
    assert [s.transactional_id for s in listed.transaction_states] == ["tx"]


async def test_topic_administration(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured

    async def create(name: str) -> int:
        request = CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=1, replication_factor=1)]
        )
        return (await client.call(ApiKey.CREATE_TOPICS, 5, request)).topics[0].error_code

    assert await create("new") == DENIED
    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "new", Op.CREATE)], [])
    assert await create("new") == ErrorCode.NONE
    assert await create("other") == DENIED
    await broker.metadata.alter_acls([allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.CREATE)], [])
    assert await create("other") == ErrorCode.NONE

    grow = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="a", count=2)])
    assert (await client.call(ApiKey.CREATE_PARTITIONS, 1, grow)).results[0].error_code == DENIED
    records_request = DeleteRecordsRequest(
        topics=[DeleteRecordsTopic(name="a", partitions=[DeleteRecordsPartition(offset=-1)])]
    )
    response = await client.call(ApiKey.DELETE_RECORDS, 1, records_request)
    assert response.topics[0].partitions[0].error_code == DENIED
    # Refused whether the topic exists or not.
    for name in ("a", "missing"):
        delete = DeleteTopicsRequest(topic_names=[name])
        response = await client.call(ApiKey.DELETE_TOPICS, 4, delete)
        assert response.responses[0].error_code == DENIED, name
    await broker.metadata.alter_acls(
        [allow(ResourceType.TOPIC, "a", Op.DELETE), allow(ResourceType.TOPIC, "a", Op.ALTER)], []
    )
    assert (await client.call(ApiKey.CREATE_PARTITIONS, 1, grow)).results[0].error_code == 0
    response = await client.call(ApiKey.DELETE_RECORDS, 1, records_request)
    assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
    response = await client.call(ApiKey.DELETE_TOPICS, 4, DeleteTopicsRequest(topic_names=["a"]))
    assert response.responses[0].error_code == ErrorCode.NONE


async def test_offset_for_leader_epoch(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            OffsetForLeaderTopic(topic=t, partitions=[OffsetForLeaderPartition(partition=0)])
            for t in ("a", "b")
        ],
    )

    async def errors() -> dict[str, int]:
        response = await client.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, request)
        return {t.topic: t.partitions[0].error_code for t in response.topics}

    await broker.metadata.alter_acls([allow(ResourceType.TOPIC, "a", Op.DESCRIBE)], [])
    assert await errors() == {"a": ErrorCode.NONE, "b": DENIED}
    await broker.metadata.alter_acls(
        [allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)], []
    )
    assert await errors() == {"a": ErrorCode.NONE, "b": ErrorCode.NONE}


async def test_configs_and_client_quotas(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    describe = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=2, resource_name="a", configuration_keys=None),
            DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None),
        ]
    )
    alter = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalResource(
                resource_type=2,
                resource_name="a",
                configs=[AlterableConfig(name="retention.ms", value="1000")],
            )
        ]
    )
    quotas = DescribeClientQuotasRequest()

    async def errors() -> tuple[list[int], int, int]:
        described = await client.call(ApiKey.DESCRIBE_CONFIGS, 4, describe)
        altered = await client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)
        quota_error = (await client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, quotas)).error_code
        return (
            [r.error_code for r in described.results],
            altered.responses[0].error_code,
            (quota_error),
        )

    cluster_denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert await errors() == ([DENIED, cluster_denied], DENIED, cluster_denied)
    await broker.metadata.alter_acls(
        [
            allow(ResourceType.TOPIC, "a", Op.ALTER_CONFIGS),
            allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS),
        ],
        [],
    )
    assert await errors() == ([0, 0], 0, 0)
    assert broker.metadata.topic("a").configs == {"retention.ms": "1000"}  # type: ignore[union-attr]


async def test_cluster_operations(secured: tuple[Broker, RawClient]) -> None:
    broker, client = secured
    refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    log_dirs = await client.call(ApiKey.DESCRIBE_LOG_DIRS, 3, DescribeLogDirsRequest(topics=None))
    assert (log_dirs.error_code, log_dirs.results) == (refused, [])
    elect = ElectLeadersRequest(topic_partitions=[TopicPartitions(topic="a", partitions=[0])])
    response = await client.call(ApiKey.ELECT_LEADERS, 1, elect)
    assert response.error_code == refused
    assert response.replica_election_results[0].partition_result[0].error_code == refused
    listing = ListPartitionReassignmentsRequest()
    response = await client.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)
    assert response.error_code == refused
    producers = DescribeProducersRequest(topics=[TopicRequest(name="a", partition_indexes=[0])])
    response = await client.call(ApiKey.DESCRIBE_PRODUCERS, 0, producers)
    assert response.topics[0].partitions[0].error_code == DENIED

    await broker.metadata.alter_acls(
        [
            allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.ALTER),
            allow(ResourceType.TOPIC, "a", Op.READ),
        ],
        [],
    )
    log_dirs = await client.call(ApiKey.DESCRIBE_LOG_DIRS, 3, DescribeLogDirsRequest(topics=None))
    assert log_dirs.error_code == ErrorCode.NONE and log_dirs.results
    response = await client.call(ApiKey.ELECT_LEADERS, 1, elect)
    assert response.error_code == ErrorCode.NONE
    response = await client.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)
    assert response.error_code == ErrorCode.NONE
    response = await client.call(ApiKey.DESCRIBE_PRODUCERS, 0, producers)
    assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
