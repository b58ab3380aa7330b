"""Share groups (KIP-932) over the protocol, for ``kbroker share-groups``: their start offsets
and lag (DescribeShareGroupOffsets; the lag is KIP-1226's, v1+), moving the start offsets of
an empty group (AlterShareGroupOffsets), forgetting a topic's (DeleteShareGroupOffsets), and
deleting groups (DeleteGroups). Each is asked of the group's coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kbroker.cli.ops.admin import _check
from kbroker.client import BrokerConnection, KafkaClient, TopicPartition
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from wire.messages.delete_groups_request import DeleteGroupsRequest
from wire.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from wire.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)

# The coordinator's errors that mean "ask again" (it moved or is loading).
_RETRIED = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


@dataclass(frozen=True)
class ShareOffset:
    topic: str
    partition: int
    leader_epoch: int
    start_offset: int
    lag: int | None  # None: the broker does not tell (DescribeShareGroupOffsets v0)


def _raise_retriable(code: int, message: str | None, what: str) -> None:
    """Raised as KafkaError, these make ``at_coordinator`` ask again."""
    if code in _RETRIED:
        raise KafkaError(ErrorCode(code), message or what)


async def share_offsets(client: KafkaClient, group_id: str) -> list[ShareOffset]:
    """Every partition the group has a start offset for, by topic and partition."""

    async def attempt(connection: BrokerConnection) -> list[ShareOffset]:
        request = DescribeShareGroupOffsetsRequest(
            groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]
        )
        response, version = await connection.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request)
        g = response.groups[0]
        _raise_retriable(g.error_code, g.error_message, f"offsets of {group_id!r}")
        _check(g.error_code, g.error_message, f"share group {group_id!r}")
        rows = []
        for t in g.topics:
            for p in t.partitions:
                _check(p.error_code, p.error_message, f"{t.topic_name}-{p.partition_index}")
                if p.start_offset < 0:
                    continue
                lag = p.lag if version >= 1 and p.lag >= 0 else None
                rows.append(
                    ShareOffset(
                        t.topic_name, p.partition_index, p.leader_epoch, p.start_offset, lag
                    )
                )
        return sorted(rows, key=lambda r: (r.topic, r.partition))

    return await client.at_coordinator(group_id, attempt)


async def alter_share_offsets(
    client: KafkaClient, group_id: str, offsets: Mapping[TopicPartition, int]
) -> None:
    """Set the start offsets (the group must have no members: NON_EMPTY_GROUP otherwise)."""
    by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset)
        )
    request = AlterShareGroupOffsetsRequest(
        group_id=group_id,
        topics=[
            AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )

    async def attempt(connection: BrokerConnection) -> None:
        response, _ = await connection.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, request)
        _raise_retriable(response.error_code, response.error_message, "alter offsets")
        _check(response.error_code, response.error_message, f"share group {group_id!r}")
        for t in response.responses:
            for p in t.partitions:
                _check(p.error_code, p.error_message, f"{t.topic_name}-{p.partition_index}")

    await client.at_coordinator(group_id, attempt)


async def delete_share_offsets(
    client: KafkaClient, group_id: str, topics: Iterable[str]
) -> dict[str, ErrorCode]:
    """Forget the group's state of ``topics``; the error of each topic."""
    request = DeleteShareGroupOffsetsRequest(
        group_id=group_id,
        topics=[DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics],
    )

    async def attempt(connection: BrokerConnection) -> dict[str, ErrorCode]:
        response, _ = await connection.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, request)
        _raise_retriable(response.error_code, response.error_message, "delete offsets")
        _check(response.error_code, response.error_message, f"share group {group_id!r}")
        return {t.topic_name: ErrorCode(t.error_code) for t in response.responses}

    return await client.at_coordinator(group_id, attempt)


async def delete_group(client: KafkaClient, group_id: str) -> ErrorCode:
    """Delete one group (with its share-partition state); its error."""

    async def attempt(connection: BrokerConnection) -> ErrorCode:
        response, _ = await connection.request(
            ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[group_id])
        )
        code = response.results[0].error_code
        _raise_retriable(code, None, f"delete {group_id!r}")
        return ErrorCode(code)

    return await client.at_coordinator(group_id, attempt)
