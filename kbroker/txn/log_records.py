"""Records of the ``__transaction_state`` topic: their byte formats and replaying them.

The topic is compacted; the key is the transactional id and the latest value wins. A null value
(tombstone) is written when an idle transactional id expires (transactional.id.expiration.ms).
Integers are big-endian; ``string`` is an int16 length and UTF-8 bytes, arrays an int32 count
(-1 = null). Version 1 of the value is flexible (KIP-482): strings and arrays use
unsigned-varint length + 1, and each struct ends with a tagged-field buffer.

Key (Kafka's TransactionLogKey): ``version: int16 = 0, transactional_id: string``.

Value (Kafka's TransactionLogValue; kbroker writes version 0, as Kafka 3.x does, and version
1 for a transaction of transaction version 2 (KIP-890), and reads both):

    version: int16
    producer_id: int64
    producer_epoch: int16
    transaction_timeout_ms: int32
    transaction_status: int8      0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort,
                                  4 CompleteCommit, 5 CompleteAbort, 6 Dead, 7 PrepareEpochFence
    transaction_partitions: nullable [topic: string, partition_ids: [int32]]
    transaction_last_update_timestamp_ms: int64
    transaction_start_timestamp_ms: int64
    (v1 tagged fields: 0 previous_producer_id int64 (not written, ignored when read),
     1 next_producer_id int64, 2 client_transaction_version int16)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from wire.errors import DecodeError
from wire.primitives import Reader, Writer
from wire.records.batch import BatchHeader
from wire.records.record import Record

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
FLEXIBLE_VALUE_VERSION = 1
# Tagged fields of value version 1.
_NEXT_PRODUCER_ID_TAG = 1
_CLIENT_VERSION_TAG = 2

TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    """Kafka's transaction states, with their status byte in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name Kafka shows in DescribeTransactions and ListTransactions."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}


# Transaction versions (KIP-890): 0/1 add partitions through the client and keep the epoch
# across transactions; 2 adds them through the partition leaders and bumps the epoch at every
# transaction end.
TV_1 = 0
TV_2 = 2
NO_PRODUCER_ID = -1


@dataclass(frozen=True, slots=True)
class TxnValue:
    """What the log keeps of one transactional id. ``client_version`` is the transaction version
    of its last transaction (KIP-890); ``next_producer_id`` the producer id a transaction ending
    with an exhausted epoch hands over to once its markers are written."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int
    client_version: int = TV_1
    next_producer_id: int = NO_PRODUCER_ID


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    w.string(transactional_id)
    return w.getvalue()


def decode_key(data: bytes | memoryview) -> str:
    r = Reader(data)
    version = r.int16()
    if version != KEY_VERSION:
        raise DecodeError(f"unknown transaction log key version {version}")
    return r.string()


def encode_value(value: TxnValue | None) -> bytes | None:
    """Version 0, or version 1 for a transaction of version 2 (its tagged fields carry the
    client's transaction version and the next producer id, which version 0 cannot)."""
    if value is None:
        return None
    flexible = value.client_version >= TV_2
    w = Writer()
    w.int16(FLEXIBLE_VALUE_VERSION if flexible else VALUE_VERSION)
    w.int64(value.producer_id)
    w.int16(value.producer_epoch)
    w.int32(value.timeout_ms)
    w.int8(value.state.value)
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(value.partitions):
        by_topic.setdefault(topic, []).append(index)
    w.array_len(len(by_topic), flexible)
    for topic, indexes in by_topic.items():
        if flexible:
            w.compact_string(topic)
        else:
            w.string(topic)
        w.array_len(len(indexes), flexible)
        for index in indexes:
            w.int32(index)
        if flexible:
            w.tagged_fields([])
    w.int64(value.last_update_ms)
    w.int64(value.start_ms)
    if flexible:
        tags = []
        if value.next_producer_id != NO_PRODUCER_ID:
            tags.append((_NEXT_PRODUCER_ID_TAG, _int64(value.next_producer_id)))
        tags.append((_CLIENT_VERSION_TAG, _int16(value.client_version)))
        w.tagged_fields(tags)
    return w.getvalue()


def _int64(n: int) -> bytes:
    w = Writer()
    w.int64(n)
    return w.getvalue()


def _int16(n: int) -> bytes:
    w = Writer()
    w.int16(n)
    return w.getvalue()


def decode_value(data: bytes | memoryview) -> TxnValue:
    r = Reader(data)
    version = r.int16()
    if not 0 <= version <= FLEXIBLE_VALUE_VERSION:
        raise DecodeError(f"unknown transaction log value version {version}")
    flexible = version >= FLEXIBLE_VALUE_VERSION
    producer_id = r.int64()
    producer_epoch = r.int16()
    timeout_ms = r.int32()
    status = r.int8()
    try:
        state = TxnState(status)
    except ValueError as exc:
        raise DecodeError(f"unknown transaction status {status}") from exc
    partitions: set[TopicPartition] = set()
    for _ in range(max(r.nullable_array_len(flexible), 0)):
        topic = r.compact_string() if flexible else r.string()
        for _ in range(r.array_len(flexible)):
            partitions.add((topic, r.int32()))
        if flexible:
            r.unknown_tags()
    last_update_ms = r.int64()
    start_ms = r.int64()
    client_version, next_producer_id = TV_1, NO_PRODUCER_ID
    if flexible:
        for tag, data in r.unknown_tags():
            if tag == _NEXT_PRODUCER_ID_TAG:
                next_producer_id = Reader(data).int64()
            elif tag == _CLIENT_VERSION_TAG:
                client_version = Reader(data).int16()
    return TxnValue(
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        frozenset(partitions),
        last_update_ms,
        start_ms,
        client_version,
        next_producer_id,
    )


@dataclass(slots=True)
class LoadedTransactions:
    """What one ``__transaction_state`` partition holds once replayed (a ``StateLoader``)."""

    transactions: dict[str, TxnValue] = field(default_factory=dict)

    def apply_batch(self, header: BatchHeader, records: list[Record]) -> None:
        if header.is_control:
            return
        for record in records:
            if record.key is None:
                continue
            transactional_id = decode_key(record.key)
            if record.value is None:
                self.transactions.pop(transactional_id, None)
            else:
                self.transactions[transactional_id] = decode_value(record.value)
