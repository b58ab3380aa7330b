"""Groups of every type over the protocol, for ``kbroker groups`` and the web console: what
there is (ListGroups v5 with each group's type, KIP-848), who is in a group and what it owns
(DescribeGroups for classic groups, ConsumerGroupDescribe for consumer groups,
ShareGroupDescribe for share groups), committed offsets of many groups at once (OffsetFetch
v8+ batches groups, KIP-709), the lag per partition, and offset resets as a plan first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbroker.cli.ops.admin import OpsError, _check
from kbroker.client import EARLIEST, LATEST, BrokerConnection, KafkaClient, TopicPartition
from kbroker.client_core.requests import offset_fetch_request, offset_fetch_results
from kbroker.group.consumer_protocol import PROTOCOL_TYPE, assigned_partitions
from wire.api_keys import ApiKey
from wire.errors import DecodeError, ErrorCode, KafkaError
from wire.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from wire.messages.describe_groups_request import DescribeGroupsRequest
from wire.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from wire.messages.list_groups_request import ListGroupsRequest
from wire.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestGroup
from wire.messages.share_group_describe_request import ShareGroupDescribeRequest

CLASSIC = "classic"
CONSUMER = "consumer"
SHARE = "share"
# States in which a classic group has members, so offsets cannot be changed from outside.
ACTIVE_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Assigning", "Reconciling")
# OffsetFetch v8+ carries many groups; a bound keeps each request and answer modest.
GROUPS_PER_OFFSET_FETCH = 100
FIRST_BATCHED_OFFSET_FETCH = 8


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    group_type: str  # classic, consumer, share, streams; classic before ListGroups v5
    protocol_type: str
    state: str
    coordinator: int


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    # Consumer groups (KIP-848): where the coordinator is taking the member, and its epoch.
    target: tuple[TopicPartition, ...] = ()
    epoch: int | None = None
    subscription: tuple[str, ...] = ()
    subscription_regex: str | None = None
    rack: str | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    group_type: str
    state: str
    protocol_type: str
    assignor: str  # classic: the protocol chosen; consumer and share: the assignor
    epoch: int | None  # consumer and share groups: the group epoch
    members: tuple[MemberDescription, ...]
    # Consumer and share groups: the epoch of the target assignment (behind the group epoch
    # while the assignor has yet to run).
    assignment_epoch: int | None = None


@dataclass(frozen=True)
class LagRow:
    topic: str
    partition: int
    committed: int | None
    log_end: int
    member_id: str
    host: str
    client_id: str
    # The lag as the broker reports it (a share group's, KIP-1226), over the one computed here.
    reported_lag: int | None = None

    @property
    def lag(self) -> int | None:
        if self.reported_lag is not None:
            return self.reported_lag
        return None if self.committed is None else max(self.log_end - self.committed, 0)


def lag_rows(
    committed: Mapping[TopicPartition, tuple[int, str]],
    log_ends: Mapping[TopicPartition, int],
    owners: Mapping[TopicPartition, tuple[str, str, str]],
) -> list[LagRow]:
    """One row per partition that has a committed offset or an owner."""
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        member_id, host, client_id = owners.get(tp, ("", "", ""))
        offset = committed.get(tp)
        rows.append(
            LagRow(
                tp[0],
                tp[1],
                None if offset is None else offset[0],
                log_ends.get(tp, 0),
                member_id,
                host,
                client_id,
            )
        )
    return rows


def owners(group: GroupDescription) -> dict[TopicPartition, tuple[str, str, str]]:
    """Partition -> (member id, host, client id) of the member that owns it."""
    return {tp: (m.member_id, m.host, m.client_id) for m in group.members for tp in m.assignment}


def clamp(offset: int, earliest: int, latest: int) -> int:
    """Kafka's reset tool keeps targets within the log."""
    return min(max(offset, earliest), latest)


