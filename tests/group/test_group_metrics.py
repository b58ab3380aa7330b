"""The group coordinator's Prometheus metrics on an in-process broker: groups by type and
state, and rebalances by type."""

from __future__ import annotations

import uuid

from kbroker.broker import Broker
from kbroker.group.consumer_protocol import encode_assignment, encode_subscription
from kbroker.metrics import BrokerMetrics
from tests.group.conftest import StartBroker, connect
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from wire.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment

TOPIC = "metered"


def samples(broker: Broker, name: str) -> dict[str, float]:
    """The samples of one metric family, by their labels."""
    found = {}
    for line in BrokerMetrics(broker).render().splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) :].rsplit(" ", 1)
            found[labels] = float(value)
    return found


async def test_groups_by_type_and_state_and_rebalances(start_broker: StartBroker) -> None:
    broker = await start_broker()
    await broker.metadata.create_topic(TOPIC, 2, 1)
    assert samples(broker, "kbroker_group_rebalances_total") == {
        '{type="classic"}': 0,
        '{type="consumer"}': 0,
        '{type="share"}': 0,
    }
    conn = await connect(broker)
    try:
        # A classic group of one member, through JoinGroup and SyncGroup: generation 1.
        join = JoinGroupRequest(
            group_id="classic",
            session_timeout_ms=600_000,
            rebalance_timeout_ms=30_000,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequestProtocol(name="range", metadata=encode_subscription([TOPIC]))
            ],
        )
        joined = await conn.call(ApiKey.JOIN_GROUP, 3, join)
        assert joined.error_code == ErrorCode.NONE
        synced = await conn.call(
            ApiKey.SYNC_GROUP,
            2,
            SyncGroupRequest(
                group_id="classic",
                generation_id=joined.generation_id,
                member_id=joined.member_id,
                assignments=[
                    SyncGroupRequestAssignment(
                        member_id=joined.member_id, assignment=encode_assignment({TOPIC: [0, 1]})
                    )
                ],
            ),
        )
        assert synced.error_code == ErrorCode.NONE
        # A group of committed offsets only: classic and Empty.
        commit = OffsetCommitRequest(
            group_id="offsets-only",
            generation_id_or_member_epoch=-1,
            topics=[
                OffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=0, committed_offset=0)
                    ],
                )
            ],
        )
        committed = await conn.call(ApiKey.OFFSET_COMMIT, 8, commit)
        assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
        # A consumer group (KIP-848) whose second member is waiting for a partition the first
        # still owns: Reconciling at group epoch 2.
        for _ in range(2):
            beat = ConsumerGroupHeartbeatRequest(
                group_id="modern",
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=[TOPIC],
                topic_partitions=[],
            )
            answered = await conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat)
            assert answered.error_code == ErrorCode.NONE
    finally:
        await conn.close()

    assert samples(broker, "kbroker_groups") == {
        '{type="classic",state="Empty"}': 1,
        '{type="classic",state="PreparingRebalance"}': 0,
        '{type="classic",state="CompletingRebalance"}': 0,
        '{type="classic",state="Stable"}': 1,
        '{type="consumer",state="Empty"}': 0,
        '{type="consumer",state="Assigning"}': 0,
        '{type="consumer",state="Reconciling"}': 1,
        '{type="consumer",state="Stable"}': 0,
        '{type="share",state="Empty"}': 0,
        '{type="share",state="Stable"}': 0,
    }
    assert samples(broker, "kbroker_group_rebalances_total") == {
        '{type="classic"}': 1,
        '{type="consumer"}': 2,
        '{type="share"}': 0,
    }
