"""Metadata: brokers, controller, topics with their partitions' leaders and replicas.

Topics that do not exist are created here when both the request (v4+, always
before) and auto.create.topics.enable allow it, with num.partitions and
default.replication.factor, as Kafka does. Brokers are listed with the addresses of the
listener the request came through.

Authorization (kbroker/authorization.py), as Kafka's: a request for every topic lists only
the topics the principal may DESCRIBE; a named topic it may not describe is answered
TOPIC_AUTHORIZATION_FAILED whether it exists or not (an unknown topic id, UNKNOWN_TOPIC_ID),
and creating a missing one also needs CREATE on the cluster or on the topic. The
authorized operations (KIP-430) are answered when asked for.

A broker's answer for a topic is kept (TopicMetadataCache) while the topic and the live
brokers stay the same, with its encoding for each version asked: with 10,000 partitions an
all-topics request otherwise built some 50,000 objects per request, and the full garbage
collections they set off over a large heap (about 160 ms each) came every other request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller.interface import TopicInfo
from kbroker.authorization import authorize, authorized_operations
from kbroker.handlers.common import client_brokers
from kbroker.security.acls import CLUSTER_NAME, OPERATIONS_NOT_REQUESTED, AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.messages.metadata_request import MetadataRequest
from wire.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from wire.messages.request_header import RequestHeader
from wire.primitives import Writer

if TYPE_CHECKING:
    from kbroker.broker import Broker

NO_LEADER = -1


def topic_metadata(topic: TopicInfo, live: frozenset[int]) -> MetadataResponseTopic:
    """A topic as the client sees it, checked against the broker list of the same answer.

    The ZooKeeper backend reads brokers and partition states in separate reads, so the
    states may still name a broker whose registration is already gone (the controller has
    not moved its leaderships or shrunk the ISRs yet). Kafka's brokers never show that:
    their controller sends the broker list and the states in one UpdateMetadata. So a
    leader that is not live is answered as LEADER_NOT_AVAILABLE (as Kafka's metadata cache
    does) and the ISR keeps only live brokers. Offline replicas are those of brokers not
    live and those in a failed log directory of a live broker (KIP-112).
    """
    partitions = []
    for p in topic.partitions:
        leader = p.leader if p.leader in live else NO_LEADER
        isr = p.isr if live.issuperset(p.isr) else tuple(r for r in p.isr if r in live)
        partitions.append(
            MetadataResponsePartition(
                error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=p.partition,
                leader_id=leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(isr),
                offline_replicas=[
                    r for r in p.replicas if r not in live or r in p.offline_replicas
                ],
            )
        )
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=partitions,
    )


def _topic_fields(answer: MetadataResponseTopic) -> dict[str, Any]:
    """What a copy of a topic answer takes over (not its authorized operations)."""
    return {
        "error_code": answer.error_code,
        "name": answer.name,
        "topic_id": answer.topic_id,
        "is_internal": answer.is_internal,
        "partitions": answer.partitions,
    }


class _EncodedTopic(MetadataResponseTopic):
    """A topic's answer that encodes itself once for each version and then reuses the bytes;
    shared between answers, so it is never changed after it is built."""

    __slots__ = ("_encodings",)

    def __init__(self, answer: MetadataResponseTopic) -> None:
        super().__init__(**_topic_fields(answer))
        self._encodings: dict[int, bytes] = {}

    def write(self, w: Writer, version: int) -> None:
        encoded = self._encodings.get(version)
        if encoded is None:
            own = Writer()
            super().write(own, version)
            encoded = self._encodings[version] = own.getvalue()
        w.buf += encoded


class TopicMetadataCache:
    """The answer for each topic, kept while the topic's state and the live brokers are the
    ones it was built from: a changed topic is a new TopicInfo, so an identity check is
    enough. `forget` is a metadata listener (controller/topic_cache.py) and drops deleted
    topics."""

    def __init__(self) -> None:
        self._answers: dict[str, tuple[TopicInfo, frozenset[int], _EncodedTopic]] = {}

    def answer(self, topic: TopicInfo, live: frozenset[int]) -> MetadataResponseTopic:
        kept = self._answers.get(topic.name)
        if kept is not None and kept[0] is topic and kept[1] == live:
            return kept[2]
        answer = _EncodedTopic(topic_metadata(topic, live))
        self._answers[topic.name] = (topic, live, answer)
        return answer

    def forget(self, topic: TopicInfo | None, name: str) -> None:
        if topic is None:
            self._answers.pop(name, None)


def _with_operations(topic: MetadataResponseTopic, operations: int) -> MetadataResponseTopic:
    """A copy of a (possibly shared) topic answer with its authorized operations (KIP-430)."""
    return MetadataResponseTopic(**_topic_fields(topic), topic_authorized_operations=operations)


def _may(broker: Broker, operation: AclOperation, topic: str) -> bool:
    return authorize(broker, operation, ResourceType.TOPIC, topic)


async def _named_topic(
    broker: Broker, name: str, auto_create: bool, live: frozenset[int]
) -> MetadataResponseTopic:
    if not _may(broker, AclOperation.DESCRIBE, name):
        return MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name)
    topic = broker.metadata.topic(name)
    if topic is not None:
        return broker.topic_answers.answer(topic, live)
    if auto_create and not (
        authorize(broker, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
        or _may(broker, AclOperation.CREATE, name)
    ):
        return MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name)
    if not auto_create:
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            await broker.metadata.create_topic(name, 1, 1, validate_only=True)
        except KafkaError as exc:
            if exc.code == ErrorCode.INVALID_TOPIC_EXCEPTION:
                error = exc.code
        return MetadataResponseTopic(error_code=error, name=name)
    try:
        topic = await broker.metadata.create_topic(
            name, broker.config.num_partitions, broker.config.default_replication_factor
        )
    except KafkaError as exc:
        if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            # Created by a concurrent request between the lookup and here.
            existing = broker.metadata.topic(name)
            if existing is not None:
                return broker.topic_answers.answer(existing, live)
        return MetadataResponseTopic(error_code=exc.code, name=name)
    return broker.topic_answers.answer(topic, live)


async def handle_metadata(
    broker: Broker, header: RequestHeader, request: MetadataRequest, version: int
) -> MetadataResponse:
    # v0: an empty list means every topic; v1+: null means every topic.
    all_topics = request.topics is None or (version == 0 and not request.topics)
    auto_create = broker.config.auto_create_topics_enable and (
        version < 4 or request.allow_auto_topic_creation
    )
    # One broker list for the whole answer, taken before any await (auto-creation): the
    # topics are checked against it.
    live = frozenset(b.broker_id for b in broker.metadata.brokers())
    listed = client_brokers(broker)
    topics: list[MetadataResponseTopic] = []
    if all_topics:
        answers = broker.topic_answers
        topics = [
            answers.answer(t, live)
            for t in broker.metadata.topics().values()
            if _may(broker, AclOperation.DESCRIBE, t.name)
        ]
    else:
        for wanted in request.topics or ():
            if wanted.name is None:
                by_id = broker.metadata.topic_by_id(wanted.topic_id)
                if by_id is None or not _may(broker, AclOperation.DESCRIBE, by_id.name):
                    topics.append(
                        MetadataResponseTopic(
                            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                            # Names are nullable from v12; before, an empty name.
                            name=None if version >= 12 else "",
                            topic_id=wanted.topic_id,
                        )
                    )
                else:
                    topics.append(broker.topic_answers.answer(by_id, live))
                continue
            topics.append(await _named_topic(broker, wanted.name, auto_create, live))
    if request.include_topic_authorized_operations:
        topics = [
            _with_operations(topic, authorized_operations(broker, ResourceType.TOPIC, topic.name))
            if topic.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED and topic.name
            else topic
            for topic in topics
        ]
    return MetadataResponse(
        brokers=[
            MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
            for b in listed
        ],
        cluster_id=broker.metadata.cluster_id,
        controller_id=broker.metadata.controller_id(),
        topics=topics,
        cluster_authorized_operations=(
            authorized_operations(broker, ResourceType.CLUSTER, CLUSTER_NAME)
            if request.include_cluster_authorized_operations
            else OPERATIONS_NOT_REQUESTED
        ),
    )
