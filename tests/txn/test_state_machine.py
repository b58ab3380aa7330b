"""Scenario tests of the pure transaction coordinator, as data, with a fake clock.

Each scenario is a list of steps ``(action, *arguments, expected)``. Writes to
``__transaction_state`` succeed at once unless a step holds or fails them; markers are only
written when a step says so. Expected replies are ``(error, producer_id, epoch)`` or an error.
"""

from __future__ import annotations

from typing import Any

import pytest

from kbroker.txn.log_records import TV_1, TV_2, TxnState, TxnValue
from kbroker.txn.state_machine import (
    Effect,
    Reply,
    SendMarkers,
    StoreTxn,
    TransactionStateMachine,
    TxnConfig,
    partition_for,
)
from wire.errors import ErrorCode as E

PARTITIONS = 3
FIRST_ID = 1000
TP = ("t", 0)
TP2 = ("t", 1)


class Harness:
    def __init__(self) -> None:
        self.now = 1_000_000
        self.next_id = FIRST_ID
        self.core = TransactionStateMachine(
            TxnConfig(max_timeout_ms=60_000, transactional_id_expiration_ms=3_600_000),
            lambda: self.now,
            PARTITIONS,
            self._new_id,
        )
        for index in range(PARTITIONS):
            self.core.begin_load(index, coordinator_epoch=7)
            self.core.complete_load(index, {})
        self.token = 0
        self.replies: dict[int, Any] = {}
        self.markers: list[SendMarkers] = []
        self.stores: list[StoreTxn] = []
        self.held: list[StoreTxn] = []
        self.hold = False
        self.fail_with: E | None = None

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def perform(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Reply):
                r = effect.result
                self.replies[effect.token] = (r.error, r.producer_id, r.producer_epoch)
            elif isinstance(effect, StoreTxn):
                self.stores.append(effect)
                if self.hold:
                    self.held.append(effect)
                elif self.fail_with is not None:
                    self.perform(self.core.txn_stored(effect.store_id, self.fail_with))
                else:
                    self.perform(self.core.txn_stored(effect.store_id, E.NONE))
            else:
                self.markers.append(effect)

    def call(self, make: Any) -> Any:
        self.token += 1
        token = self.token
        self.perform(make(token))
        return self.replies.get(token)

    def step(self, action: str, *args: Any) -> Any:
        core = self.core
        if action == "init":
            txn, timeout, *expected = args
            return self.call(lambda t: core.init_producer_id(t, txn, timeout, *expected))
        if action in ("add", "add_tv2"):
            txn, pid, epoch, partitions = args
            version = TV_2 if action == "add_tv2" else TV_1
            reply = self.call(
                lambda t: core.add_partitions(t, txn, pid, epoch, partitions, version)
            )
            return None if reply is None else reply[0]
        if action == "verify":
            txn, pid, epoch, partitions = args
            return core.verify_partitions(txn, pid, epoch, partitions)
        if action == "end":
            txn, pid, epoch, commit = args
            return self.call(lambda t: core.end_txn(t, txn, pid, epoch, commit))[0]
        if action == "end_tv2":
            txn, pid, epoch, commit = args
            return self.call(lambda t: core.end_txn(t, txn, pid, epoch, commit, TV_2))
        if action in ("markers", "markers_tv2"):
            done = [
                (m.transactional_id, m.producer_id, m.producer_epoch, m.commit, m.partitions)
                + ((m.transaction_version,) if action == "markers_tv2" else ())
                for m in self.markers
            ]
            markers, self.markers = self.markers, []
            for m in markers:
                self.perform(
                    core.markers_written(m.transactional_id, m.producer_id, m.producer_epoch)
                )
            return done
        if action == "advance":
            self.now += args[0]
            return None
        if action == "abort_timed_out":
            self.perform(core.abort_timed_out())
            return None
        if action == "expire":
            self.perform(core.expire_idle())
            return None
        if action == "hold":
            self.hold = True
            return None
        if action == "release":
            self.hold = False
            held, self.held = self.held, []
            for store in held:
                self.perform(core.txn_stored(store.store_id, args[0] if args else E.NONE))
            return None
        if action == "fail_stores":
            self.fail_with = args[0] if args else None
            return None
        if action == "state":
            error, description = core.describe(args[0])
            if description is None:
                return error
            return (description.state, description.producer_id, description.producer_epoch)
        raise AssertionError(action)


