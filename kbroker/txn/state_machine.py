"""The transaction coordinator as a pure state machine (KIP-98; DESIGN rule 3).

No sockets, no asyncio, no sleeping. The shell (``coordinator.py``) feeds requests in
(InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn), the clock passing (``tick``),
``__transaction_state`` partitions being loaded and unloaded, and the outcomes of the effects it
performed; it performs the effects that come back, in order:

- ``StoreTxn``: write the transactional id's new value (None: a tombstone) to its partition with
  acks=all, then report through ``txn_stored``. A state change is only applied once stored
  ("persist first, then send"); meanwhile the transactional id has a pending transition and
  every other request for it gets CONCURRENT_TRANSACTIONS, as in Kafka.
- ``Reply``: answer the request the shell gave ``token`` for.
- ``SendMarkers``: write the commit or abort markers to every partition of the transaction
  (WriteTxnMarkers to each partition's leader, retried until they have them), then report
  through ``markers_written``.

States and transitions (Kafka's ``TransactionState``):

    Empty / CompleteCommit / CompleteAbort --AddPartitions--> Ongoing
    Ongoing --AddPartitions--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort), timeout, fencing--> PrepareAbort --markers written--> CompleteAbort
    Empty / CompleteCommit / CompleteAbort --InitProducerId--> Empty (epoch + 1)
    Ongoing --InitProducerId--> PrepareEpochFence (epoch + 1, in memory) --> PrepareAbort
    Empty / CompleteCommit / CompleteAbort --idle past transactional.id.expiration.ms--> Dead

A producer that calls InitProducerId while its previous incarnation has a transaction open
fences that incarnation: the epoch is bumped and the open transaction aborted with the new
epoch (its markers fence the old producer on every partition), and the caller gets
CONCURRENT_TRANSACTIONS until the abort is complete, when its retry bumps the epoch once more.
A transaction open longer than its timeout is aborted the same way by ``tick``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from kbroker.group.offsets_store import java_string_hash
from kbroker.txn.log_records import TV_1, TV_2, TopicPartition, TxnState, TxnValue
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka bumps to a new producer id instead of past Short.MaxValue - 1 (KIP-360).
MAX_PRODUCER_EPOCH = 32767 - 1
NO_TIMESTAMP = -1

_COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000


# --- events and effects ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TxnResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class Reply:
    token: int
    result: TxnResult


@dataclass(frozen=True, slots=True)
class StoreTxn:
    """Write ``value`` (None: tombstone) for ``transactional_id`` to partition ``partition``,
    then call ``txn_stored(store_id, error)``."""

    store_id: int
    partition: int
    transactional_id: str
    value: TxnValue | None


@dataclass(frozen=True, slots=True)
class SendMarkers:
    """Write the markers of a transaction to each of ``partitions``, then call
    ``markers_written(transactional_id, producer_id, producer_epoch)``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]
    # KIP-1228: partition leaders check a version 2 marker's epoch against the producer's.
    transaction_version: int = TV_1


Effect = Reply | StoreTxn | SendMarkers


@dataclass(frozen=True, slots=True)
class TxnDescription:
    transactional_id: str
    state: TxnState
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    partitions: frozenset[TopicPartition]


# --- internal state -------------------------------------------------------------------------


@dataclass(eq=False)
class _Txn:
    transactional_id: str
    value: TxnValue
    # The epoch before the last bump: a retried InitProducerId with it gets the current one.
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    # The store in flight for this id (its transition is pending until stored).
    pending_store: int | None = None
    markers_in_flight: bool = False
    # Transaction version 2: the epoch whose EndTxn is answered as a retry, with the epoch the
    # end bumped to (KIP-890: the answer to the first EndTxn may have been lost).
    retry_epoch: int = NO_PRODUCER_EPOCH


@dataclass(slots=True)
class _PendingStore:
    transactional_id: str
    target: TxnValue | None
    on_success: Callable[[], list[Effect]]
    on_failure: Callable[[ErrorCode], list[Effect]]
    last_producer_epoch: int | None = None
    previous_producer_id: int | None = None
    retry_epoch: int | None = None