async def list_groups(
    client: KafkaClient, types: Sequence[str] = (), states: Sequence[str] = ()
) -> list[ListedGroup]:
    """Every group on every broker (of ``types`` and in ``states`` only, when given; both
    compared ignoring case, as Kafka's coordinator compares them), sorted by id. The broker
    filters where it can (ListGroups v4 states, v5 types, KIP-518 and KIP-848); what an
    older broker cannot filter is filtered here."""
    wanted_types = {t.lower() for t in types}
    wanted_states = {s.lower() for s in states}
    await client.metadata([])
    found: dict[str, ListedGroup] = {}
    for node_id, address in sorted(client.brokers.items()):
        connection = await client.connection(address)
        version = connection.version(ApiKey.LIST_GROUPS)
        request = ListGroupsRequest(
            states_filter=list(states) if version >= 4 else [],
            types_filter=list(types) if version >= 5 else [],
        )
        response = await connection.call(ApiKey.LIST_GROUPS, version, request)
        _check(response.error_code, None, f"groups of broker {node_id}")
        for g in response.groups:
            group_type = g.group_type if version >= 5 and g.group_type else CLASSIC
            state = g.group_state if version >= 4 else ""
            if wanted_types and group_type.lower() not in wanted_types:
                continue
            if wanted_states and state.lower() not in wanted_states:
                continue
            found[g.group_id] = ListedGroup(g.group_id, group_type, g.protocol_type, state, node_id)
    return sorted(found.values(), key=lambda g: g.group_id)


def _partitions(topic_partitions: Iterable[Any]) -> tuple[TopicPartition, ...]:
    return tuple(sorted((t.topic_name, p) for t in topic_partitions for p in t.partitions))


async def describe_group(client: KafkaClient, group_id: str, group_type: str) -> GroupDescription:
    """Members and assignments, asked the way the group's type is described."""

    async def attempt(connection: BrokerConnection) -> GroupDescription:
        if group_type == CONSUMER:
            return await _describe_consumer(connection, group_id)
        if group_type == SHARE:
            return await _describe_share(connection, group_id)
        return await _describe_classic(connection, group_id)

    return await client.at_coordinator(group_id, attempt)


async def describe_any_group(client: KafkaClient, group_id: str) -> GroupDescription:
    """A group of whatever type it is, found the way Kafka's admin client finds it:
    ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND for a group that is not a consumer group,
    then ShareGroupDescribe for one that is not a share group, then DescribeGroups (which
    answers a group that does not exist as Dead). APIs the coordinator does not serve are
    skipped."""

    async def attempt(connection: BrokerConnection) -> GroupDescription:
        for api, describe in (
            (ApiKey.CONSUMER_GROUP_DESCRIBE, _describe_consumer),
            (ApiKey.SHARE_GROUP_DESCRIBE, _describe_share),
        ):
            if api not in connection.versions:
                continue
            try:
                return await describe(connection, group_id)
            except KafkaError as exc:
                if exc.code != ErrorCode.GROUP_ID_NOT_FOUND:
                    raise
        return await _describe_classic(connection, group_id)

    return await client.at_coordinator(group_id, attempt)


def _raise_for(code: int, message: str | None, group_id: str) -> None:
    if code != ErrorCode.NONE:
        raise KafkaError(ErrorCode(code), message or f"describe {group_id!r}")


async def _describe_classic(connection: BrokerConnection, group_id: str) -> GroupDescription:
    response, _ = await connection.request(
        ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group_id])
    )
    g = response.groups[0]
    _raise_for(g.error_code, None, group_id)
    members = []
    for m in g.members:
        assignment: tuple[TopicPartition, ...] = ()
        if g.protocol_type == PROTOCOL_TYPE and m.member_assignment:
            try:
                assigned = assigned_partitions(m.member_assignment)
            except DecodeError:
                assigned = {}
            assignment = tuple(sorted((t, p) for t, ps in assigned.items() for p in ps))
        members.append(
            MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment
            )
        )
    return GroupDescription(
        group_id, CLASSIC, g.group_state, g.protocol_type, g.protocol_data, None, tuple(members)
    )


