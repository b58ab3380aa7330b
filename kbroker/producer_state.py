"""Idempotent and transactional producer state of one partition (KIP-98): pure, no IO, no
clock.

For each producer id the state keeps its current epoch, the metadata of its last five
batches (first/last sequence, first/last offset, max timestamp), the first offset of its open
transaction (-1 when none) and the coordinator epoch of the last transaction marker it got.
The partition log feeds it batch headers (and, for control batches, their marker):

- `prepare(batches)` checks the batches of one leader append and returns either a
  `PendingAppend` (commit it once the bytes are written) or the `BatchMetadata` of a duplicate;
  a violation raises `KafkaError`.
- `replay(batch)` applies a batch already in the log, without checks (recovery, follower
  appends, rebuild after truncation).
Both `commit` and `replay` return the aborted transactions that the applied markers ended,
as the entries of the aborted-transaction index (txn_index.py).

Transactions (Kafka's ProducerStateManager): a producer's first transactional batch opens
its transaction at that batch's base offset; a marker (control batch) closes it. A
transaction closed by a marker stays "unreplicated" until the high watermark passes the
marker, so `first_unstable_offset(hw)` is the lowest first offset of the open and the
unreplicated transactions: the partition's last stable offset (LSO) is min(it, hw). A marker
for a producer without an open transaction changes only the epochs (Kafka writes no index
entry for it). The last stable offset recorded with an aborted transaction is the first
offset of the lowest other open transaction, else the offset after the marker.

Rules (Kafka's ProducerStateManager semantics, as of Kafka 2.5+/KIP-360):
- producer id -1 (no producer) is not checked;
- an epoch lower than the producer's current one -> INVALID_PRODUCER_EPOCH;
- a duplicate (same epoch, same first and last sequence as one of the cached last five
  batches) is not appended; the original offsets are returned;
- a new (greater) epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER, except
  for a producer without state (unknown, or its state expired): since KIP-360 Kafka accepts
  any sequence then, rather than UNKNOWN_PRODUCER_ID;
- same epoch: the first sequence must follow the last one (int32 wraparound to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- a non-transactional batch from a producer with an open transaction -> INVALID_TXN_STATE;
- a marker with a producer epoch below the current one -> INVALID_PRODUCER_EPOCH, with a
  coordinator epoch below the last marker's -> TRANSACTION_COORDINATOR_FENCED; a marker of
  transaction version 2 must carry an epoch above the one of the transaction it ends
  (KIP-1228: that end bumped it), else INVALID_PRODUCER_EPOCH;
- with verification (KIP-890), a transactional batch that opens its producer's transaction
  needs the guard taken when the coordinator was asked (`VerificationGuard`), else
  INVALID_TXN_STATE.
A batch covers sequences base_sequence .. base_sequence + last_offset_delta (wrapping).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kbroker.txn.log_records import TV_1, TV_2
from wire.errors import ErrorCode, KafkaError
from wire.records.control import EndTxnMarker

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1
INT32_MAX = 0x7FFFFFFF
# Kafka keeps the metadata of this many batches per producer for duplicate detection (it is
# also the client's bound on in-flight requests with idempotence).
NUM_BATCHES_TO_RETAIN = 5


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record (sequences wrap from INT32_MAX to 0)."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True)
class BatchMetadata:
    """What is remembered of one appended batch."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True)
class ProducerBatch:
    """The producer-related facts of one batch header, with its assigned offsets."""

    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int
    is_control: bool = False
    is_transactional: bool = False
    # The transaction marker of a control batch; None for data batches and for control
    # batches without one (emptied by the cleaner, or of another control type).
    marker: EndTxnMarker | None = None

    def metadata(self) -> BatchMetadata:
        return BatchMetadata(
            self.first_seq, self.last_seq, self.first_offset, self.last_offset, self.timestamp
        )


