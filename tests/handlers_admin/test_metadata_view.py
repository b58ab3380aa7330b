"""Metadata answers never name a leader or an ISR member that the same answer's broker list
says is gone (the ZooKeeper backend reads brokers and partition states separately); the
broker's cache of answers follows every change of a topic or of the live brokers."""

from __future__ import annotations

import uuid

from controller.interface import PartitionInfo, TopicInfo
from kbroker.dispatch import served_versions
from kbroker.handlers.metadata import TopicMetadataCache, topic_metadata
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.metadata_response import MetadataResponseTopic
from wire.primitives import Writer

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


def test_a_replica_in_a_failed_log_dir_of_a_live_broker_is_offline() -> None:
    # KIP-112: broker 2 lives on, its replica's directory failed (and left the ISR).
    partition = PartitionInfo(0, 1, 5, replicas=(1, 2, 3), isr=(1, 3), offline_replicas=(2,))
    (p,) = topic_metadata(
        TopicInfo("orders", TOPIC_ID, (partition,)), frozenset({1, 2, 3})
    ).partitions
    assert (p.leader_id, p.isr_nodes, p.offline_replicas) == (1, [1, 3], [2])


def _encoded(answer: MetadataResponseTopic, version: int) -> bytes:
    w = Writer()
    answer.write(w, version)
    return w.getvalue()


def test_a_cached_answer_encodes_as_a_fresh_one_in_every_version() -> None:
    topic, live = _topic(1, (1, 2, 3)), frozenset({1, 2, 3})
    cached = TopicMetadataCache().answer(topic, live)
    for version in served_versions(ApiKey.METADATA):
        fresh = _encoded(topic_metadata(topic, live), version)
        assert _encoded(cached, version) == fresh
        assert _encoded(cached, version) == fresh  # the kept encoding


def test_the_cache_follows_the_topic_and_the_live_brokers() -> None:
    cache = TopicMetadataCache()
    live = frozenset({1, 2, 3})
    topic = _topic(1, (1, 2, 3))
    first = cache.answer(topic, live)
    assert cache.answer(topic, frozenset({1, 2, 3})) is first
    moved = _topic(2, (2, 3))  # a new leader: the backend publishes a new TopicInfo
    assert cache.answer(moved, live).partitions[0].leader_id == 2
    (p,) = cache.answer(moved, frozenset({1, 3})).partitions
    assert (p.error_code, p.isr_nodes) == (ErrorCode.LEADER_NOT_AVAILABLE, [3])
    kept = cache.answer(moved, live)
    cache.forget(None, "orders")  # deleted
    assert cache.answer(moved, live) is not kept