# A producer's normal life: init, add, commit, markers, complete, next transaction.
COMMIT_AND_ABORT = [
    ("init", "tx", 10_000, (E.NONE, 1000, 0)),
    ("state", "tx", (TxnState.EMPTY, 1000, 0)),
    ("add", "tx", 1000, 0, [TP], E.NONE),
    ("state", "tx", (TxnState.ONGOING, 1000, 0)),
    ("add", "tx", 1000, 0, [TP], E.NONE),
    ("add", "tx", 1000, 0, [TP2], E.NONE),
    ("end", "tx", 1000, 0, True, E.NONE),
    ("state", "tx", (TxnState.PREPARE_COMMIT, 1000, 0)),
    # Before the markers are written, retries and other requests wait.
    ("end", "tx", 1000, 0, True, E.CONCURRENT_TRANSACTIONS),
    ("end", "tx", 1000, 0, False, E.INVALID_TXN_STATE),
    ("add", "tx", 1000, 0, [TP], E.CONCURRENT_TRANSACTIONS),
    ("init", "tx", 10_000, (E.CONCURRENT_TRANSACTIONS, -1, -1)),
    ("markers", [("tx", 1000, 0, True, frozenset({TP, TP2}))]),
    ("state", "tx", (TxnState.COMPLETE_COMMIT, 1000, 0)),
    ("end", "tx", 1000, 0, True, E.NONE),
    ("end", "tx", 1000, 0, False, E.INVALID_TXN_STATE),
    ("add", "tx", 1000, 0, [TP2], E.NONE),
    ("end", "tx", 1000, 0, False, E.NONE),
    ("markers", [("tx", 1000, 0, False, frozenset({TP2}))]),
    ("state", "tx", (TxnState.COMPLETE_ABORT, 1000, 0)),
    ("end", "tx", 1000, 0, True, E.INVALID_TXN_STATE),
    # EndTxn without a transaction.
    ("init", "tx", 10_000, (E.NONE, 1000, 1)),
    ("end", "tx", 1000, 1, True, E.INVALID_TXN_STATE),
]

# Producer checks, as Kafka answers them.
PRODUCER_CHECKS = [
    ("init", "tx", 10_000, (E.NONE, 1000, 0)),
    ("add", "tx", 999, 0, [TP], E.INVALID_PRODUCER_ID_MAPPING),
    ("add", "other", 1000, 0, [TP], E.INVALID_PRODUCER_ID_MAPPING),
    ("add", "tx", 1000, 1, [TP], E.PRODUCER_FENCED),
    ("end", "tx", 1000, 5, True, E.PRODUCER_FENCED),
    ("add", "", 1000, 0, [TP], E.INVALID_REQUEST),
    ("init", "", 10_000, (E.INVALID_REQUEST, -1, -1)),
    ("init", "tx", 60_001, (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)),
    ("init", "tx", 0, (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)),
    ("init", "tx", 60_000, (E.NONE, 1000, 1)),
    # The old epoch is fenced.
    ("add", "tx", 1000, 0, [TP], E.PRODUCER_FENCED),
]

# A new producer with an open transaction left by the previous one fences it: the epoch is
# bumped, the transaction aborted with the new epoch, and the retry bumps again.
FENCING = [
    ("init", "tx", 10_000, (E.NONE, 1000, 0)),
    ("add", "tx", 1000, 0, [TP, TP2], E.NONE),
    ("init", "tx", 10_000, (E.CONCURRENT_TRANSACTIONS, -1, -1)),
    ("state", "tx", (TxnState.PREPARE_ABORT, 1000, 1)),
    ("end", "tx", 1000, 0, True, E.PRODUCER_FENCED),
    ("init", "tx", 10_000, (E.CONCURRENT_TRANSACTIONS, -1, -1)),
    ("markers", [("tx", 1000, 1, False, frozenset({TP, TP2}))]),
    ("state", "tx", (TxnState.COMPLETE_ABORT, 1000, 1)),
    ("init", "tx", 10_000, (E.NONE, 1000, 2)),
    ("add", "tx", 1000, 1, [TP], E.PRODUCER_FENCED),
]

