"""Records of the consumer group protocol (KIP-848) in ``__consumer_offsets``.

A consumer group's state is kept in Kafka's record types, so that a coordinator that loads
the partition after a failover or a restart resumes the group without reassigning anything,
and Kafka's own tools could read them. A key starts with its int16 version, which names the
record type; its fields follow in the standard encoding (int16-length strings). A value starts
with an int16 version (0 for all of these) and is flexible (KIP-482): unsigned-varint
``length + 1`` strings and arrays, and a tagged-field buffer at the end of every struct.
A null value (tombstone) deletes the key; deleting a group writes one for each of its keys.

- 3, group metadata: key ``group``; value ``epoch: int32`` (the group epoch), tagged
  ``0: metadata_hash int64`` (of the subscribed topics' metadata, KIP-1101) and
  ``1: creation_time_ms int64``.
- 5, member metadata: key ``group, member``; value ``instance_id: nullable string,
  rack_id: nullable string, client_id: string, client_host: string,
  subscribed_topic_names: [string], subscribed_topic_regex: nullable string,
  rebalance_timeout_ms: int32, server_assignor: nullable string``, tagged
  ``0: classic_member_metadata {session_timeout_ms: int32, supported_protocols: [name: string,
  metadata: bytes]}`` (for members that use the classic protocol inside a consumer group).
- 6, target assignment metadata: key ``group``; value ``assignment_epoch: int32``, tagged
  ``0: assignment_timestamp int64``.
- 7, target assignment of a member: key ``group, member``; value
  ``topic_partitions: [topic_id: uuid, partitions: [int32]]``.
- 8, current assignment of a member: key ``group, member``; value ``member_epoch: int32,
  previous_member_epoch: int32, state: int8`` (0 stable, 1 unrevoked partitions, 2 unreleased
  partitions), ``assigned_partitions`` and ``partitions_pending_revocation`` as in 7, each
  topic with the tagged ``0: assignment_epochs nullable [int32]`` (Kafka 4.3: the member epoch
  at which each partition, in the same order, was assigned to the member; when it is null or
  of another length, every partition of the topic takes the member epoch, floored at 0).
- 16, a resolved regular expression: key ``group, regular_expression``; value
  ``topics: [string], version: int64, timestamp: int64``.

Record type 4 (the subscribed topics' metadata, replaced by the metadata hash in Kafka 4.1) is
read and ignored; so are the share and streams groups' types.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbroker.group.consumer_group import ClassicMembership
from wire.errors import DecodeError
from wire.primitives import Reader, Writer

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
VALUE_VERSION = 0

# topic id -> partitions, sorted.
Partitions = Mapping[uuid.UUID, tuple[int, ...]]
# topic id -> the assignment epoch of each partition, in the order of its Partitions tuple.
Epochs = Mapping[uuid.UUID, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """The key of a group-wide record: ``record`` is GROUP_METADATA or
    TARGET_ASSIGNMENT_METADATA."""

    record: int
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerMemberKey:
    """The key of a member's record: ``record`` is MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER
    or CURRENT_ASSIGNMENT."""

    record: int
    group: str
    member: str


@dataclass(frozen=True, slots=True)
class RegexKey:
    group: str
    regex: str


ConsumerKey = ConsumerGroupKey | ConsumerMemberKey | RegexKey


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int
    metadata_hash: int = 0
    creation_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # Set for a member that uses the classic protocol.
    classic: ClassicMembership | None = None


@dataclass(frozen=True, slots=True)
class TargetEpochValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class TargetMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Partitions
    pending_revocation: Partitions
    # Topics without epochs (a record written before Kafka 4.3) are left out.
    assigned_epochs: Epochs = field(default_factory=dict)
    pending_revocation_epochs: Epochs = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegexValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerValue = (
    GroupEpochValue
    | MemberMetadataValue
    | TargetEpochValue
    | TargetMemberValue
    | CurrentAssignmentValue
    | RegexValue
)

_GROUP_RECORDS = (GROUP_METADATA, TARGET_ASSIGNMENT_METADATA)
_MEMBER_RECORDS = (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_ASSIGNMENT)


# --- keys -------------------------------------------------------------------------------------


def encode_consumer_key(key: ConsumerKey) -> bytes:
    w = Writer()
    if isinstance(key, ConsumerGroupKey):
        w.int16(key.record)
        w.string(key.group)
    elif isinstance(key, ConsumerMemberKey):
        w.int16(key.record)
        w.string(key.group)
        w.string(key.member)
    else:
        w.int16(REGULAR_EXPRESSION)
        w.string(key.group)
        w.string(key.regex)
    return w.getvalue()


def decode_consumer_key(version: int, r: Reader) -> ConsumerKey | None:
    """The key of record type ``version`` (its version already read), or None for a type
    this coordinator does not keep."""
    if version in _GROUP_RECORDS:
        return ConsumerGroupKey(version, r.string())
    if version in _MEMBER_RECORDS:
        return ConsumerMemberKey(version, r.string(), r.string())
    if version == REGULAR_EXPRESSION:
        return RegexKey(r.string(), r.string())
    return None


# --- values -----------------------------------------------------------------------------------


def write_partitions(w: Writer, partitions: Partitions, epochs: Epochs | None = None) -> None:
    """``epochs``: written as each topic's tagged assignment epochs (record 8 only)."""
    w.array_len(len(partitions), True)
    for topic_id in sorted(partitions, key=lambda t: t.bytes):
        w.uuid(topic_id)
        indexes = tuple(partitions[topic_id])
        order = sorted(range(len(indexes)), key=indexes.__getitem__)
        w.array_len(len(order), True)
        for i in order:
            w.int32(indexes[i])
        topic_epochs = epochs.get(topic_id) if epochs is not None else None
        if topic_epochs is None:
            w.tagged_fields([])
            continue
        assert len(topic_epochs) == len(indexes)
        tagged = Writer()
        tagged.array_len(len(order), True)
        for i in order:
            tagged.int32(topic_epochs[i])
        w.tagged_fields([(0, tagged.getvalue())])


