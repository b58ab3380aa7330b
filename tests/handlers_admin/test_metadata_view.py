"""Metadata answers never name a leader or an ISR member that the same answer's broker list
says is gone (the ZooKeeper backend reads brokers and partition states separately)."""

from __future__ import annotations

import uuid

from controller.interface import PartitionInfo, TopicInfo
from kbroker.handlers.metadata import topic_metadata
from wire.errors import ErrorCode

TOPIC_ID = uuid.uuid4()


def _topic(leader: int, isr: tuple[int, ...]) -> TopicInfo:
    partition = PartitionInfo(0, leader, 4, replicas=(1, 2, 3), isr=isr)
    return TopicInfo("orders", TOPIC_ID, (partition,))


def test_a_consistent_view_is_answered_as_it_is() -> None:
    (p,) = topic_metadata(_topic(3, (3, 1, 2)), frozenset({1, 2, 3})).partitions
    assert (p.error_code, p.leader_id, p.isr_nodes, p.offline_replicas) == (
        ErrorCode.NONE,
        3,
        [3, 1, 2],
        [],
    )


def test_a_gone_broker_is_neither_leader_nor_in_sync() -> None:
    # Broker 3's registration is gone, its leadership and ISR membership not yet.
    (p,) = topic_metadata(_topic(3, (3, 1, 2)), frozenset({1, 2})).partitions
    assert p.error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert p.leader_id == -1
    assert p.leader_epoch == 4
    assert p.replica_nodes == [1, 2, 3]
    assert p.isr_nodes == [1, 2]
    assert p.offline_replicas == [3]


def test_a_gone_follower_leaves_the_isr_of_the_answer() -> None:
    (p,) = topic_metadata(_topic(1, (1, 2, 3)), frozenset({1, 2})).partitions
    assert (p.error_code, p.leader_id, p.isr_nodes) == (ErrorCode.NONE, 1, [1, 2])
