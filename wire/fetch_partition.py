"""The FetchResponse partition of a partition read without error, built and encoded cheaply.

A consumer's Fetch names every partition it reads (librdkafka sends no incremental
sessions, KIP-227), so a 1,000-partition fetch builds and encodes 1,000 partition entries,
most of them with nothing new. The generated ``PartitionData`` makes three nested default
objects and two lists per instance and writes field by field, comparing the nested tagged
fields with their defaults; this subclass shares the defaults and writes the fixed part of
the entry (index, error, high watermark, last stable offset, log start offset, aborted
transactions count, preferred read replica) with one struct, then the records (a file
region stays a region). Anything it cannot write that way (aborted transactions, tagged
fields, an old version) goes through the generated writer, so the bytes are always the
generated writer's.
"""

from __future__ import annotations

import struct

from wire.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    LeaderIdAndEpoch,
    PartitionData,
    SnapshotId,
)
from wire.primitives import Writer

# Shared by every instance and never mutated: handlers replace these fields, never edit them
# in place (the write below checks identity to know they are the defaults).
_NO_DIVERGING_EPOCH = EpochEndOffset()
_NO_CURRENT_LEADER = LeaderIdAndEpoch()
_NO_SNAPSHOT = SnapshotId()

FIRST_FLEXIBLE_VERSION = 12
FIRST_PREFERRED_REPLICA_VERSION = 11
FIRST_LOG_START_VERSION = 5
FIRST_ABORTED_VERSION = 4

# Flexible: compact array length (0 null, 1 empty) as one byte, then the preferred replica.
_FIXED_FLEXIBLE = struct.Struct(">ihqqqBi")
# The same with an empty records field (compact length 1) and an empty tagged-field buffer.
_NOTHING_FLEXIBLE = struct.Struct(">ihqqqBiBB")
_FIXED_V11 = struct.Struct(">ihqqqii")
_FIXED_V5 = struct.Struct(">ihqqqi")
_FIXED_V4 = struct.Struct(">ihqqi")


class FetchedPartitionData(PartitionData):
    """A ``PartitionData`` with error code NONE and no tagged fields set."""

    __slots__ = ()

    def __init__(
        self,
        partition_index: int,
        high_watermark: int,
        last_stable_offset: int,
        log_start_offset: int,
        records: object,
        aborted_transactions: list[AbortedTransaction] | None = None,
    ) -> None:
        self.partition_index = partition_index
        self.error_code = 0
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.diverging_epoch = _NO_DIVERGING_EPOCH
        self.current_leader = _NO_CURRENT_LEADER
        self.snapshot_id = _NO_SNAPSHOT
        self.aborted_transactions = [] if aborted_transactions is None else aborted_transactions
        self.preferred_read_replica = -1
        self.records = records  # type: ignore[assignment]
        self.unknown_tagged_fields = []

    def write(self, w: Writer, version: int) -> None:
        aborted = self.aborted_transactions
        if (
            version < FIRST_ABORTED_VERSION
            or aborted
            or self.preferred_read_replica != -1
            or self.unknown_tagged_fields
            or self.diverging_epoch is not _NO_DIVERGING_EPOCH
            or self.current_leader is not _NO_CURRENT_LEADER
            or self.snapshot_id is not _NO_SNAPSHOT
        ):
            PartitionData.write(self, w, version)
            return
        head = (
            self.partition_index,
            self.error_code,
            self.high_watermark,
            self.last_stable_offset,
        )
        records = self.records
        if version >= FIRST_FLEXIBLE_VERSION:
            has_aborted = aborted is not None
            if type(records) is bytes and not records:
                # Nothing new, the common answer: records length (compact 1) and no tags.
                w.pack(_NOTHING_FLEXIBLE, *head, self.log_start_offset, has_aborted, -1, 1, 0)
                return
            w.pack(_FIXED_FLEXIBLE, *head, self.log_start_offset, has_aborted, -1)
            w.records(records, True)
            w.buf.append(0)
            return
        count = -1 if aborted is None else 0
        if version >= FIRST_PREFERRED_REPLICA_VERSION:
            w.pack(_FIXED_V11, *head, self.log_start_offset, count, -1)
        elif version >= FIRST_LOG_START_VERSION:
            w.pack(_FIXED_V5, *head, self.log_start_offset, count)
        else:
            w.pack(_FIXED_V4, *head, count)
        w.records(records, False)