def read_partitions(r: Reader) -> dict[uuid.UUID, tuple[int, ...]]:
    return read_partitions_with_epochs(r)[0]


def read_partitions_with_epochs(
    r: Reader,
) -> tuple[dict[uuid.UUID, tuple[int, ...]], dict[uuid.UUID, tuple[int, ...]]]:
    """The partitions, and the tagged assignment epochs of the topics that have them with one
    epoch per partition (others fall back to the member epoch, as in Kafka 4.3)."""
    out: dict[uuid.UUID, tuple[int, ...]] = {}
    epochs: dict[uuid.UUID, tuple[int, ...]] = {}
    for _ in range(r.array_len(True)):
        topic_id = r.uuid()
        out[topic_id] = tuple(r.int32() for _ in range(r.array_len(True)))
        tags = _tagged(r)
        if 0 in tags:
            er = Reader(tags[0])
            count = er.nullable_array_len(True)
            if count == len(out[topic_id]):
                epochs[topic_id] = tuple(er.int32() for _ in range(count))
    return out, epochs


def int64_bytes(n: int) -> bytes:
    w = Writer()
    w.int64(n)
    return w.getvalue()


def encode_consumer_value(value: ConsumerValue) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    if isinstance(value, GroupEpochValue):
        w.int32(value.epoch)
        tags = []
        if value.metadata_hash != 0:
            tags.append((0, int64_bytes(value.metadata_hash)))
        if value.creation_time_ms != -1:
            tags.append((1, int64_bytes(value.creation_time_ms)))
        w.tagged_fields(tags)
    elif isinstance(value, MemberMetadataValue):
        w.compact_nullable_string(value.instance_id)
        w.compact_nullable_string(value.rack_id)
        w.compact_string(value.client_id)
        w.compact_string(value.client_host)
        w.array_len(len(value.subscribed_topic_names), True)
        for name in value.subscribed_topic_names:
            w.compact_string(name)
        w.compact_nullable_string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.compact_nullable_string(value.server_assignor)
        tags = []
        if value.classic is not None:
            classic = Writer()
            classic.int32(value.classic.session_timeout_ms)
            classic.array_len(len(value.classic.protocols), True)
            for name, metadata in value.classic.protocols:
                classic.compact_string(name)
                classic.compact_bytes(metadata)
                classic.tagged_fields([])
            classic.tagged_fields([])
            tags.append((0, classic.getvalue()))
        w.tagged_fields(tags)
    elif isinstance(value, TargetEpochValue):
        w.int32(value.assignment_epoch)
        w.tagged_fields(
            [(0, int64_bytes(value.assignment_timestamp))] if value.assignment_timestamp else []
        )
    elif isinstance(value, TargetMemberValue):
        write_partitions(w, value.partitions)
        w.tagged_fields([])
    elif isinstance(value, CurrentAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        write_partitions(w, value.assigned, value.assigned_epochs)
        write_partitions(w, value.pending_revocation, value.pending_revocation_epochs)
        w.tagged_fields([])
    else:
        w.array_len(len(value.topics), True)
        for topic in value.topics:
            w.compact_string(topic)
        w.int64(value.version)
        w.int64(value.timestamp)
        w.tagged_fields([])
    return w.getvalue()


def _tagged(r: Reader) -> dict[int, bytes]:
    return dict(r.unknown_tags())


def decode_consumer_value(key: ConsumerKey, data: bytes | memoryview) -> ConsumerValue:
    r = Reader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise DecodeError(f"unknown consumer group record value version {version}")
    value: ConsumerValue
    if isinstance(key, RegexKey):
        topics = tuple(r.compact_string() for _ in range(r.array_len(True)))
        value = RegexValue(topics, r.int64(), r.int64())
        r.unknown_tags()
    elif key.record == GROUP_METADATA:
        epoch = r.int32()
        tags = _tagged(r)
        value = GroupEpochValue(
            epoch,
            Reader(tags[0]).int64() if 0 in tags else 0,
            Reader(tags[1]).int64() if 1 in tags else -1,
        )
    elif key.record == TARGET_ASSIGNMENT_METADATA:
        epoch = r.int32()
        tags = _tagged(r)
        value = TargetEpochValue(epoch, Reader(tags[0]).int64() if 0 in tags else 0)
    elif key.record == MEMBER_METADATA:
        instance_id = r.compact_nullable_string()
        rack_id = r.compact_nullable_string()
        client_id = r.compact_string()
        client_host = r.compact_string()
        names = tuple(r.compact_string() for _ in range(r.array_len(True)))
        regex = r.compact_nullable_string()
        rebalance_timeout_ms = r.int32()
        assignor = r.compact_nullable_string()
        tags = _tagged(r)
        classic = None
        if 0 in tags:
            cr = Reader(tags[0])
            session_timeout_ms = cr.int32()
            protocols = []
            for _ in range(cr.array_len(True)):
                protocols.append((cr.compact_string(), cr.compact_bytes()))
                cr.unknown_tags()
            cr.unknown_tags()
            classic = ClassicMembership(session_timeout_ms, tuple(protocols))
        value = MemberMetadataValue(
            instance_id,
            rack_id,
            client_id,
            client_host,
            names,
            regex,
            rebalance_timeout_ms,
            assignor,
            classic,
        )
    elif key.record == TARGET_ASSIGNMENT_MEMBER:
        value = TargetMemberValue(read_partitions(r))
        r.unknown_tags()
    else:
        member_epoch = r.int32()
        previous = r.int32()
        state = r.int8()
        assigned, assigned_epochs = read_partitions_with_epochs(r)
        pending, pending_epochs = read_partitions_with_epochs(r)
        r.unknown_tags()
        value = CurrentAssignmentValue(
            member_epoch, previous, state, assigned, pending, assigned_epochs, pending_epochs
        )
    return value


@dataclass(slots=True)
class LoadedConsumerGroup:
    """What the records of one consumer group hold once replayed."""

    epoch: GroupEpochValue | None = None
    target_epoch: TargetEpochValue | None = None
    members: dict[str, MemberMetadataValue] = field(default_factory=dict)
    targets: dict[str, TargetMemberValue] = field(default_factory=dict)
    current: dict[str, CurrentAssignmentValue] = field(default_factory=dict)
    regexes: dict[str, RegexValue] = field(default_factory=dict)

    def apply(self, key: ConsumerKey, value: ConsumerValue | None) -> None:
        if isinstance(key, RegexKey):
            put_or_drop(self.regexes, key.regex, value)
        elif not isinstance(key, ConsumerMemberKey):
            if key.record == GROUP_METADATA:
                self.epoch = value if isinstance(value, GroupEpochValue) else None
            else:
                self.target_epoch = value if isinstance(value, TargetEpochValue) else None
        elif key.record == MEMBER_METADATA:
            put_or_drop(self.members, key.member, value)
        elif key.record == TARGET_ASSIGNMENT_MEMBER:
            put_or_drop(self.targets, key.member, value)
        else:
            put_or_drop(self.current, key.member, value)

    @property
    def empty(self) -> bool:
        return (
            self.epoch is None
            and self.target_epoch is None
            and not (self.members or self.targets or self.current or self.regexes)
        )


def put_or_drop(table: Mapping[str, object], name: str, value: object) -> None:
    assert isinstance(table, dict)
    if value is None:
        table.pop(name, None)
    else:
        table[name] = value
