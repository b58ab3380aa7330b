"""The transaction coordinator's async shell around the pure ``TransactionStateMachine``.

It owns what the pure core must not do: writing transaction state to ``__transaction_state``
(through the shared ``StateTopic``: created on demand, loaded when this broker leads a
partition, unloaded when it stops, written with acks=all), waiting for those writes before the
answers that depend on them, sending markers to partition leaders (``markers.py``), and the
periodic passes that abort timed-out transactions
(transaction.abort.timed.out.transaction.cleanup.interval.ms) and expire idle transactional
ids (transaction.remove.expired.transaction.cleanup.interval.ms).

The coordinator epoch written into markers is the leader epoch of the ``__transaction_state``
partition when this broker loaded it, so partition leaders refuse markers from a coordinator
that has been replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from controller.interface import BrokerInfo
from kbroker.state_topic import PendingWrite, StateLoader, StateTopic, StateTopicSettings
from kbroker.txn.log_records import (
    TRANSACTION_STATE_TOPIC,
    TV_1,
    LoadedTransactions,
    TopicPartition,
    TxnState,
    encode_key,
    encode_value,
)
from kbroker.txn.markers import MarkerSender
from kbroker.txn.state_machine import (
    Effect,
    Reply,
    SendMarkers,
    StoreTxn,
    TransactionStateMachine,
    TxnConfig,
    TxnDescription,
    TxnResult,
    partition_for,
)
from wire.errors import ErrorCode

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

# How a failed write to __transaction_state is reported (Kafka's mapping in its
# TransactionStateManager).
_STORE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
# A request waits at most this long for its write (the write itself is bounded by
# request.timeout.ms; this only guards against a lost outcome).
WAIT_MARGIN_SECONDS = 30.0


def _reported(error: ErrorCode) -> ErrorCode:
    if error == ErrorCode.NONE:
        return error
    return _STORE_ERRORS.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)


class TransactionCoordinator:
    """Drives the transaction state machine for the partitions of __transaction_state this
    broker leads."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        config = broker.config
        num_partitions = config.get("transaction.state.log.num.partitions")
        self.state = StateTopic(
            broker,
            StateTopicSettings(
                name=TRANSACTION_STATE_TOPIC,
                num_partitions=num_partitions,
                replication_factor=config.get("transaction.state.log.replication.factor"),
                segment_bytes=config.get("transaction.state.log.segment.bytes"),
                min_insync_replicas=config.get("transaction.state.log.min.isr"),
                write_timeout_ms=config.get("request.timeout.ms"),
                create_on_start=False,
            ),
            self,
        )
        self.core = TransactionStateMachine(
            TxnConfig(
                max_timeout_ms=config.get("transaction.max.timeout.ms"),
                transactional_id_expiration_ms=config.get("transactional.id.expiration.ms"),
            ),
            lambda: int(broker.clock() * 1000),
            num_partitions,
            broker.producer_ids.next_id,
        )
        self._markers = MarkerSender(broker)
        self._waiters: dict[int, asyncio.Future[TxnResult]] = {}
        self._next_token = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._periodic: list[asyncio.Task[None]] = []

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        await self.state.start()
        config = self._broker.config
        self._periodic = [
            self._every(
                config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                self.core.abort_timed_out,
            ),
            self._every(
                config.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
                self.core.expire_idle,
            ),
        ]

    async def stop(self) -> None:
        tasks = [*self._periodic, *self._tasks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._periodic = []
        await self.state.stop()
        await self._markers.close()

    async def wait_loaded(self) -> None:
        await self.state.wait_loaded()

    def _every(self, interval_ms: int, step: Any) -> asyncio.Task[None]:
        async def run() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                self._perform(step())

        return asyncio.get_running_loop().create_task(run())

    # --- the __transaction_state partitions (StateOwner) ----------------------------------

    def begin_load(self, index: int) -> LoadedTransactions:
        self.core.num_partitions = self.state.num_partitions
        partition = self._broker.partition(TRANSACTION_STATE_TOPIC, index)
        epoch = partition.leader_epoch if partition is not None else -1
        self.core.begin_load(index, epoch)
        return LoadedTransactions()

    def complete_load(self, index: int, loader: StateLoader) -> None:
        assert isinstance(loader, LoadedTransactions)
        self._perform(self.core.complete_load(index, loader.transactions))
        log.info(
            "loaded %s-%d: %d transactional ids",
            TRANSACTION_STATE_TOPIC,
            index,
            len(loader.transactions),
        )

    def unload(self, index: int) -> None:
        self._perform(self.core.unload(index))

    # --- effects --------------------------------------------------------------------------

    def _perform(self, effects: list[Effect]) -> None:
        pending = list(effects)
        while pending:
            effect = pending.pop(0)
            if isinstance(effect, Reply):
                waiter = self._waiters.pop(effect.token, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(effect.result)
            elif isinstance(effect, StoreTxn):
                record = [(encode_key(effect.transactional_id), encode_value(effect.value))]
                write = self.state.start_write(effect.partition, record)
                if isinstance(write, ErrorCode):
                    pending[0:0] = self.core.txn_stored(effect.store_id, _reported(write))
                else:
                    self._spawn(self._finish_store(effect.store_id, write))
            else:
                self._spawn(self._send_markers(effect))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish_store(self, store_id: int, write: PendingWrite) -> None:
        error = _reported(await self.state.finish_write(write))
        self._perform(self.core.txn_stored(store_id, error))

    async def _send_markers(self, markers: SendMarkers) -> None:
        index = self.core.partition_for(markers.transactional_id)

        def still_wanted() -> bool:
            return index in self.state.owned()

        if await self._markers.send(markers, still_wanted):
            self._perform(
                self.core.markers_written(
                    markers.transactional_id, markers.producer_id, markers.producer_epoch
                )
            )
        else:
            # Given up or no longer ours: the next pass (or the next coordinator) resends.
            self.core.markers_abandoned(markers.transactional_id)

    async def _call(self, effects_for: Any) -> TxnResult:
        self._next_token += 1
        token = self._next_token
        future: asyncio.Future[TxnResult] = asyncio.get_running_loop().create_future()
        self._waiters[token] = future
        try:
            self._perform(effects_for(token))
            timeout = self._broker.config.get("request.timeout.ms") / 1000 + WAIT_MARGIN_SECONDS
            return await asyncio.wait_for(future, timeout)
        finally:
            self._waiters.pop(token, None)

    # --- requests -------------------------------------------------------------------------

    async def find_coordinator(self, transactional_id: str) -> tuple[ErrorCode, BrokerInfo | None]:
        count = self.state.partition_count()
        return await self.state.coordinator_of(partition_for(transactional_id, count))

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> TxnResult:
        return await self._call(
            lambda token: self.core.init_producer_id(
                token, transactional_id, timeout_ms, producer_id, producer_epoch
            )
        )

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        version: int = TV_1,
    ) -> ErrorCode:
        """``version`` 2: a partition leader adds the partitions for the producer (KIP-890)."""
        wanted = list(partitions)
        result = await self._call(
            lambda token: self.core.add_partitions(
                token, transactional_id, producer_id, producer_epoch, wanted, version
            )
        )
        return result.error

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        return self.core.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        version: int = TV_1,
    ) -> TxnResult:
        return await self._call(
            lambda token: self.core.end_txn(
                token, transactional_id, producer_id, producer_epoch, commit, version
            )
        )

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]:
        return self.core.describe(transactional_id)

    def list_transactions(
        self, states: Iterable[TxnState], producer_ids: Iterable[int], min_duration_ms: int
    ) -> tuple[ErrorCode, list[TxnDescription]]:
        if self.state.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        return ErrorCode.NONE, self.core.list_transactions(states, producer_ids, min_duration_ms)