async def _describe_consumer(connection: BrokerConnection, group_id: str) -> GroupDescription:
    response, _ = await connection.request(
        ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(group_ids=[group_id])
    )
    g = response.groups[0]
    _raise_for(g.error_code, g.error_message, group_id)
    members = tuple(
        MemberDescription(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            _partitions(m.assignment.topic_partitions),
            _partitions(m.target_assignment.topic_partitions),
            m.member_epoch,
            tuple(sorted(m.subscribed_topic_names)),
            m.subscribed_topic_regex or None,
            m.rack_id,
        )
        for m in g.members
    )
    return GroupDescription(
        group_id,
        CONSUMER,
        g.group_state,
        PROTOCOL_TYPE,
        g.assignor_name,
        g.group_epoch,
        members,
        g.assignment_epoch,
    )


async def _describe_share(connection: BrokerConnection, group_id: str) -> GroupDescription:
    response, _ = await connection.request(
        ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(group_ids=[group_id])
    )
    g = response.groups[0]
    _raise_for(g.error_code, g.error_message, group_id)
    members = tuple(
        MemberDescription(
            m.member_id,
            None,
            m.client_id,
            m.client_host,
            _partitions(m.assignment.topic_partitions),
            (),
            m.member_epoch,
            tuple(sorted(m.subscribed_topic_names)),
            None,
            m.rack_id,
        )
        for m in g.members
    )
    return GroupDescription(
        group_id,
        SHARE,
        g.group_state,
        SHARE,
        g.assignor_name,
        g.group_epoch,
        members,
        g.assignment_epoch,
    )


async def share_group_offsets(client: KafkaClient, group_id: str) -> dict[TopicPartition, int]:
    """A share group's start offset per partition (KIP-932's DescribeShareGroupOffsets): the
    first offset not yet acknowledged. Empty where the broker does not serve it."""
    return {tp: start for tp, (start, _) in (await share_group_progress(client, group_id)).items()}


async def share_group_progress(
    client: KafkaClient, group_id: str
) -> dict[TopicPartition, tuple[int, int | None]]:
    """A share group's start offset and lag per partition (DescribeShareGroupOffsets; the lag
    is the broker's, KIP-1226, v1+: records from the start offset to the high watermark not
    yet delivered for good; None where the broker does not say). Empty where the broker does
    not serve the API."""

    async def attempt(
        connection: BrokerConnection,
    ) -> dict[TopicPartition, tuple[int, int | None]]:
        if ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS not in connection.versions:
            return {}
        request = DescribeShareGroupOffsetsRequest(
            groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]
        )
        response, _ = await connection.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request)
        g = response.groups[0]
        _raise_for(g.error_code, g.error_message, group_id)
        return {
            (t.topic_name, p.partition_index): (p.start_offset, p.lag if p.lag >= 0 else None)
            for t in g.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE and p.start_offset >= 0
        }

    return await client.at_coordinator(group_id, attempt)


async def committed_offsets(
    client: KafkaClient, group_ids: Iterable[str]
) -> dict[str, dict[TopicPartition, int]]:
    """The committed offsets of many groups: one OffsetFetch per coordinator and up to
    GROUPS_PER_OFFSET_FETCH groups where the broker batches them (v8+), else one a group.
    A group whose coordinator cannot answer now is left out."""
    by_coordinator: dict[int, tuple[BrokerConnection, list[str]]] = {}
    for group_id in dict.fromkeys(group_ids):
        try:
            connection = await client.coordinator(group_id)
        except (KafkaError, OSError, TimeoutError):
            continue
        by_coordinator.setdefault(id(connection), (connection, []))[1].append(group_id)
    found: dict[str, dict[TopicPartition, int]] = {}
    for connection, groups in by_coordinator.values():
        version = connection.version(ApiKey.OFFSET_FETCH)
        if version < FIRST_BATCHED_OFFSET_FETCH:
            for group_id in groups:
                request = offset_fetch_request(group_id, version)
                response = await connection.call(ApiKey.OFFSET_FETCH, version, request)
                error, partitions = offset_fetch_results(response, version)
                if error == ErrorCode.NONE:
                    found[group_id] = {
                        tp: offset
                        for tp, (p_error, offset, _) in partitions.items()
                        if p_error == ErrorCode.NONE and offset >= 0
                    }
            continue
        for start in range(0, len(groups), GROUPS_PER_OFFSET_FETCH):
            chunk = groups[start : start + GROUPS_PER_OFFSET_FETCH]
            request = OffsetFetchRequest(
                groups=[OffsetFetchRequestGroup(group_id=g, topics=None) for g in chunk]
            )
            response = await connection.call(ApiKey.OFFSET_FETCH, version, request)
            for g in response.groups:
                if g.error_code != ErrorCode.NONE:
                    continue
                found[g.group_id] = {
                    (t.name, p.partition_index): p.committed_offset
                    for t in g.topics
                    for p in t.partitions
                    if p.error_code == ErrorCode.NONE and p.committed_offset >= 0
                }
    return found


