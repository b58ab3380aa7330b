"""A consumer's reading of a Fetch response's records: records at or past the offset asked
for, each with its batch's timestamp type, and where the next fetch starts."""

from __future__ import annotations

from dataclasses import dataclass, field

from wire.records.batch import read_header
from wire.records.isolation import AbortedFilter
from wire.records.record import decode_records, iter_entries

# ConsumerRecord timestamp types as the Java client numbers them (Spark's timestampType).
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1
# Legacy message sets (magic 0/1) keep their attributes byte right after the magic byte;
# bit 3 is the timestamp type in magic 1.
_LEGACY_ATTRIBUTES_OFFSET = 17
_LEGACY_TIMESTAMP_TYPE_BIT = 0x08


@dataclass(slots=True)
class FetchedRecord:
    """One consumed record: a ``Record`` plus the timestamp type of its batch."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(slots=True)
class FetchResult:
    """What one Fetch returned for one partition (high watermark and log start -1 when
    the answer left the partition out)."""

    records: list[FetchedRecord]
    high_watermark: int
    log_start_offset: int
    # Where the next fetch should start: past every whole entry returned, including
    # control batches and records below the requested offset.
    next_offset: int


def decode_fetched(
    buf: bytes | memoryview, offset: int, aborted: AbortedFilter | None = None
) -> tuple[list[FetchedRecord], int]:
    """Records at or past ``offset`` from a Fetch's record set, and the next fetch offset.
    Control batches are skipped, and with ``aborted`` the batches of aborted transactions; a
    trailing partial entry is left for the next fetch."""
    view = memoryview(buf)
    out: list[FetchedRecord] = []
    next_offset = offset
    for pos, size, magic in iter_entries(view):
        entry = view[pos : pos + size]
        if magic == 2:
            header = read_header(entry)
            next_offset = max(next_offset, header.next_offset)
            if aborted is not None and aborted.drop(header, entry):
                continue
            if header.is_control:
                continue
            timestamp_type = LOG_APPEND_TIME if header.timestamp_type else CREATE_TIME
        elif magic == 1:
            attributes = entry[_LEGACY_ATTRIBUTES_OFFSET]
            timestamp_type = (
                LOG_APPEND_TIME if attributes & _LEGACY_TIMESTAMP_TYPE_BIT else CREATE_TIME
            )
        else:
            timestamp_type = NO_TIMESTAMP_TYPE
        for r in decode_records(entry):
            if r.offset >= offset:
                out.append(
                    FetchedRecord(r.offset, r.timestamp, timestamp_type, r.key, r.value, r.headers)
                )
            next_offset = max(next_offset, r.offset + 1)
    return out, next_offset