@dataclass(frozen=True)
class AbortedTxn:
    """An aborted transaction: an entry of the aborted-transaction index. `last_offset` is
    the marker's offset; `last_stable_offset` the LSO once the marker was written."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction a marker closed (`last_offset`: the marker's offset)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass
class ProducerEntry:
    """State of one producer id."""

    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int = NO_OFFSET

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def in_transaction(self) -> bool:
        return self.current_txn_first_offset != NO_OFFSET

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.last_timestamp,
            self.coordinator_epoch,
            self.current_txn_first_offset,
        )

    def add(self, batch: ProducerBatch) -> CompletedTxn | None:
        """Apply one batch; returns the transaction its marker closed, if any."""
        if batch.producer_epoch != self.epoch:
            # A new epoch starts a new sequence space; old batches can no longer be duplicates.
            self.batches.clear()
            self.epoch = batch.producer_epoch
        self.last_timestamp = batch.timestamp
        if not batch.is_control:
            self.batches.append(batch.metadata())
            if batch.is_transactional and not self.in_transaction:
                self.current_txn_first_offset = batch.first_offset
            return None
        if batch.marker is None:
            return None
        completed = None
        if self.in_transaction:
            completed = CompletedTxn(
                batch.producer_id,
                self.current_txn_first_offset,
                batch.first_offset,
                aborted=not batch.marker.commit,
            )
        self.current_txn_first_offset = NO_OFFSET
        self.coordinator_epoch = batch.marker.coordinator_epoch
        return completed

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        if batch.producer_epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == batch.first_seq and meta.last_seq == batch.last_seq:
                return meta
        return None


class VerificationGuard:
    """KIP-890: a transactional produce request that would open its producer's transaction on
    this partition is verified with the transaction coordinator first. The guard, taken before
    asking, is given back with the append; it holds only while nothing else happened to the
    producer here meanwhile (a marker ended the transaction, a newer epoch wrote), so a request
    delayed past its transaction's end cannot open a transaction nothing will end."""

    __slots__ = ("producer_id", "producer_epoch")

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch


@dataclass(frozen=True)
class PendingAppend:
    """Checked updates of one append, applied by `ProducerStateManager.commit`."""

    updates: dict[int, ProducerEntry]
    completed: list[CompletedTxn] = field(default_factory=list)


