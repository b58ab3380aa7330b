"""CreateTopics, DeleteTopics, CreatePartitions: topic administration through the metadata
backend (which persists the change and tells the broker to create or delete logs).

Each topic succeeds or fails on its own; the error goes into that topic's result, with a
message where the version has the field. A topic named more than once in one request is
refused with INVALID_REQUEST, as Kafka does.

Authorization (kbroker/authorization.py), as Kafka's, before anything else about the topic
(so that a refusal tells nothing about its existence): creating needs CREATE on the cluster
or the topic, deleting DELETE on the topic, adding partitions ALTER on the topic; a topic
refused is TOPIC_AUTHORIZATION_FAILED. A mirror topic (``kbroker.mirror.*`` configs) also
needs ALTER on the cluster (kbroker/mirror/access.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.config import describe_topic_configs, validate_topic_configs
from kbroker.dynamic_config import stored_dynamic_configs
from kbroker.handlers.throttling import MutationQuota
from kbroker.mirror.access import changes_link, check_link_access
from kbroker.mirror.secrets import encode_secrets, encoder_from
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from wire.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from wire.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from wire.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from wire.messages.delete_topics_request import DeleteTopicsRequest
from wire.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from wire.messages.request_header import RequestHeader
from wire.primitives import ZERO_UUID

if TYPE_CHECKING:
    import uuid

    from controller.interface import TopicInfo
    from kbroker.broker import Broker


def _refused(broker: Broker, operation: AclOperation, topic: str) -> KafkaError | None:
    if authorize(broker, operation, ResourceType.TOPIC, topic):
        return None
    return KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")


def _duplicates(names: Iterable[object]) -> set[object]:
    return {name for name, count in Counter(names).items() if count > 1}


# --- CreateTopics ---------------------------------------------------------------------------


async def _create_topic(broker: Broker, topic: CreatableTopic, validate_only: bool) -> TopicInfo:
    assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
    if len(assignments) != len(topic.assignments):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "A partition is assigned more than once"
        )
    if _duplicates(c.name for c in topic.configs):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "A config is given more than once")
    configs = {c.name: c.value for c in topic.configs}
    if any(value is None for value in configs.values()):
        raise KafkaError(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs")
    stored = {k: v for k, v in configs.items() if v is not None}
    if changes_link({}, stored):
        check_link_access(broker, f"mirror topic {topic.name}")
        # Checked in clear, then stored with its secrets encrypted.
        validate_topic_configs(stored)
        stored = encode_secrets(stored, {}, encoder_from(broker.config.get))
    return await broker.metadata.create_topic(
        topic.name,
        topic.num_partitions,
        topic.replication_factor,
        assignments=assignments or None,
        configs=stored,
        validate_only=validate_only,
    )


def _created(broker: Broker, info: TopicInfo, version: int) -> CreatableTopicResult:
    result = CreatableTopicResult(name=info.name, error_message=None)
    if version >= 7:
        result.topic_id = info.topic_id
    if version >= 5:
        result.num_partitions = len(info.partitions)
        result.replication_factor = len(info.partitions[0].replicas) if info.partitions else -1
        entries = describe_topic_configs(
            info.configs, broker.config, stored_dynamic_configs(broker.metadata)
        )
        result.configs = [
            CreatableTopicConfigs(
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=e.source,
                is_sensitive=e.sensitive,
            )
            for e in entries
        ]
    return result


def _create_failed(name: str, error: KafkaError, version: int) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=name,
        error_code=error.code,
        error_message=error.message if version >= 1 else "",
    )


async def handle_create_topics(
    broker: Broker, header: RequestHeader, request: CreateTopicsRequest, version: int
) -> CreateTopicsResponse:
    duplicates = _duplicates(t.name for t in request.topics)
    validate_only = request.validate_only if version >= 1 else False
    results: list[CreatableTopicResult] = []
    reported: set[str] = set()
    quota = MutationQuota(broker, header, strict=version >= 6)
    may_create_any = authorize(broker, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
    for topic in request.topics:
        if topic.name in duplicates:
            if topic.name not in reported:
                reported.add(topic.name)
                error = KafkaError(
                    ErrorCode.INVALID_REQUEST, f"Topic {topic.name!r} is named more than once"
                )
                results.append(_create_failed(topic.name, error, version))
            continue
        refusal = None if may_create_any else _refused(broker, AclOperation.CREATE, topic.name)
        if refusal is not None:
            results.append(_create_failed(topic.name, refusal, version))
            continue
        try:
            quota.check()
            info = await _create_topic(broker, topic, validate_only)
        except KafkaError as e:
            results.append(_create_failed(topic.name, e, version))
            continue
        if not validate_only:
            quota.record(len(info.partitions))
        results.append(_created(broker, info, version))
    response = CreateTopicsResponse(topics=results)
    quota.finish(response, has_field=version >= 2)
    return response


# --- DeleteTopics ---------------------------------------------------------------------------


def _delete_result(
    name: str | None,
    topic_id: uuid.UUID,
    version: int,
    error: KafkaError | None = None,
) -> DeletableTopicResult:
    result = DeletableTopicResult(name=name)
    if version >= 6:
        result.topic_id = topic_id
    if error is not None:
        result.error_code = error.code
        if version >= 5:
            result.error_message = error.message
    return result


async def _delete_one(
    broker: Broker, name: str | None, topic_id: uuid.UUID, version: int, quota: MutationQuota
) -> DeletableTopicResult:
    if name is not None and topic_id != ZERO_UUID:
        error = KafkaError(
            ErrorCode.INVALID_REQUEST, "A topic may be named by name or by id, not both"
        )
        return _delete_result(name, topic_id, version, error)
    if name is None:
        info = broker.metadata.topic_by_id(topic_id)
        if info is None:
            error = KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"No topic with id {topic_id}")
            return _delete_result(None, topic_id, version, error)
        refusal = _refused(broker, AclOperation.DELETE, info.name)
        if refusal is not None:
            return _delete_result(None, topic_id, version, refusal)
    else:
        refusal = _refused(broker, AclOperation.DELETE, name)
        if refusal is not None:
            return _delete_result(name, topic_id, version, refusal)
        info = broker.metadata.topic(name)
        if info is None:
            error = KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist"
            )
            return _delete_result(name, topic_id, version, error)
    if not broker.config.delete_topic_enable:
        # Kafka fails the whole request of versions 0-2, which have no dedicated code.
        code = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
        error = KafkaError(code, "Topic deletion is disabled (delete.topic.enable=false)")
        return _delete_result(info.name, info.topic_id, version, error)
    try:
        quota.check()
        await broker.metadata.delete_topic(info.name)
    except KafkaError as e:
        return _delete_result(info.name, info.topic_id, version, e)
    quota.record(len(info.partitions))
    return _delete_result(info.name, info.topic_id, version)


async def handle_delete_topics(
    broker: Broker, header: RequestHeader, request: DeleteTopicsRequest, version: int
) -> DeleteTopicsResponse:
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    dup_names = _duplicates(name for name, _ in wanted if name is not None)
    dup_ids = _duplicates(tid for name, tid in wanted if name is None)
    results: list[DeletableTopicResult] = []
    quota = MutationQuota(broker, header, strict=version >= 5)
    for name, topic_id in wanted:
        if name in dup_names or (name is None and topic_id in dup_ids):
            error = KafkaError(ErrorCode.INVALID_REQUEST, "Topic is named more than once")
            results.append(_delete_result(name, topic_id, version, error))
            continue
        results.append(await _delete_one(broker, name, topic_id, version, quota))
    response = DeleteTopicsResponse(responses=results)
    quota.finish(response, has_field=version >= 1)
    return response


# --- CreatePartitions -----------------------------------------------------------------------


async def _grow(
    broker: Broker, topic: CreatePartitionsTopic, validate_only: bool, quota: MutationQuota
) -> CreatePartitionsTopicResult:
    # An empty assignment list is taken as "no assignment", like a null one.
    refusal = _refused(broker, AclOperation.ALTER, topic.name)
    if refusal is not None:
        return CreatePartitionsTopicResult(
            name=topic.name, error_code=refusal.code, error_message=refusal.message
        )
    assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
    existing = broker.metadata.topic(topic.name)
    try:
        quota.check()
        await broker.metadata.create_partitions(
            topic.name, topic.count, assignments=assignments, validate_only=validate_only
        )
    except KafkaError as e:
        return CreatePartitionsTopicResult(
            name=topic.name, error_code=e.code, error_message=e.message
        )
    if existing is not None and not validate_only:
        quota.record(topic.count - len(existing.partitions))
    return CreatePartitionsTopicResult(name=topic.name)


async def handle_create_partitions(
    broker: Broker, header: RequestHeader, request: CreatePartitionsRequest, version: int
) -> CreatePartitionsResponse:
    duplicates = _duplicates(t.name for t in request.topics)
    results: list[CreatePartitionsTopicResult] = []
    reported: set[str] = set()
    quota = MutationQuota(broker, header, strict=version >= 3)
    for topic in request.topics:
        if topic.name in duplicates:
            if topic.name not in reported:
                reported.add(topic.name)
                results.append(
                    CreatePartitionsTopicResult(
                        name=topic.name,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message="Duplicate topic in request",
                    )
                )
            continue
        results.append(await _grow(broker, topic, request.validate_only, quota))
    response = CreatePartitionsResponse(results=results)
    quota.finish(response, has_field=True)
    return response