# KIP-360: InitProducerId naming the producer id and epoch it had.
KIP_360 = [
    ("init", "tx", 10_000, (E.NONE, 1000, 0)),
    ("init", "tx", 10_000, 1000, 0, (E.NONE, 1000, 1)),
    # A retry of that bump (its answer lost) gets the same answer.
    ("init", "tx", 10_000, 1000, 0, (E.NONE, 1000, 1)),
    # An epoch that is neither current nor the last one: fenced.
    ("init", "tx", 10_000, 1000, 5, (E.PRODUCER_FENCED, -1, -1)),
    # Another producer id: fenced.
    ("init", "tx", 10_000, 77, 0, (E.PRODUCER_FENCED, -1, -1)),
    # A new transactional id accepts any (the producer was idempotent before).
    ("init", "fresh", 10_000, 55, 3, (E.NONE, 1001, 0)),
]

# Transactions open past their timeout are aborted with a bumped epoch.
TIMEOUT = [
    ("init", "tx", 10_000, (E.NONE, 1000, 0)),
    ("add", "tx", 1000, 0, [TP], E.NONE),
    ("advance", 10_000, None),
    ("abort_timed_out", None),
    ("state", "tx", (TxnState.ONGOING, 1000, 0)),
    ("advance", 1, None),
    ("abort_timed_out", None),
    ("state", "tx", (TxnState.PREPARE_ABORT, 1000, 1)),
    ("end", "tx", 1000, 0, True, E.PRODUCER_FENCED),
    ("markers", [("tx", 1000, 1, False, frozenset({TP}))]),
    ("state", "tx", (TxnState.COMPLETE_ABORT, 1000, 1)),
]

# Idle transactional ids expire; open ones never do.
EXPIRY = [
    ("init", "idle", 10_000, (E.NONE, 1000, 0)),
    ("init", "busy", 60_000, (E.NONE, 1001, 0)),
    ("add", "busy", 1001, 0, [TP], E.NONE),
    ("advance", 3_600_000, None),
    ("expire", None),
    ("state", "idle", E.TRANSACTIONAL_ID_NOT_FOUND),
    ("state", "busy", (TxnState.ONGOING, 1001, 0)),
    ("init", "idle", 10_000, (E.NONE, 1002, 0)),
]

# A write that fails leaves the state as it was; requests see the mapped error.
FAILED_WRITES = [
    ("init", "tx", 10_000, (E.NONE, 1000, 0)),
    ("fail_stores", E.COORDINATOR_NOT_AVAILABLE, None),
    ("add", "tx", 1000, 0, [TP], E.COORDINATOR_NOT_AVAILABLE),
    ("state", "tx", (TxnState.EMPTY, 1000, 0)),
    ("init", "tx", 10_000, (E.COORDINATOR_NOT_AVAILABLE, -1, -1)),
    ("state", "tx", (TxnState.EMPTY, 1000, 0)),
    ("fail_stores", None),
    ("hold", None),
    ("add", "tx", 1000, 0, [TP], None),
    ("add", "tx", 1000, 0, [TP], E.CONCURRENT_TRANSACTIONS),
    ("release", None),
    ("state", "tx", (TxnState.ONGOING, 1000, 0)),
]

# KIP-890 verification: whether partitions are in the ongoing transaction.
VERIFY = [
    ("init", "tx", 10_000, (E.NONE, 1000, 0)),
    ("verify", "tx", 1000, 0, [TP], {TP: E.INVALID_TXN_STATE}),
    ("add", "tx", 1000, 0, [TP], E.NONE),
    ("verify", "tx", 1000, 0, [TP, TP2], {TP: E.NONE, TP2: E.INVALID_TXN_STATE}),
    ("verify", "tx", 1000, 1, [TP], {TP: E.PRODUCER_FENCED}),
    ("verify", "nope", 1000, 0, [TP], {TP: E.INVALID_PRODUCER_ID_MAPPING}),
]