@dataclass(slots=True)
class _Partition:
    coordinator_epoch: int
    loaded: bool = False
    ids: set[str] = field(default_factory=set)


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount``."""
    return abs(java_string_hash(transactional_id)) % (1 << 31) % num_partitions


class TransactionStateMachine:
    """Every transactional id of the ``__transaction_state`` partitions this broker leads."""

    def __init__(
        self,
        config: TxnConfig,
        clock: Callable[[], int],
        num_partitions: int,
        new_producer_id: Callable[[], int],
    ) -> None:
        self.config = config
        self._clock = clock
        self.num_partitions = num_partitions
        self._new_producer_id = new_producer_id
        self._txns: dict[str, _Txn] = {}
        self._partitions: dict[int, _Partition] = {}
        self._stores: dict[int, _PendingStore] = {}
        self._next_store_id = 0

    # --- ownership ------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_error(self, transactional_id: str) -> ErrorCode | None:
        partition = self._partitions.get(self.partition_for(transactional_id))
        if partition is None:
            return ErrorCode.NOT_COORDINATOR
        if not partition.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def loading(self) -> bool:
        return any(not p.loaded for p in self._partitions.values())

    def begin_load(self, partition: int, coordinator_epoch: int) -> None:
        self._partitions[partition] = _Partition(coordinator_epoch)

    def complete_load(self, partition: int, loaded: dict[str, TxnValue]) -> list[Effect]:
        """Install the transactional ids replayed from ``partition``; transactions that were
        being completed (PrepareCommit / PrepareAbort) have their markers written again."""
        state = self._partitions.get(partition)
        if state is None or state.loaded:
            return []
        effects: list[Effect] = []
        for transactional_id, value in loaded.items():
            if self.partition_for(transactional_id) != partition:
                continue
            txn = _Txn(transactional_id, value, last_producer_epoch=NO_PRODUCER_EPOCH)
            self._txns[transactional_id] = txn
            state.ids.add(transactional_id)
            if value.state is TxnState.PREPARE_EPOCH_FENCE:
                # Never a stored state in Kafka; treat it as the open transaction it fences.
                txn.value = replace(value, state=TxnState.ONGOING)
            self._resume(txn, effects)
        state.loaded = True
        return effects

    def unload(self, partition: int) -> list[Effect]:
        """This broker no longer coordinates ``partition``: requests waiting on a write get
        NOT_COORDINATOR; the new coordinator finishes what was in progress."""
        state = self._partitions.pop(partition, None)
        if state is None:
            return []
        effects: list[Effect] = []
        for store_id, pending in list(self._stores.items()):
            if pending.transactional_id in state.ids:
                del self._stores[store_id]
                effects.extend(pending.on_failure(ErrorCode.NOT_COORDINATOR))
        for transactional_id in state.ids:
            self._txns.pop(transactional_id, None)
        return effects

    # --- persistence ----------------------------------------------------------------------

    def _store(
        self,
        txn: _Txn,
        target: TxnValue | None,
        on_success: Callable[[], list[Effect]],
        on_failure: Callable[[ErrorCode], list[Effect]],
        *,
        last_producer_epoch: int | None = None,
        previous_producer_id: int | None = None,
        retry_epoch: int | None = None,
    ) -> StoreTxn:
        self._next_store_id += 1
        store_id = self._next_store_id
        self._stores[store_id] = _PendingStore(
            txn.transactional_id,
            target,
            on_success,
            on_failure,
            last_producer_epoch,
            previous_producer_id,
            retry_epoch,
        )
        txn.pending_store = store_id
        partition = self.partition_for(txn.transactional_id)
        return StoreTxn(store_id, partition, txn.transactional_id, target)

    def txn_stored(self, store_id: int, error: ErrorCode) -> list[Effect]:
        """The outcome of a ``StoreTxn`` effect (the shell maps storage errors first)."""
        pending = self._stores.pop(store_id, None)
        if pending is None:
            return []
        txn = self._txns.get(pending.transactional_id)
        if txn is not None and txn.pending_store == store_id:
            txn.pending_store = None
        if error != ErrorCode.NONE or txn is None:
            return pending.on_failure(
                error if error != ErrorCode.NONE else ErrorCode.NOT_COORDINATOR
            )
        if pending.target is None:
            del self._txns[txn.transactional_id]
            state = self._partitions.get(self.partition_for(txn.transactional_id))
            if state is not None:
                state.ids.discard(txn.transactional_id)
        else:
            txn.value = pending.target
            if pending.last_producer_epoch is not None:
                txn.last_producer_epoch = pending.last_producer_epoch
            if pending.previous_producer_id is not None:
                txn.previous_producer_id = pending.previous_producer_id
            if pending.retry_epoch is not None:
                txn.retry_epoch = pending.retry_epoch
        return pending.on_success()

    def _coordinator_epoch(self, transactional_id: str) -> int:
        state = self._partitions.get(self.partition_for(transactional_id))
        return state.coordinator_epoch if state is not None else -1

    def _resume(self, txn: _Txn, effects: list[Effect]) -> None:
        """Send the markers of a transaction left in PrepareCommit / PrepareAbort."""
        value = txn.value
        if (
            value.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
            and not txn.markers_in_flight
            and txn.pending_store is None
        ):
            txn.markers_in_flight = True
            effects.append(
                SendMarkers(
                    txn.transactional_id,
                    value.producer_id,
                    value.producer_epoch,
                    value.state is TxnState.PREPARE_COMMIT,
                    self._coordinator_epoch(txn.transactional_id),
                    value.partitions,
                    value.client_version,
                )
            )

    # --- InitProducerId -------------------------------------------------------------------

    def init_producer_id(
        self,
        token: int,
        transactional_id: str,
        timeout_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_PRODUCER_EPOCH,
    ) -> list[Effect]:
        def reply(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> list[Effect]:
            return [Reply(token, TxnResult(error, producer_id, epoch))]

        if not transactional_id:
            return reply(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return reply(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        error = self.coordinator_error(transactional_id)
        if error is not None:
            return reply(error)
        now = self._clock()
        txn = self._txns.get(transactional_id)
        if txn is None:
            # A new transactional id: its producer id is reserved now, epoch 0 once stored.
            value = TxnValue(
                self._new_producer_id(),
                NO_PRODUCER_EPOCH,
                timeout_ms,
                TxnState.EMPTY,
                frozenset(),
                now,
                NO_TIMESTAMP,
            )
            txn = _Txn(transactional_id, value)
            self._txns[transactional_id] = txn
            self._partitions[self.partition_for(transactional_id)].ids.add(transactional_id)
        if txn.pending_store is not None or txn.markers_in_flight:
            return reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        value = txn.value
        expected = expected_producer_id != NO_PRODUCER_ID
        if expected and not (
            value.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_id == value.producer_id
            or (
                expected_producer_id == txn.previous_producer_id
                and expected_epoch >= MAX_PRODUCER_EPOCH
            )
        ):
            return reply(ErrorCode.PRODUCER_FENCED)
        if value.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        if value.state is TxnState.ONGOING:
            # Fence the previous incarnation and abort its transaction with the bumped epoch.
            return self._fence_and_abort(txn) + reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        if value.state not in _COMPLETED:
            return reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        # Empty / CompleteCommit / CompleteAbort: bump the epoch (or a new id once exhausted).
        producer_id, epoch, last_epoch = (
            value.producer_id,
            value.producer_epoch,
            value.producer_epoch,
        )
        previous_id = txn.previous_producer_id
        if expected and expected_producer_id == value.producer_id:
            if expected_epoch == value.producer_epoch:
                pass
            elif expected_epoch == txn.last_producer_epoch:
                # A retry of a bump whose answer was lost: answer with the current epoch.
                return reply(ErrorCode.NONE, value.producer_id, value.producer_epoch)
            elif value.producer_epoch != NO_PRODUCER_EPOCH:
                return reply(ErrorCode.PRODUCER_FENCED)
        if epoch >= MAX_PRODUCER_EPOCH:
            previous_id = producer_id
            producer_id, epoch, last_epoch = self._new_producer_id(), 0, NO_PRODUCER_EPOCH
        else:
            epoch += 1
        target = TxnValue(
            producer_id, epoch, timeout_ms, TxnState.EMPTY, frozenset(), now, NO_TIMESTAMP
        )
        return [
            self._store(
                txn,
                target,
                lambda: reply(ErrorCode.NONE, producer_id, epoch),
                lambda error: reply(error),
                last_producer_epoch=last_epoch,
                previous_producer_id=previous_id,
                retry_epoch=NO_PRODUCER_EPOCH,
            )
        ]

    def _fence_and_abort(self, txn: _Txn) -> list[Effect]:
        """Bump the epoch of an open transaction and abort it (PrepareEpochFence, then
        PrepareAbort as in Kafka). With an exhausted epoch, abort with the current one, except
        in a version 2 transaction, whose markers must carry a newer epoch (KIP-1228)."""
        value = txn.value
        log.info(
            "aborting transaction of %s (producer id %d, epoch %d)",
            txn.transactional_id,
            value.producer_id,
            value.producer_epoch,
        )
        if value.client_version >= TV_2:
            return [self._prepare_bumped_end(txn, commit=False, reply=lambda _r: [])]
        epoch = min(value.producer_epoch + 1, MAX_PRODUCER_EPOCH)
        return [self._prepare_end(txn, epoch, commit=False, version=TV_1, on_reply=lambda _e: [])]

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, _Txn | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        error = self.coordinator_error(transactional_id)
        if error is not None:
            return error, None
        txn = self._txns.get(transactional_id)
        if txn is not None and producer_id == txn.value.next_producer_id != NO_PRODUCER_ID:
            # The id a version 2 end handed over, used before that end's markers are out.
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        if txn is None or txn.value.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.value.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, txn

    def add_partitions(
        self,
        token: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        version: int = TV_1,
    ) -> list[Effect]:
        """Add partitions (or, for AddOffsetsToTxn, the group's offsets partition). With
        transaction version 2 the partition leaders add them as the producer writes (KIP-890),
        which also starts the transaction."""
        wanted = frozenset(partitions)

        def reply(error: ErrorCode) -> list[Effect]:
            return [Reply(token, TxnResult(error, producer_id, producer_epoch))]

        error, txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return reply(error)
        value = txn.value
        if txn.pending_store is not None or value.state in (
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
        ):
            return reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        if value.state is TxnState.ONGOING and wanted <= value.partitions:
            return reply(ErrorCode.NONE)
        if value.state is not TxnState.ONGOING and value.state not in _COMPLETED:
            return reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        now = self._clock()
        if value.state is TxnState.ONGOING:
            target = replace(value, partitions=value.partitions | wanted, last_update_ms=now)
        else:
            target = replace(
                value,
                state=TxnState.ONGOING,
                partitions=wanted,
                start_ms=now,
                last_update_ms=now,
                client_version=version,
            )
        return [
            self._store(
                txn,
                target,
                lambda: reply(ErrorCode.NONE),
                reply,
                retry_epoch=NO_PRODUCER_EPOCH,
            )
        ]

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with verify_only (KIP-890): whether each partition is in the
        producer's ongoing transaction; nothing changes."""
        wanted = list(partitions)
        error, txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return dict.fromkeys(wanted, error)
        value = txn.value
        ongoing = value.state is TxnState.ONGOING
        return {
            tp: ErrorCode.NONE
            if ongoing and tp in value.partitions
            else ErrorCode.INVALID_TXN_STATE
            for tp in wanted
        }

    # --- EndTxn ---------------------------------------------------------------------------

    def end_txn(
        self,
        token: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        version: int = TV_1,
    ) -> list[Effect]:
        """EndTxn. With transaction version 2 (EndTxn v5, KIP-890) the end bumps the epoch (a
        new producer id once it is exhausted), the answer carries the producer's next id and
        epoch, an abort is allowed with no transaction open (it only bumps the epoch), and a
        retry with the epoch before the bump gets the same answer."""

        def reply(error: ErrorCode) -> list[Effect]:
            if version >= TV_2:
                # EndTxn v5 answers a producer id and epoch only with success.
                return [Reply(token, TxnResult(error))]
            return [Reply(token, TxnResult(error, producer_id, producer_epoch))]

        if version >= TV_2:
            retried = self._retried_end(transactional_id, producer_id, producer_epoch)
            if retried is not None:
                return [Reply(token, self._retry_result(retried, commit))]
        error, txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return reply(error)
        if txn.pending_store is not None:
            return reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = txn.value.state
        wanted_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        wanted_complete = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if version >= TV_2 and (state is TxnState.ONGOING or (state in _COMPLETED and not commit)):
            return [self._prepare_bumped_end(txn, commit=commit, reply=lambda r: [Reply(token, r)])]
        if state is TxnState.ONGOING:
            return [
                self._prepare_end(
                    txn, producer_epoch, commit=commit, version=version, on_reply=reply
                )
            ]
        if state is wanted_complete and version < TV_2:
            # A retry of an EndTxn that completed.
            return reply(ErrorCode.NONE)
        if state is wanted_prepare:
            return reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        return reply(ErrorCode.INVALID_TXN_STATE)

    def _retried_end(self, transactional_id: str, producer_id: int, epoch: int) -> _Txn | None:
        """The transaction whose version 2 end bumped ``epoch`` (of ``producer_id``, or of the
        id it handed over to once exhausted), when this EndTxn is a retry of that end."""
        if self.coordinator_error(transactional_id) is not None:
            return None
        txn = self._txns.get(transactional_id)
        if txn is None or txn.retry_epoch == NO_PRODUCER_EPOCH or txn.retry_epoch != epoch:
            return None
        value = txn.value
        if value.producer_id == producer_id or txn.previous_producer_id == producer_id:
            return txn
        return None

    def _retry_result(self, txn: _Txn, commit: bool) -> TxnResult:
        value = txn.value
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.pending_store is not None or value.state in (
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
        ):
            return TxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if value.state is not done:
            return TxnResult(ErrorCode.INVALID_TXN_STATE)
        return TxnResult(ErrorCode.NONE, value.producer_id, value.producer_epoch)

    def _prepare_bumped_end(
        self, txn: _Txn, *, commit: bool, reply: Callable[[TxnResult], list[Effect]]
    ) -> StoreTxn:
        """A version 2 end: markers go out with the next epoch; the producer continues with it,
        or with a new producer id at epoch 0 once the epoch is exhausted (``reply`` gets
        which)."""
        value = txn.value
        epoch = value.producer_epoch + 1
        next_id = self._new_producer_id() if epoch >= MAX_PRODUCER_EPOCH else NO_PRODUCER_ID
        answer = (value.producer_id, epoch) if next_id == NO_PRODUCER_ID else (next_id, 0)

        def on_reply(error: ErrorCode) -> list[Effect]:
            if error != ErrorCode.NONE:
                return reply(TxnResult(error))
            return reply(TxnResult(ErrorCode.NONE, *answer))

        return self._prepare_end(
            txn, epoch, commit=commit, version=TV_2, on_reply=on_reply, next_producer_id=next_id
        )

    def _prepare_end(
        self,
        txn: _Txn,
        epoch: int,
        *,
        commit: bool,
        version: int,
        on_reply: Callable[[ErrorCode], list[Effect]],
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> StoreTxn:
        value = txn.value
        target = replace(
            value,
            producer_epoch=epoch,
            state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
            last_update_ms=self._clock(),
            client_version=version,
            next_producer_id=next_producer_id,
        )

        def stored() -> list[Effect]:
            effects = on_reply(ErrorCode.NONE)
            self._resume(txn, effects)
            return effects

        bumped = epoch != value.producer_epoch
        return self._store(
            txn,
            target,
            stored,
            on_reply,
            last_producer_epoch=value.producer_epoch if bumped else None,
            retry_epoch=value.producer_epoch if bumped and version >= TV_2 else None,
        )

    def markers_written(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> list[Effect]:
        """Every partition has the markers: the transaction completes."""
        txn = self._txns.get(transactional_id)
        if txn is None:
            return []
        txn.markers_in_flight = False
        value = txn.value
        if (
            value.producer_id != producer_id
            or value.producer_epoch != producer_epoch
            or value.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
            or txn.pending_store is not None
        ):
            return []
        complete = (
            TxnState.COMPLETE_COMMIT
            if value.state is TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT
        )
        target = replace(
            value, state=complete, partitions=frozenset(), last_update_ms=self._clock()
        )
        if value.next_producer_id == NO_PRODUCER_ID:
            return [self._store(txn, target, lambda: [], lambda _error: [])]
        # The exhausted epoch's transaction is over: the producer id it handed over takes its
        # place (KIP-890, as KIP-360 does at InitProducerId).
        target = replace(
            target,
            producer_id=value.next_producer_id,
            producer_epoch=0,
            next_producer_id=NO_PRODUCER_ID,
        )
        return [
            self._store(
                txn,
                target,
                lambda: [],
                lambda _error: [],
                last_producer_epoch=NO_PRODUCER_EPOCH,
                previous_producer_id=value.producer_id,
            )
        ]

    def markers_abandoned(self, transactional_id: str) -> None:
        """The markers were not all written (the partition moved away, or a newer epoch
        wrote its own); a later ``abort_timed_out`` pass sends them again if still ours."""
        txn = self._txns.get(transactional_id)
        if txn is not None:
            txn.markers_in_flight = False

    # --- the clock ------------------------------------------------------------------------

    def abort_timed_out(self) -> list[Effect]:
        """Abort transactions open longer than their timeout; resend markers whose write
        failed (transaction.abort.timed.out.transaction.cleanup.interval.ms)."""
        now = self._clock()
        effects: list[Effect] = []
        for txn in list(self._txns.values()):
            if self.coordinator_error(txn.transactional_id) is not None:
                continue
            value = txn.value
            if txn.pending_store is not None:
                continue
            if value.state is TxnState.ONGOING and value.start_ms + value.timeout_ms < now:
                effects.extend(self._fence_and_abort(txn))
            else:
                self._resume(txn, effects)
        return effects

    def expire_idle(self) -> list[Effect]:
        """Transactional ids with no transaction open and idle for
        transactional.id.expiration.ms are deleted (tombstones)."""
        now = self._clock()
        effects: list[Effect] = []
        for txn in list(self._txns.values()):
            if self.coordinator_error(txn.transactional_id) is not None:
                continue
            value = txn.value
            if (
                txn.pending_store is None
                and value.state in _COMPLETED
                and value.last_update_ms + self.config.transactional_id_expiration_ms <= now
            ):
                effects.append(self._store(txn, None, lambda: [], lambda _error: []))
        return effects

    # --- admin ----------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]:
        error = self.coordinator_error(transactional_id)
        if error is not None:
            return error, None
        txn = self._txns.get(transactional_id)
        if txn is None or txn.value.producer_epoch == NO_PRODUCER_EPOCH:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        value = txn.value
        return ErrorCode.NONE, TxnDescription(
            transactional_id,
            value.state,
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            value.start_ms,
            value.partitions,
        )

    def list_transactions(
        self,
        states: Iterable[TxnState] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
    ) -> list[TxnDescription]:
        """Transactions of the loaded partitions matching every filter given (an empty filter
        matches all; a duration filter only matches open transactions older than it)."""
        wanted_states = set(states)
        wanted_ids = set(producer_ids)
        now = self._clock()
        out = []
        for transactional_id in sorted(self._txns):
            error, description = self.describe(transactional_id)
            if description is None:
                continue
            if wanted_states and description.state not in wanted_states:
                continue
            if wanted_ids and description.producer_id not in wanted_ids:
                continue
            if min_duration_ms >= 0 and (
                description.start_ms == NO_TIMESTAMP
                or now - description.start_ms <= min_duration_ms
            ):
                continue
            out.append(description)
        return out
