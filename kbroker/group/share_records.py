"""Records of share groups (KIP-932) in ``__consumer_offsets``, in Kafka 4.3's layouts (checked
against Kafka 4.3's own records with ``kafka-dump-log.sh --offsets-decoder``), so that a new
coordinator resumes a share group after a failover or a restart. Keys and values are encoded
as the consumer group's (kbroker/group/consumer_records.py): an int16 key version naming the
record type, then standard strings; values flexible, version 0.

- 10, member metadata: key ``group, member``; value ``rack_id: nullable string, client_id:
  string, client_host: string, subscribed_topic_names: [string]``.
- 11, group metadata: key ``group``; value ``epoch: int32, metadata_hash: int64``.
- 12, target assignment metadata: key ``group``; value ``assignment_epoch: int32``, tagged
  ``0: assignment_timestamp int64``.
- 13, target assignment of a member: key ``group, member``; value ``topic_partitions:
  [topic_id: uuid, partitions: [int32]]``.
- 14, current assignment of a member: key ``group, member``; value ``member_epoch: int32,
  previous_member_epoch: int32, state: int8, assigned_partitions`` as in 13.
- 15, share-state partition metadata: key ``group``; value ``initializing_topics,
  initialized_topics: [topic_id: uuid, topic_name: string, partitions: [int32]],
  deleting_topics: [topic_id: uuid, topic_name: string]``: which share partitions the share
  coordinator has state for (kbroker/share/), being set up, or being deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbroker.group.consumer_records import (
    Partitions,
    int64_bytes,
    put_or_drop,
    read_partitions,
    write_partitions,
)
from wire.errors import DecodeError
from wire.primitives import Reader, Writer

SHARE_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_TARGET_METADATA = 12
SHARE_TARGET_MEMBER = 13
SHARE_CURRENT_ASSIGNMENT = 14
SHARE_STATE_PARTITIONS = 15
VALUE_VERSION = 0

_GROUP_RECORDS = (SHARE_GROUP_METADATA, SHARE_TARGET_METADATA, SHARE_STATE_PARTITIONS)
_MEMBER_RECORDS = (SHARE_MEMBER_METADATA, SHARE_TARGET_MEMBER, SHARE_CURRENT_ASSIGNMENT)
SHARE_RECORDS = (*_GROUP_RECORDS, *_MEMBER_RECORDS)


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    record: int
    group: str


@dataclass(frozen=True, slots=True)
class ShareMemberKey:
    record: int
    group: str
    member: str


ShareKey = ShareGroupKey | ShareMemberKey


@dataclass(frozen=True, slots=True)
class ShareMemberValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareEpochValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ShareTargetEpochValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ShareTargetValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class ShareCurrentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Partitions


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShareStatePartitionsValue:
    initializing: tuple[TopicPartitionsInfo, ...] = ()
    initialized: tuple[TopicPartitionsInfo, ...] = ()
    # (topic id, topic name)
    deleting: tuple[tuple[uuid.UUID, str], ...] = ()


ShareValue = (
    ShareMemberValue
    | ShareEpochValue
    | ShareTargetEpochValue
    | ShareTargetValue
    | ShareCurrentValue
    | ShareStatePartitionsValue
)

SHARE_VALUE_TYPES = (
    ShareMemberValue,
    ShareEpochValue,
    ShareTargetEpochValue,
    ShareTargetValue,
    ShareCurrentValue,
    ShareStatePartitionsValue,
)


def encode_share_key(key: ShareKey) -> bytes:
    w = Writer()
    w.int16(key.record)
    w.string(key.group)
    if isinstance(key, ShareMemberKey):
        w.string(key.member)
    return w.getvalue()


def decode_share_key(version: int, r: Reader) -> ShareKey | None:
    if version in _GROUP_RECORDS:
        return ShareGroupKey(version, r.string())
    if version in _MEMBER_RECORDS:
        return ShareMemberKey(version, r.string(), r.string())
    return None


def _write_infos(w: Writer, infos: tuple[TopicPartitionsInfo, ...]) -> None:
    w.array_len(len(infos), True)
    for info in infos:
        w.uuid(info.topic_id)
        w.compact_string(info.topic_name)
        w.array_len(len(info.partitions), True)
        for p in info.partitions:
            w.int32(p)
        w.tagged_fields([])


def _read_infos(r: Reader) -> tuple[TopicPartitionsInfo, ...]:
    out = []
    for _ in range(r.array_len(True)):
        topic_id = r.uuid()
        name = r.compact_string()
        partitions = tuple(r.int32() for _ in range(r.array_len(True)))
        r.unknown_tags()
        out.append(TopicPartitionsInfo(topic_id, name, partitions))
    return tuple(out)


def encode_share_value(value: ShareValue) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    if isinstance(value, ShareMemberValue):
        w.compact_nullable_string(value.rack_id)
        w.compact_string(value.client_id)
        w.compact_string(value.client_host)
        w.array_len(len(value.subscribed_topic_names), True)
        for name in value.subscribed_topic_names:
            w.compact_string(name)
    elif isinstance(value, ShareEpochValue):
        w.int32(value.epoch)
        w.int64(value.metadata_hash)
    elif isinstance(value, ShareTargetEpochValue):
        w.int32(value.assignment_epoch)
        w.tagged_fields(
            [(0, int64_bytes(value.assignment_timestamp))] if value.assignment_timestamp else []
        )
        return w.getvalue()
    elif isinstance(value, ShareTargetValue):
        write_partitions(w, value.partitions)
    elif isinstance(value, ShareCurrentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        write_partitions(w, value.assigned)
    else:
        _write_infos(w, value.initializing)
        _write_infos(w, value.initialized)
        w.array_len(len(value.deleting), True)
        for topic_id, name in value.deleting:
            w.uuid(topic_id)
            w.compact_string(name)
            w.tagged_fields([])
    w.tagged_fields([])
    return w.getvalue()


def decode_share_value(key: ShareKey, data: bytes | memoryview) -> ShareValue:
    r = Reader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise DecodeError(f"unknown share group record value version {version}")
    value: ShareValue
    if key.record == SHARE_MEMBER_METADATA:
        rack = r.compact_nullable_string()
        client_id = r.compact_string()
        host = r.compact_string()
        names = tuple(r.compact_string() for _ in range(r.array_len(True)))
        value = ShareMemberValue(rack, client_id, host, names)
    elif key.record == SHARE_GROUP_METADATA:
        value = ShareEpochValue(r.int32(), r.int64())
    elif key.record == SHARE_TARGET_METADATA:
        epoch = r.int32()
        tags = dict(r.unknown_tags())
        return ShareTargetEpochValue(epoch, Reader(tags[0]).int64() if 0 in tags else 0)
    elif key.record == SHARE_TARGET_MEMBER:
        value = ShareTargetValue(read_partitions(r))
    elif key.record == SHARE_CURRENT_ASSIGNMENT:
        value = ShareCurrentValue(r.int32(), r.int32(), r.int8(), read_partitions(r))
    else:
        initializing = _read_infos(r)
        initialized = _read_infos(r)
        deleting = []
        for _ in range(r.array_len(True)):
            deleting.append((r.uuid(), r.compact_string()))
            r.unknown_tags()
        value = ShareStatePartitionsValue(initializing, initialized, tuple(deleting))
    r.unknown_tags()
    return value


@dataclass(slots=True)
class LoadedShareGroup:
    """What the records of one share group hold once replayed."""

    epoch: ShareEpochValue | None = None
    target_epoch: ShareTargetEpochValue | None = None
    state_partitions: ShareStatePartitionsValue | None = None
    members: dict[str, ShareMemberValue] = field(default_factory=dict)
    targets: dict[str, ShareTargetValue] = field(default_factory=dict)
    current: dict[str, ShareCurrentValue] = field(default_factory=dict)

    def apply(self, key: ShareKey, value: ShareValue | None) -> None:
        if isinstance(key, ShareMemberKey):
            table: Mapping[str, object] = {
                SHARE_MEMBER_METADATA: self.members,
                SHARE_TARGET_MEMBER: self.targets,
                SHARE_CURRENT_ASSIGNMENT: self.current,
            }[key.record]
            put_or_drop(table, key.member, value)
        elif key.record == SHARE_GROUP_METADATA:
            self.epoch = value if isinstance(value, ShareEpochValue) else None
        elif key.record == SHARE_TARGET_METADATA:
            self.target_epoch = value if isinstance(value, ShareTargetEpochValue) else None
        else:
            self.state_partitions = value if isinstance(value, ShareStatePartitionsValue) else None

    @property
    def empty(self) -> bool:
        return (
            self.epoch is None
            and self.target_epoch is None
            and self.state_partitions is None
            and not (self.members or self.targets or self.current)
        )
