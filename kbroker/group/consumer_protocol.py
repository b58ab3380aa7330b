"""The "consumer" embedded protocol: what consumers put in JoinGroup metadata and SyncGroup
assignments.

Both are an int16 version followed by the ConsumerProtocolSubscription /
ConsumerProtocolAssignment body of that version (never flexible). A version newer than the
specs is read with the newest known layout, since later versions only append fields; this is
how the Java client stays compatible with newer peers.
"""

from __future__ import annotations

from wire.errors import DecodeError
from wire.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    TopicPartition,
)
from wire.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from wire.primitives import Reader, Writer

PROTOCOL_TYPE = "consumer"


def _split(data: bytes, newest: int) -> tuple[int, memoryview]:
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise DecodeError(f"negative consumer protocol version {version}")
    return min(version, newest), memoryview(data)[2:]


def decode_subscription(metadata: bytes) -> ConsumerProtocolSubscription:
    """A consumer's JoinGroup metadata; DecodeError if it is not the consumer protocol's."""
    version, body = _split(metadata, ConsumerProtocolSubscription.MAX_VERSION)
    return ConsumerProtocolSubscription.read(Reader(body), version)


def subscribed_topics(metadata: bytes) -> list[str]:
    """The topics a consumer subscribes to; DecodeError if the metadata is not the consumer
    protocol's."""
    return list(decode_subscription(metadata).topics)


def protocol_version(metadata: bytes) -> int:
    """The version a consumer wrote its subscription in: its assignment is written in the same
    one, as Kafka does, so the consumer can read it (0 when it cannot be told)."""
    if len(metadata) < 2:
        return 0
    return max(0, min(Reader(metadata).int16(), ConsumerProtocolAssignment.MAX_VERSION))


def assigned_partitions(assignment: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of a consumer's assignment (empty for an empty assignment)."""
    if not assignment:
        return {}
    version, body = _split(assignment, ConsumerProtocolAssignment.MAX_VERSION)
    decoded = ConsumerProtocolAssignment.read(Reader(body), version)
    return {tp.topic: list(tp.partitions) for tp in decoded.assigned_partitions}


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    """Subscription metadata (for our own client and tests)."""
    w = Writer()
    w.int16(version)
    ConsumerProtocolSubscription(topics=topics).write(w, version)
    return w.getvalue()


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    w = Writer()
    w.int16(version)
    ConsumerProtocolAssignment(
        assigned_partitions=[TopicPartition(topic=t, partitions=p) for t, p in partitions.items()]
    ).write(w, version)
    return w.getvalue()