# KIP-890's second part (transaction version 2): partitions added by their leaders, the epoch
# bumped at every end (the answer carries it), retries of an end answered alike, an abort with
# nothing open allowed, markers of version 2. As Kafka 4.3 answers the same requests.
TV2 = [
    ("init", "tx", 10_000, (E.NONE, 1000, 0)),
    ("add_tv2", "tx", 1000, 0, [TP], E.NONE),
    ("state", "tx", (TxnState.ONGOING, 1000, 0)),
    ("end_tv2", "tx", 1000, 0, True, (E.NONE, 1000, 1)),
    ("state", "tx", (TxnState.PREPARE_COMMIT, 1000, 1)),
    ("end_tv2", "tx", 1000, 0, True, (E.CONCURRENT_TRANSACTIONS, -1, -1)),
    ("end_tv2", "tx", 1000, 0, False, (E.CONCURRENT_TRANSACTIONS, -1, -1)),
    # The next transaction, before the markers of this one are out: retriable.
    ("add_tv2", "tx", 1000, 1, [TP], E.CONCURRENT_TRANSACTIONS),
    ("markers_tv2", [("tx", 1000, 1, True, frozenset({TP}), 2)]),
    ("state", "tx", (TxnState.COMPLETE_COMMIT, 1000, 1)),
    ("end_tv2", "tx", 1000, 0, True, (E.NONE, 1000, 1)),
    ("end_tv2", "tx", 1000, 0, False, (E.INVALID_TXN_STATE, -1, -1)),
    # A late write of the old epoch: fenced.
    ("add_tv2", "tx", 1000, 0, [TP], E.PRODUCER_FENCED),
    ("add_tv2", "tx", 1000, 1, [TP2], E.NONE),
    ("end_tv2", "tx", 1000, 1, False, (E.NONE, 1000, 2)),
    ("markers_tv2", [("tx", 1000, 2, False, frozenset({TP2}), 2)]),
    # An abort with nothing open bumps the epoch; a commit is refused.
    ("end_tv2", "tx", 1000, 2, False, (E.NONE, 1000, 3)),
    ("markers_tv2", [("tx", 1000, 3, False, frozenset(), 2)]),
    ("end_tv2", "tx", 1000, 2, False, (E.NONE, 1000, 3)),
    ("end_tv2", "tx", 1000, 3, True, (E.INVALID_TXN_STATE, -1, -1)),
    ("end", "tx", 1000, 3, True, E.INVALID_TXN_STATE),
    # A new producer's InitProducerId: the old epoch's EndTxn is no longer a retry.
    ("init", "tx", 10_000, (E.NONE, 1000, 4)),
    ("end_tv2", "tx", 1000, 2, False, (E.PRODUCER_FENCED, -1, -1)),
]

# A version 2 transaction past its timeout is aborted with the next epoch; the producer's own
# abort then is a retry of that end and carries on with the new epoch.
TV2_TIMEOUT = [
    ("init", "tx", 10_000, (E.NONE, 1000, 0)),
    ("add_tv2", "tx", 1000, 0, [TP], E.NONE),
    ("advance", 10_001, None),
    ("abort_timed_out", None),
    ("state", "tx", (TxnState.PREPARE_ABORT, 1000, 1)),
    ("markers_tv2", [("tx", 1000, 1, False, frozenset({TP}), 2)]),
    ("add_tv2", "tx", 1000, 0, [TP], E.PRODUCER_FENCED),
    ("end_tv2", "tx", 1000, 0, True, (E.INVALID_TXN_STATE, -1, -1)),
    ("end_tv2", "tx", 1000, 0, False, (E.NONE, 1000, 1)),
    ("add_tv2", "tx", 1000, 1, [TP], E.NONE),
]

SCENARIOS = {
    "tv2": TV2,
    "tv2_timeout": TV2_TIMEOUT,
    "commit_and_abort": COMMIT_AND_ABORT,
    "producer_checks": PRODUCER_CHECKS,
    "fencing": FENCING,
    "kip_360": KIP_360,
    "timeout": TIMEOUT,
    "expiry": EXPIRY,
    "failed_writes": FAILED_WRITES,
    "verify": VERIFY,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name: str) -> None:
    harness = Harness()
    for number, (action, *args, expected) in enumerate(SCENARIOS[name]):
        got = harness.step(action, *args)
        assert got == expected, f"step {number}: {action} {args}"


