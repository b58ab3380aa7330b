"""A partition replica this broker hosts: its log, role, leader epoch and high watermark.

As leader it appends produced batches, tracks its followers through a ``LeaderIsr``
(replication/isr.py: the high watermark is the minimum log end offset over the ISR) and
answers consumers below the high watermark. As follower it appends what the leader sends,
unchanged, and takes the leader's high watermark (capped by its own log end offset). With a
single replica (embedded metadata) the ISR is this broker alone, so the high watermark follows
the log end offset on every append.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kbroker.log.partition_log import AppendResult, PartitionLog
from kbroker.producer_state import VerificationGuard
from kbroker.txn.log_records import TV_1
from replication.isr import LeaderIsr
from wire.errors import ErrorCode, KafkaError
from wire.records.control import EndTxnMarker, end_txn_marker_batch

NO_LEADER = -1


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        log: PartitionLog,
        broker_id: int,
        on_change: Callable[[tuple[str, int]], None],
        *,
        high_watermark: int = 0,
    ) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.broker_id = broker_id
        # Called with (topic, index) after the partition's data or watermark moved, to wake
        # requests waiting in the purgatory.
        self.on_change = on_change
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self._isr: tuple[int, ...] = ()
        self._leader: LeaderIsr | None = None
        self._high_watermark = min(high_watermark, log.log_end_offset)
        # Loading the log replayed every marker since the snapshot: forget the transactions
        # already decided below the checkpointed high watermark.
        log.producers.on_high_watermark(self._high_watermark)

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self._leader is not None

    @property
    def isr(self) -> tuple[int, ...]:
        return self._leader.isr if self._leader is not None else self._isr

    @property
    def high_watermark(self) -> int:
        return self._leader.high_watermark if self._leader is not None else self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The LSO: below it every transaction is decided (KIP-98); min(first offset of the
        open or not yet replicated transactions, high watermark), and never below the log
        start offset (DeleteRecords may pass an open transaction's start, as in Kafka)."""
        return self.read_offsets()[1]

    def read_offsets(self) -> tuple[int, int, int]:
        """(high watermark, last stable offset, log start offset) at once, as every partition
        of every Fetch answer carries them."""
        leader = self._leader
        hw = leader.high_watermark if leader is not None else self._high_watermark
        log = self.log
        start = log.log_start_offset
        first = log.producers.first_unstable_offset(hw)
        return hw, (hw if first is None else max(min(first, hw), start)), start

    # Role changes ----------------------------------------------------------------------

    def make_leader(
        self, leader_epoch: int, replicas: Iterable[int], isr: Iterable[int], now_ms: float
    ) -> bool:
        """Lead at ``leader_epoch``; True when this is a new leadership (new epoch)."""
        self.replicas = tuple(replicas)
        self._isr = tuple(isr)
        self.leader_id = self.broker_id
        if self._leader is not None and leader_epoch == self.leader_epoch:
            self._leader.set_replicas(self.replicas, now_ms)
            self._leader.set_isr(self._isr)
            self._advance_high_watermark()
            return False
        self.leader_epoch = leader_epoch
        leo = self.log.log_end_offset
        # KIP-101: the new epoch starts at the log end offset, so followers can learn where
        # the previous epochs ended in this log.
        self.log.assign_epoch_start(leader_epoch, leo)
        self._leader = LeaderIsr(
            self.broker_id, self.replicas, self._isr, self._high_watermark, leo, now_ms
        )
        self._advance_high_watermark()
        return True

    def make_follower(
        self, leader_id: int, leader_epoch: int, replicas: Iterable[int], isr: Iterable[int]
    ) -> bool:
        """Follow ``leader_id``; True when the leader or epoch changed (truncate first)."""
        changed = (
            self._leader is not None
            or leader_id != self.leader_id
            or leader_epoch != self.leader_epoch
        )
        if self._leader is not None:
            self._high_watermark = self._leader.high_watermark
        self._leader = None
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self._isr = tuple(isr)
        if changed:
            self.on_change(self.key)
        return changed

    def apply_isr(self, isr: Iterable[int]) -> None:
        """An ISR change written to the metadata store (by this leader or the controller)."""
        self._isr = tuple(isr)
        if self._leader is not None:
            self._leader.set_isr(self._isr)
            self._advance_high_watermark()

    # Leader side -----------------------------------------------------------------------

    def _require_leader(self) -> LeaderIsr:
        if self._leader is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self._leader

    def _advance_high_watermark(self) -> None:
        leader = self._require_leader()
        if leader.update_high_watermark(self.log.log_end_offset):
            self.log.producers.on_high_watermark(leader.high_watermark)
            self.on_change(self.key)

    def append(
        self,
        batches: bytearray | memoryview,
        *,
        log_append_time_ms: int | None,
        from_coordinator: bool = False,
        verification: VerificationGuard | None = None,
        marker_version: int = TV_1,
    ) -> AppendResult:
        self._require_leader()
        if self.log.latest_epoch() > self.leader_epoch:
            # The log holds batches of a higher epoch than ours (a promoted mirror keeps its
            # source's): a batch of ours would go back in epochs. Retriable: the leader
            # takes a higher epoch first (kbroker/mirror/manager.py).
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{self.topic}-{self.index}: the log holds leader epoch "
                f"{self.log.latest_epoch()}, above this leader's {self.leader_epoch}",
            )
        result = self.log.append_as_leader(
            batches,
            leader_epoch=self.leader_epoch,
            log_append_time_ms=log_append_time_ms,
            from_coordinator=from_coordinator,
            verification=verification,
            marker_version=marker_version,
        )
        if not result.duplicate:
            self.on_change(self.key)
            self._advance_high_watermark()
        return result

    def append_marker(
        self,
        marker: EndTxnMarker,
        *,
        producer_id: int,
        producer_epoch: int,
        now_ms: int,
        transaction_version: int = TV_1,
    ) -> AppendResult:
        """Append the control batch ending `producer_id`'s transaction (WriteTxnMarkers)."""
        batch = end_txn_marker_batch(
            marker, producer_id=producer_id, producer_epoch=producer_epoch, timestamp=now_ms
        )
        return self.append(
            bytearray(batch), log_append_time_ms=None, marker_version=transaction_version
        )

    def on_follower_fetch(self, replica: int, fetch_offset: int, now_ms: float) -> None:
        leader = self._require_leader()
        leader.on_follower_fetch(replica, fetch_offset, self.log.log_end_offset, now_ms)
        self._advance_high_watermark()

    def isr_to_shrink(self, now_ms: float, lag_max_ms: float) -> set[int]:
        return self._require_leader().shrink_candidates(now_ms, lag_max_ms)

    def isr_to_expand(self) -> set[int]:
        return self._require_leader().expand_candidates()

    def delete_records_before(self, offset: int) -> int:
        start = self.log.delete_records_before(offset)
        self.on_change(self.key)
        return start

    # Mirror side (kbroker/mirror/): this replica leads, its records come from a source
    # cluster's partition, appended as a follower appends them (offsets and epochs kept).

    def append_mirrored(self, batches: bytes) -> None:
        self._require_leader()
        # The epoch cache of a mirror holds its batches' epochs, the source's: drop the entry
        # make_leader put at the log end for this cluster's leader epoch, which no batch
        # carries (else the source's epoch, lower or higher, would be recorded as starting
        # here, and OffsetForLeaderEpoch would answer wrong ends for it).
        self.log.epochs.truncate_from_end(self.log.log_end_offset)
        self.log.append_as_follower(batches)
        self.on_change(self.key)
        self._advance_high_watermark()

    def truncate_mirror_to(self, offset: int) -> None:
        """The source's log diverged from ours at ``offset``: drop our tail, high watermark
        included (what the source no longer has was never the source's committed data)."""
        leader = self._require_leader()
        self.log.truncate_to(offset)
        leader.high_watermark = min(leader.high_watermark, self.log.log_end_offset)
        self.on_change(self.key)

    def start_mirror_over_at(self, offset: int) -> None:
        """Our log ends before the source's log start: continue empty from ``offset``."""
        leader = self._require_leader()
        self.log.truncate_fully_and_start_at(offset)
        leader.high_watermark = offset
        self.log.producers.on_high_watermark(offset)
        self.on_change(self.key)

    # Follower side ---------------------------------------------------------------------

    def append_as_follower(self, batches: bytearray | bytes, leader_high_watermark: int) -> None:
        if self._leader is not None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "this replica leads")
        if batches:
            self.log.append_as_follower(batches)
        self.set_follower_high_watermark(leader_high_watermark)

    def set_follower_high_watermark(self, leader_high_watermark: int) -> None:
        hw = min(leader_high_watermark, self.log.log_end_offset)
        if hw != self._high_watermark:
            self._high_watermark = hw
            self.log.producers.on_high_watermark(hw)
            self.on_change(self.key)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self._high_watermark = min(self._high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Follower behind the leader's log start: continue empty from ``offset`` (the
        records below it are gone from the leader, so committed)."""
        self.log.truncate_fully_and_start_at(offset)
        self._high_watermark = offset
