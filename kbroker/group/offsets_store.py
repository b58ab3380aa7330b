"""Records of the ``__consumer_offsets`` topic: their byte formats and replaying them.

The topic is compacted; each record's key says what it is about and the latest value for a key
wins. A null value (tombstone) deletes the key. All integers are big-endian; ``string`` is an
int16 length and UTF-8 bytes (-1 = null for nullable ones), ``bytes`` an int32 length and the
bytes, arrays an int32 count. Version 4 of the values is flexible (KIP-482): strings, bytes and
arrays use unsigned-varint length + 1, and every struct ends with a tagged-field buffer.

Keys (int16 key version first):

- versions 0 and 1, offset commit: ``group: string, topic: string, partition: int32``.
  Kafka writes version 1.
- version 2, group metadata: ``group: string``.
- versions 3 and up belong to the newer group protocols: the consumer group protocol's
  (KIP-848) are in kbroker/group/consumer_records.py, the share groups' (KIP-932) in
  kbroker/group/share_records.py; the streams groups' are skipped when loading.

Offset commit value (int16 value version first; Kafka writes 3, or 1 when the commit carried
an explicit expire timestamp through OffsetCommit v2-v4's retention time):

- v0: ``offset: int64, metadata: string, commit_timestamp: int64``
- v1: ``offset: int64, metadata: string, commit_timestamp: int64, expire_timestamp: int64``
- v2: ``offset: int64, metadata: string, commit_timestamp: int64``
- v3: ``offset: int64, leader_epoch: int32, metadata: string, commit_timestamp: int64``
- v4: v3 in the flexible encoding.

Group metadata value (int16 value version first; Kafka writes 3):

- ``protocol_type: string, generation: int32, protocol: nullable string,
  leader: nullable string, current_state_timestamp: int64 (v2+),
  members: [member_id: string, group_instance_id: nullable string (v3+), client_id: string,
  client_host: string, rebalance_timeout: int32 (v1+), session_timeout: int32,
  subscription: bytes, assignment: bytes]``
- v4: v3 in the flexible encoding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kbroker.group.consumer_records import (
    ConsumerKey,
    ConsumerValue,
    LoadedConsumerGroup,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from kbroker.group.share_records import (
    SHARE_RECORDS,
    SHARE_VALUE_TYPES,
    LoadedShareGroup,
    ShareGroupKey,
    ShareKey,
    ShareMemberKey,
    ShareValue,
    decode_share_key,
    decode_share_value,
    encode_share_key,
    encode_share_value,
)
from wire.errors import DecodeError
from wire.primitives import Reader, Writer
from wire.records.batch import BatchHeader
from wire.records.control import COMMIT, control_type
from wire.records.record import Record

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
FLEXIBLE_VALUE_VERSION = 4
NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = NO_TIMESTAMP
    leader_epoch: int = NO_LEADER_EPOCH
    # Only set by OffsetCommit v2-v4 with a retention time (KIP-211 ignores it later).
    expire_timestamp: int = NO_TIMESTAMP


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = NO_TIMESTAMP
    members: tuple[MemberValue, ...] = ()


Key = OffsetKey | GroupKey | ConsumerKey | ShareKey
Value = OffsetValue | GroupValue | ConsumerValue | ShareValue


# --- encoding ---------------------------------------------------------------------------------


def encode_key(key: Key) -> bytes:
    if isinstance(key, ShareGroupKey | ShareMemberKey):
        return encode_share_key(key)
    if not isinstance(key, OffsetKey | GroupKey):
        return encode_consumer_key(key)
    w = Writer()
    if isinstance(key, OffsetKey):
        w.int16(OFFSET_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    else:
        w.int16(GROUP_KEY_VERSION)
        w.string(key.group)
    return w.getvalue()


def encode_offset_value(value: OffsetValue) -> bytes:
    w = Writer()
    if value.expire_timestamp != NO_TIMESTAMP:
        w.int16(OFFSET_VALUE_VERSION_WITH_EXPIRY)
        w.int64(value.offset)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
        w.int64(value.expire_timestamp)
    else:
        w.int16(OFFSET_VALUE_VERSION)
        w.int64(value.offset)
        w.int32(value.leader_epoch)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
    return w.getvalue()


def encode_group_value(value: GroupValue) -> bytes:
    w = Writer()
    w.int16(GROUP_VALUE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.nullable_string(value.protocol)
    w.nullable_string(value.leader)
    w.int64(value.current_state_timestamp)
    w.array_len(len(value.members), False)
    for m in value.members:
        w.string(m.member_id)
        w.nullable_string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.getvalue()


def encode_value(value: Value | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetValue):
        return encode_offset_value(value)
    if isinstance(value, GroupValue):
        return encode_group_value(value)
    if isinstance(value, SHARE_VALUE_TYPES):
        return encode_share_value(value)
    return encode_consumer_value(value)


# --- decoding ---------------------------------------------------------------------------------


class _Fields:
    """Reads strings, bytes and arrays in the standard or the flexible encoding."""

    def __init__(self, r: Reader, flexible: bool) -> None:
        self.r = r
        self.flexible = flexible

    def string(self) -> str:
        return self.r.compact_string() if self.flexible else self.r.string()

    def nullable_string(self) -> str | None:
        return self.r.compact_nullable_string() if self.flexible else self.r.nullable_string()

    def bytes_(self) -> bytes:
        return self.r.compact_bytes() if self.flexible else self.r.bytes_()

    def array_len(self) -> int:
        return self.r.array_len(self.flexible)

    def end_struct(self) -> None:
        if self.flexible:
            self.r.unknown_tags()


def decode_key(data: bytes | memoryview) -> Key | None:
    """The key, or None for a record type this coordinator does not keep."""
    r = Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.string())
    if version < 0:
        raise DecodeError(f"negative key version {version}")
    if version in SHARE_RECORDS:
        return decode_share_key(version, r)
    return decode_consumer_key(version, r)


def decode_offset_value(data: bytes | memoryview) -> OffsetValue:
    r = Reader(data)
    version = r.int16()
    if not 0 <= version <= FLEXIBLE_VALUE_VERSION:
        raise DecodeError(f"unknown offset commit value version {version}")
    f = _Fields(r, version >= FLEXIBLE_VALUE_VERSION)
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = f.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else NO_TIMESTAMP
    f.end_struct()
    return OffsetValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def decode_group_value(data: bytes | memoryview) -> GroupValue:
    r = Reader(data)
    version = r.int16()
    if not 0 <= version <= FLEXIBLE_VALUE_VERSION:
        raise DecodeError(f"unknown group metadata value version {version}")
    f = _Fields(r, version >= FLEXIBLE_VALUE_VERSION)
    protocol_type = f.string()
    generation = r.int32()
    protocol = f.nullable_string()
    leader = f.nullable_string()
    state_timestamp = r.int64() if version >= 2 else NO_TIMESTAMP
    members = []
    for _ in range(f.array_len()):
        member_id = f.string()
        instance_id = f.nullable_string() if version >= 3 else None
        client_id = f.string()
        client_host = f.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        if rebalance_timeout == -1:
            # v0 had no rebalance timeout; the session timeout served as both.
            rebalance_timeout = session_timeout
        subscription = f.bytes_()
        assignment = f.bytes_()
        f.end_struct()
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    f.end_struct()
    return GroupValue(protocol_type, generation, protocol, leader, state_timestamp, tuple(members))


def decode_value(key: Key, data: bytes | memoryview | None) -> Value | None:
    if data is None:
        return None
    if isinstance(key, OffsetKey):
        return decode_offset_value(data)
    if isinstance(key, GroupKey):
        return decode_group_value(data)
    if isinstance(key, ShareGroupKey | ShareMemberKey):
        return decode_share_value(key, data)
    return decode_consumer_value(key, data)


# --- replay -----------------------------------------------------------------------------------


@dataclass(slots=True)
class LoadedState:
    """What one ``__consumer_offsets`` partition holds once every record is applied in order."""

    groups: dict[str, GroupValue] = field(default_factory=dict)
    consumer_groups: dict[str, LoadedConsumerGroup] = field(default_factory=dict)
    share_groups: dict[str, LoadedShareGroup] = field(default_factory=dict)
    offsets: dict[str, dict[tuple[str, int], OffsetValue]] = field(default_factory=dict)
    # Transactional offset commits whose marker has not been read yet: producer id -> group
    # -> partition -> offset.
    pending_txn: dict[int, dict[str, dict[tuple[str, int], OffsetValue]]] = field(
        default_factory=dict
    )

    def apply_batch(self, header: BatchHeader, records: list[Record]) -> None:
        """One batch of the partition (``StateLoader``). A transactional batch holds
        TxnOffsetCommit offsets, pending until its producer's marker: a commit marker makes
        them committed, an abort marker drops them."""
        if header.is_control:
            pending = self.pending_txn.pop(header.producer_id, {})
            if records and control_type(records[0]) == COMMIT:
                for group, offsets in pending.items():
                    self.offsets.setdefault(group, {}).update(offsets)
            return
        if header.is_transactional:
            by_group = self.pending_txn.setdefault(header.producer_id, {})
            for record in records:
                key = decode_key(record.key) if record.key is not None else None
                if isinstance(key, OffsetKey) and record.value is not None:
                    value = decode_offset_value(record.value)
                    by_group.setdefault(key.group, {})[(key.topic, key.partition)] = value
            return
        for record in records:
            self.apply(record.key, record.value)

    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None) -> None:
        if key_bytes is None:
            return
        key = decode_key(key_bytes)
        if key is None:
            return
        value = decode_value(key, value_bytes)
        if isinstance(key, ShareGroupKey | ShareMemberKey):
            assert value is None or isinstance(value, SHARE_VALUE_TYPES)
            share = self.share_groups.setdefault(key.group, LoadedShareGroup())
            share.apply(key, value)
            if share.empty:
                del self.share_groups[key.group]
        elif not isinstance(key, OffsetKey | GroupKey):
            assert not isinstance(value, OffsetValue | GroupValue)
            loaded = self.consumer_groups.setdefault(key.group, LoadedConsumerGroup())
            loaded.apply(key, value)
            if loaded.empty:
                del self.consumer_groups[key.group]
        elif isinstance(key, OffsetKey):
            table = self.offsets.setdefault(key.group, {})
            tp = (key.topic, key.partition)
            if isinstance(value, OffsetValue):
                table[tp] = value
            else:
                table.pop(tp, None)
                if not table:
                    del self.offsets[key.group]
        elif isinstance(value, GroupValue):
            self.groups[key.group] = value
        else:
            self.groups.pop(key.group, None)


def replay(records: Iterable[tuple[bytes | None, bytes | None]]) -> LoadedState:
    """Apply (key, value) pairs in log order."""
    state = LoadedState()
    for key, value in records:
        state.apply(key, value)
    return state


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit wrap-around), which Kafka uses to
    place a group on an offsets-topic partition."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The offsets-topic partition whose leader coordinates ``group_id``: Kafka's
    ``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount``, where abs maps
    Integer.MIN_VALUE to 0."""
    return abs(java_string_hash(group_id)) % (1 << 31) % num_partitions