class ProducerStateManager:
    """Per-partition producer id -> `ProducerEntry`."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction.
        self._ongoing: dict[int, int] = {}
        # Transactions closed by a marker the high watermark has not passed yet.
        self._unreplicated: list[CompletedTxn] = []
        # producer id -> the guard of its transaction start being verified (leader only).
        self._verifying: dict[int, VerificationGuard] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> dict[int, ProducerEntry]:
        """A copy of the state (for snapshots)."""
        return {pid: entry.copy() for pid, entry in self._producers.items()}

    def load(self, entries: dict[int, ProducerEntry]) -> None:
        """Replace the state (from a snapshot)."""
        self._producers = {pid: entry.copy() for pid, entry in entries.items()}
        self._ongoing = {
            pid: entry.current_txn_first_offset
            for pid, entry in self._producers.items()
            if entry.in_transaction
        }
        self._unreplicated = []
        self._verifying.clear()

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated = []
        self._verifying.clear()

    def needs_verification(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether a transactional batch of this producer would open its transaction here."""
        entry = self._producers.get(producer_id)
        return entry is None or not entry.in_transaction or entry.epoch != producer_epoch

    def begin_verification(self, producer_id: int, producer_epoch: int) -> VerificationGuard:
        """The guard to append with once the coordinator said the transaction includes this
        partition (requests of one producer verifying together share it)."""
        guard = self._verifying.get(producer_id)
        if guard is None or guard.producer_epoch != producer_epoch:
            guard = self._verifying[producer_id] = VerificationGuard(producer_id, producer_epoch)
        return guard

    def end_verification(self, guard: VerificationGuard) -> None:
        """The verification failed: its guard no longer admits an append."""
        if self._verifying.get(guard.producer_id) is guard:
            del self._verifying[guard.producer_id]

    def ongoing_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction."""
        return dict(self._ongoing)

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget the closed transactions whose marker is below `high_watermark`."""
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The lowest first offset of the open transactions and of those whose marker is at
        or above `high_watermark` (those below it are forgotten); None when there is none."""
        if not self._unreplicated and not self._ongoing:
            # The common case, asked for every partition of every Fetch: no transaction.
            return None
        self.on_high_watermark(high_watermark)
        firsts = [t.first_offset for t in self._unreplicated]
        firsts.extend(self._ongoing.values())
        return min(firsts) if firsts else None

    def _complete(self, txn: CompletedTxn) -> AbortedTxn | None:
        self._unreplicated.append(txn)
        if not txn.aborted:
            return None
        lso = min(self._ongoing.values(), default=txn.last_offset + 1)
        return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)

    def _apply(self, producer_id: int, entry: ProducerEntry) -> None:
        self._producers[producer_id] = entry
        if entry.in_transaction:
            self._ongoing[producer_id] = entry.current_txn_first_offset
        else:
            self._ongoing.pop(producer_id, None)

    def prepare(
        self,
        batches: Sequence[ProducerBatch],
        *,
        check_sequences: bool = True,
        verification: VerificationGuard | None = None,
        marker_version: int = TV_1,
    ) -> PendingAppend | BatchMetadata:
        """Check a leader append; a `BatchMetadata` result means a duplicate batch. Without
        `check_sequences` (a coordinator's own write) only epochs are checked. With a
        `verification` guard, a transactional batch that opens its producer's transaction is
        admitted only while that guard holds. `marker_version`: the transaction version of
        the markers appended (KIP-1228)."""
        updates: dict[int, ProducerEntry] = {}
        pending_completed: list[CompletedTxn] = []
        for batch in batches:
            if batch.producer_id == NO_PRODUCER_ID:
                continue
            current = self._producers.get(batch.producer_id)
            if current is not None and not batch.is_control and check_sequences:
                duplicate = current.find_duplicate(batch)
                if duplicate is not None:
                    return duplicate
            updated = updates.get(batch.producer_id)
            if updated is None:
                updated = current.copy() if current is not None else ProducerEntry()
                updates[batch.producer_id] = updated
            self._check(batch, current, updated, check_sequences, marker_version)
            if verification is not None and batch.is_transactional and not batch.is_control:
                self._check_verified(batch, updated, verification)
            completed = updated.add(batch)
            if completed is not None:
                pending_completed.append(completed)
        return PendingAppend(updates, pending_completed)

    def _check_verified(
        self, batch: ProducerBatch, updated: ProducerEntry, guard: VerificationGuard
    ) -> None:
        opens = not updated.in_transaction or updated.epoch != batch.producer_epoch
        if opens and (
            self._verifying.get(batch.producer_id) is not guard
            or guard.producer_epoch != batch.producer_epoch
        ):
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"the transaction of producer {batch.producer_id} changed while this partition "
                "was verified with its coordinator",
            )

    def _check(
        self,
        batch: ProducerBatch,
        current: ProducerEntry | None,
        updated: ProducerEntry,
        check_sequences: bool,
        marker_version: int,
    ) -> None:
        if batch.producer_epoch < updated.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {batch.producer_id} epoch {batch.producer_epoch} is older than "
                f"the current epoch {updated.epoch}",
            )
        if batch.is_control and marker_version >= TV_2 and updated.in_transaction:
            if batch.producer_epoch <= updated.epoch:
                # A version 2 end bumps the epoch: an equal one belongs to an earlier end
                # and would close the transaction open now (KIP-1228).
                raise KafkaError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"transaction version 2 marker of producer {batch.producer_id} has epoch "
                    f"{batch.producer_epoch}, not above the current epoch {updated.epoch}",
                )
        if batch.is_control:
            marker = batch.marker
            if marker is not None and marker.coordinator_epoch < updated.coordinator_epoch:
                raise KafkaError(
                    ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                    f"marker for producer {batch.producer_id} has coordinator epoch "
                    f"{marker.coordinator_epoch}, older than {updated.coordinator_epoch}",
                )
            return
        if not check_sequences:
            return
        if updated.in_transaction and not batch.is_transactional:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"non-transactional batch from producer {batch.producer_id} while its "
                "transaction is open",
            )
        if batch.producer_epoch != updated.epoch:
            if batch.first_seq != 0 and updated.epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {batch.producer_id} new epoch {batch.producer_epoch} must start "
                    f"at sequence 0, not {batch.first_seq}",
                )
            return
        if current is None or current.epoch == NO_PRODUCER_EPOCH:
            # No known state for this producer (KIP-360): any sequence is accepted.
            return
        if not _in_sequence(updated.last_seq, batch.first_seq):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {batch.producer_id} sequence {batch.first_seq} does not follow "
                f"{updated.last_seq}",
            )

    def commit(self, pending: PendingAppend) -> list[AbortedTxn]:
        """Apply a prepared append after its batches were written; returns the aborted
        transactions it ended. Whatever the append did to a producer ends the verification
        of its transaction start."""
        for pid, entry in pending.updates.items():
            self._apply(pid, entry)
            self._verifying.pop(pid, None)
        if not pending.completed:
            return []
        aborted = (self._complete(txn) for txn in pending.completed)
        return [a for a in aborted if a is not None]

    def replay(self, batches: Iterable[ProducerBatch]) -> list[AbortedTxn]:
        """Apply batches already in the log (no checks); returns the aborted transactions
        they ended."""
        aborted: list[AbortedTxn] = []
        for batch in batches:
            if batch.producer_id == NO_PRODUCER_ID:
                continue
            entry = self._producers.get(batch.producer_id)
            if entry is None:
                entry = ProducerEntry()
            completed = entry.add(batch)
            self._apply(batch.producer_id, entry)
            if completed is not None:
                found = self._complete(completed)
                if found is not None:
                    aborted.append(found)
        return aborted

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for `expiration_ms` (producer.id.expiration.ms), except
        those with an open transaction (as Kafka)."""
        expired = [
            pid
            for pid, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= expiration_ms and not entry.in_transaction
        ]
        for pid in expired:
            del self._producers[pid]
        return expired
