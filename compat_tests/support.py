"""Helpers shared by the compatibility tests (no fixtures here; see conftest.py)."""

import os
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

# Kafka's compression codec names and their ids in record batch attributes bits 0-2.
CODEC_IDS: dict[str, int] = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CODECS: tuple[str, ...] = tuple(CODEC_IDS)

# The broker's default message.max.bytes (Kafka's: 1048588) caps a whole record batch.
# A value that fits in one batch under that limit, and one that cannot.
NEAR_LIMIT_VALUE_SIZE = 1_000_000
OVER_LIMIT_VALUE_SIZE = 1_100_000
# Client-side request size limits raised above the broker's, so that the broker decides.
CLIENT_MAX_REQUEST_BYTES = 4_000_000


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def require(condition: bool, reason: str) -> None:
    """Skip when a client-side tool is missing; under CI=true a missing tool is a failure.

    CI is where the suite must prove compatibility, so a silently skipped client there would
    hide a broken install step.
    """
    if condition:
        return
    if in_ci():
        pytest.fail(f"{reason} (required when CI=true)", pytrace=False)
    pytest.skip(reason)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `predicate` every 50 ms until it is true; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def compressible_value(i: int, size: int = 200) -> bytes:
    """A value that every codec shrinks (clients skip compression when it does not help)."""
    unit = f"value-{i:06d}|".encode()
    return (unit * (size // len(unit) + 1))[:size]


def base_timestamp_ms() -> int:
    """A whole-second CreateTime an hour in the past, clearly distinct from append time."""
    return (int(time.time()) - 3600) * 1000


def round_trip_records(
    codec: str, base_ms: int, timestamp_field: str, count: int = 200
) -> list[dict[str, Any]]:
    """Keyed records with headers and CreateTimes ``base_ms + i``, as keyword arguments of a
    client's send call, whose timestamp argument ``timestamp_field`` names ("timestamp" in
    confluent-kafka, "timestamp_ms" in kafka-python and aiokafka)."""
    return [
        {
            "key": f"key-{i}".encode(),
            "value": compressible_value(i),
            "headers": [("idx", str(i).encode()), ("codec", codec.encode()), ("empty", b"")],
            timestamp_field: base_ms + i,
        }
        for i in range(count)
    ]


def stored_batch_codecs(log_dir: Path, topic: str, partition: int) -> list[int]:
    """Compression codec (attributes bits 0-2) of every record batch stored on disk.

    Reads the partition's segment files, `<log.dir>/<topic>-<partition>/*.log`, in Kafka's
    record batch v2 layout: baseOffset int64, batchLength int32, partitionLeaderEpoch int32,
    magic int8, crc uint32, attributes int16, ... A trailing partial batch is ignored.
    Checking the files shows that a client really sent compressed batches: librdkafka, for
    one, silently stops compressing when it dislikes the broker's advertised versions.
    """
    codecs: list[int] = []
    for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 23 <= len(data):
            (batch_length,) = struct.unpack_from(">i", data, pos + 8)
            if batch_length <= 0 or pos + 12 + batch_length > len(data):
                break
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            codecs.append(attributes & 0x07)
            pos += 12 + batch_length
    return codecs


def assert_stored_codec(log_dir: Path | None, topic: str, partition: int, codec: str) -> None:
    """When the broker's files are visible (we started it), every batch uses `codec`."""
    if log_dir is None:
        return
    stored = stored_batch_codecs(log_dir, topic, partition)
    assert stored, f"no record batch found on disk for {topic}-{partition}"
    expected = CODEC_IDS[codec]
    assert set(stored) == {expected}, (
        f"batches stored with codec ids {sorted(set(stored))}, expected {expected} ({codec})"
    )


def wait_for_leaders(admin: AdminClient, topic: str, partitions: int) -> None:
    """Block until metadata shows `topic` with `partitions` partitions, each with a leader."""

    def ready() -> bool:
        meta = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if meta is None or meta.error is not None or len(meta.partitions) != partitions:
            return False
        return all(p.leader >= 0 and p.error is None for p in meta.partitions.values())

    wait_until(ready, 15.0, f"topic {topic} with {partitions} led partitions in metadata")
