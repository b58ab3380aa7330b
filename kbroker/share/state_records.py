"""Records of the ``__share_group_state`` topic (KIP-932), byte for byte as Kafka 4.3 writes them.

The share coordinator keeps each share partition's durable state under the key
(group id, topic id, partition) as a *snapshot* (the whole state) followed by *updates* (the
batches of one write each, folded into the state in log order). Kafka's own tools decode
these records (``kafka-dump-log.sh --share-group-state-decoder``).

All integers are big-endian. A key starts with its int16 record type and is not flexible:
``string`` is an int16 length and UTF-8 bytes, ``uuid`` 16 bytes.

- type 0, ShareSnapshot key: ``group_id: string, topic_id: uuid, partition: int32``
- type 1, ShareUpdate key: the same fields

A value starts with its int16 version (0) and is flexible (KIP-482): arrays are an unsigned
varint ``count + 1``, and every struct (each state batch, then the value itself) ends with a
tagged-field buffer (an unsigned-varint count, then per field its tag, size and bytes).

- ShareSnapshot value: ``snapshot_epoch: int32, state_epoch: int32, leader_epoch: int32,
  start_offset: int64, create_timestamp: int64, write_timestamp: int64,
  state_batches: [first_offset: int64, last_offset: int64, delivery_state: int8,
  delivery_count: int16]``, tagged ``0: delivery_complete_count int32`` (KIP-1226, written
  only when it is not -1)
- ShareUpdate value: ``snapshot_epoch: int32, leader_epoch: int32, start_offset: int64``
  (-1: unchanged) ``, state_batches`` as above, tagged ``0: delivery_complete_count int32``

Delivery states: 0 available, 2 acknowledged, 4 archived. Deleting a share partition's state
writes a tombstone (null value) under its ShareSnapshot key.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from controller.zk_paths import kafka_uuid, parse_kafka_uuid
from kbroker.share.persister_api import StateBatch
from wire.errors import DecodeError
from wire.primitives import Reader, Writer

SHARE_GROUP_STATE_TOPIC = "__share_group_state"

SNAPSHOT = 0
UPDATE = 1
VALUE_VERSION = 0
DELIVERY_COMPLETE_COUNT_TAG = 0
# Kafka's "not known" for delivery_complete_count and start_offset.
UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """One share partition: a share group's view of a topic partition."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """``group:topic id:partition``, as FindCoordinator's share keys spell it (key type 2)
        and as Kafka hashes it to a partition of ``__share_group_state``."""
        return f"{self.group_id}:{kafka_uuid(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    create_timestamp: int
    write_timestamp: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]


ShareStateValue = ShareSnapshot | ShareUpdate

_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}(==)?")
_PARTITION = re.compile(r"[+-]?[0-9]+")


def parse_coordinator_key(text: str) -> ShareStateKey | None:
    """A FindCoordinator share key ``group:topic id:partition`` (the group may hold colons;
    the partition is not checked), None when it is not one, as Kafka's SharePartitionKey
    parses it."""
    parts = text.split(":")
    if len(parts) < 3:
        return None
    group, topic_id, partition = ":".join(parts[:-2]), parts[-2], parts[-1]
    if (
        not group.strip()
        or not _TOPIC_ID.fullmatch(topic_id)
        or not _PARTITION.fullmatch(partition)
    ):
        return None
    index = int(partition)
    if not -(2**31) <= index < 2**31:
        return None
    return ShareStateKey(group, parse_kafka_uuid(topic_id), index)


def encode_key(key: ShareStateKey, record_type: int) -> bytes:
    w = Writer()
    w.int16(record_type)
    w.string(key.group_id)
    w.uuid(key.topic_id)
    w.int32(key.partition)
    return w.getvalue()


def decode_key(data: bytes | memoryview) -> tuple[int, ShareStateKey] | None:
    """(record type, key); None for a record type this coordinator does not know, which a
    newer Kafka may write and the loader skips."""
    r = Reader(data)
    record_type = r.int16()
    if record_type not in (SNAPSHOT, UPDATE):
        return None
    return record_type, ShareStateKey(r.string(), r.uuid(), r.int32())


def _write_batches(w: Writer, batches: tuple[StateBatch, ...]) -> None:
    w.array_len(len(batches), compact=True)
    for batch in batches:
        w.int64(batch.first_offset)
        w.int64(batch.last_offset)
        w.int8(batch.delivery_state)
        w.int16(batch.delivery_count)
        w.tagged_fields([])


def _read_batches(r: Reader) -> tuple[StateBatch, ...]:
    batches = []
    for _ in range(r.array_len(compact=True)):
        batch = StateBatch(r.int64(), r.int64(), r.int8(), r.int16())
        r.unknown_tags()
        batches.append(batch)
    return tuple(batches)


def _write_delivery_complete_count(w: Writer, count: int) -> None:
    tags = []
    if count != UNKNOWN:
        tag = Writer()
        tag.int32(count)
        tags.append((DELIVERY_COMPLETE_COUNT_TAG, tag.getvalue()))
    w.tagged_fields(tags)


def _read_delivery_complete_count(r: Reader) -> int:
    tags = dict(r.unknown_tags())
    value = tags.get(DELIVERY_COMPLETE_COUNT_TAG)
    return UNKNOWN if value is None else Reader(value).int32()


def encode_value(value: ShareStateValue) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    w.int32(value.snapshot_epoch)
    if isinstance(value, ShareSnapshot):
        w.int32(value.state_epoch)
        w.int32(value.leader_epoch)
        w.int64(value.start_offset)
        w.int64(value.create_timestamp)
        w.int64(value.write_timestamp)
    else:
        w.int32(value.leader_epoch)
        w.int64(value.start_offset)
    _write_batches(w, value.batches)
    _write_delivery_complete_count(w, value.delivery_complete_count)
    return w.getvalue()


def decode_value(record_type: int, data: bytes | memoryview) -> ShareStateValue:
    r = Reader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise DecodeError(f"unknown share state value version {version}")
    snapshot_epoch = r.int32()
    if record_type == SNAPSHOT:
        state_epoch, leader_epoch, start_offset = r.int32(), r.int32(), r.int64()
        create_timestamp, write_timestamp = r.int64(), r.int64()
        batches = _read_batches(r)
        return ShareSnapshot(
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            start_offset,
            _read_delivery_complete_count(r),
            create_timestamp,
            write_timestamp,
            batches,
        )
    leader_epoch, start_offset = r.int32(), r.int64()
    batches = _read_batches(r)
    return ShareUpdate(
        snapshot_epoch, leader_epoch, start_offset, _read_delivery_complete_count(r), batches
    )