@dataclass(frozen=True)
class ResetTarget:
    """Where a reset moves offsets: ``earliest``, ``latest``, ``offset`` (value) or
    ``timestamp`` (value, epoch ms; the end of the log where no record is that recent)."""

    kind: str
    value: int | None = None


@dataclass(frozen=True)
class PlannedOffset:
    topic: str
    partition: int
    current: int | None
    new: int


async def plan_reset(
    client: KafkaClient,
    group_id: str,
    partitions: Sequence[TopicPartition],
    target: ResetTarget,
) -> list[PlannedOffset]:
    """The offsets a reset would commit (a dry run: nothing is written), within each log."""
    if not partitions:
        raise OpsError("no partitions selected")
    committed = await client.committed(group_id)
    earliest = await client.list_offsets(partitions, EARLIEST)
    latest = await client.list_offsets(partitions, LATEST)
    if target.kind == "earliest":
        targets = earliest
    elif target.kind == "latest":
        targets = latest
    elif target.kind == "offset" and target.value is not None:
        targets = dict.fromkeys(partitions, target.value)
    elif target.kind == "timestamp" and target.value is not None:
        by_time = await client.list_offsets(partitions, target.value)
        targets = {tp: latest[tp] if o < 0 else o for tp, o in by_time.items()}
    else:
        raise OpsError(f"unknown reset target {target.kind!r}")
    return [
        PlannedOffset(
            t,
            p,
            committed[(t, p)][0] if (t, p) in committed else None,
            clamp(targets[(t, p)], earliest[(t, p)], latest[(t, p)]),
        )
        for t, p in sorted(set(partitions))
    ]


async def commit_offsets(
    client: KafkaClient,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    group_type: str | None = None,
) -> None:
    """Commit ``offsets`` for a group that has no active members (Kafka refuses commits from
    outside a live group). ``group_type``: how to describe the group; found out when None."""
    if group_type is None:
        described = await describe_any_group(client, group_id)
    else:
        described = await describe_group(client, group_id, group_type)
    state = described.state
    if state in ACTIVE_STATES:
        raise OpsError(
            f"group {group_id!r} is {state}: offsets can only be changed while it has no members"
        )
    errors = await client.commit(group_id, {tp: (o, "") for tp, o in offsets.items()})
    failed = {tp: e for tp, e in errors.items() if e != ErrorCode.NONE}
    if failed:
        detail = ", ".join(f"{t}-{p}: {e.name}" for (t, p), e in sorted(failed.items()))
        raise OpsError(f"commit to {group_id!r} failed for {detail}")


async def group_partitions(
    client: KafkaClient,
    committed: Iterable[TopicPartition],
    topics: Sequence[tuple[str, Sequence[int] | None]] | None,
) -> list[TopicPartition]:
    """The partitions a reset applies to: of the topics named (all of a topic's partitions
    where None), or with ``topics`` None every partition of the topics the group has offsets
    for."""
    if topics is None:
        names = sorted({t for t, _ in committed})
        existing = await client.partitions(names) if names else {}
        return [(t, p) for t in names for p in existing.get(t, [])]
    existing = await client.partitions(sorted({t for t, _ in topics}))
    selected: list[TopicPartition] = []
    for topic, chosen in topics:
        if topic not in existing:
            raise OpsError(f"topic {topic!r} does not exist")
        for p in chosen if chosen is not None else existing[topic]:
            if p not in existing[topic]:
                raise OpsError(f"topic {topic!r} has no partition {p}")
            selected.append((topic, p))
    return sorted(set(selected))