def test_stored_values_are_what_the_log_needs() -> None:
    harness = Harness()
    harness.step("init", "tx", 10_000)
    harness.step("add", "tx", 1000, 0, [TP])
    store = harness.stores[-1]
    assert store.partition == partition_for("tx", PARTITIONS)
    assert store.value == TxnValue(
        1000, 0, 10_000, TxnState.ONGOING, frozenset({TP}), harness.now, harness.now
    )


def test_a_loaded_partition_resumes_markers_and_unload_fails_waiting_requests() -> None:
    harness = Harness()
    core = harness.core
    index = partition_for("tx", PARTITIONS)
    value = TxnValue(1000, 3, 10_000, TxnState.PREPARE_COMMIT, frozenset({TP}), 1, 1)
    harness.perform(core.unload(index))
    core.begin_load(index, coordinator_epoch=9)
    assert core.coordinator_error("tx") == E.COORDINATOR_LOAD_IN_PROGRESS
    harness.perform(core.complete_load(index, {"tx": value}))
    (markers,) = harness.markers
    assert (markers.commit, markers.producer_epoch, markers.coordinator_epoch) == (True, 3, 9)
    harness.step("markers")
    assert harness.step("state", "tx") == (TxnState.COMPLETE_COMMIT, 1000, 3)
    harness.step("hold")
    token_reply = harness.call(lambda t: core.add_partitions(t, "tx", 1000, 3, [TP]))
    assert token_reply is None
    harness.perform(core.unload(index))
    assert harness.replies[harness.token][0] == E.NOT_COORDINATOR
    assert core.coordinator_error("tx") == E.NOT_COORDINATOR


def test_list_transactions_filters() -> None:
    harness = Harness()
    harness.step("init", "a", 10_000)
    harness.step("init", "b", 10_000)
    harness.step("add", "b", 1001, 0, [TP])
    harness.step("advance", 5_000)
    core = harness.core
    assert [d.transactional_id for d in core.list_transactions()] == ["a", "b"]
    assert [d.transactional_id for d in core.list_transactions([TxnState.ONGOING])] == ["b"]
    assert [d.transactional_id for d in core.list_transactions(producer_ids=[1000])] == ["a"]
    assert [d.transactional_id for d in core.list_transactions(min_duration_ms=4_000)] == ["b"]
    assert core.list_transactions(min_duration_ms=6_000) == []


def test_tv2_end_with_an_exhausted_epoch_hands_over_a_new_producer_id() -> None:
    harness = Harness()
    core = harness.core
    index = partition_for("tx", PARTITIONS)
    harness.perform(core.unload(index))
    core.begin_load(index, coordinator_epoch=7)
    value = TxnValue(500, 32765, 10_000, TxnState.EMPTY, frozenset(), 1, -1, TV_2)
    harness.perform(core.complete_load(index, {"tx": value}))
    assert harness.step("add_tv2", "tx", 500, 32765, [TP]) == E.NONE
    # The markers carry 32766, the last epoch; the producer goes on with a new id.
    assert harness.step("end_tv2", "tx", 500, 32765, True) == (E.NONE, FIRST_ID, 0)
    assert harness.step("add_tv2", "tx", FIRST_ID, 0, [TP]) == E.CONCURRENT_TRANSACTIONS
    assert harness.step("markers_tv2") == [("tx", 500, 32766, True, frozenset({TP}), 2)]
    assert harness.step("state", "tx") == (TxnState.COMPLETE_COMMIT, FIRST_ID, 0)
    assert harness.stores[-1].value == TxnValue(
        FIRST_ID, 0, 10_000, TxnState.COMPLETE_COMMIT, frozenset(), harness.now, harness.now, TV_2
    )
    assert harness.step("end_tv2", "tx", 500, 32765, True) == (E.NONE, FIRST_ID, 0)
    assert harness.step("add_tv2", "tx", FIRST_ID, 0, [TP]) == E.NONE
