"""kbroker.data_client against a real broker: offsets, fetch, idempotent produce."""

from __future__ import annotations

from typing import Any

import pytest

from kbroker.data_client import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    DataClient,
    parse_bootstrap,
)
from kbroker.transactional_producer import (
    TransactionalProducer,
    end_transaction,
    transaction_state,
)
from tests.spark.helpers import BASE_TS, make_topic, produce_values
from wire.errors import ErrorCode, KafkaError
from wire.records.record import Record


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, [::1]:2") == [("a", 1), ("::1", 2)]
    with pytest.raises(ValueError):
        parse_bootstrap("nohost")
    with pytest.raises(ValueError):
        parse_bootstrap(" , ")


def test_offsets_and_fetch_from_inside_a_batch(broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 2)
    produce_values(broker.bootstrap, unique, 2, 20, batch=7)
    with DataClient(broker.bootstrap) as client:
        assert client.metadata([unique, unique + "-missing"]) == {unique: [0, 1]}
        tps = [(unique, 0), (unique, 1)]
        assert client.list_offsets(tps, EARLIEST) == {tp: 0 for tp in tps}
        assert client.list_offsets(tps, LATEST) == {tp: 20 for tp in tps}
        # Timestamps BASE_TS + n at offset n: exact even inside a batch (7..13 is one).
        assert client.list_offsets(tps, BASE_TS + 9) == {tp: 9 for tp in tps}
        assert client.list_offsets(tps, BASE_TS + 20) == {tp: -1 for tp in tps}
        result = client.fetch((unique, 1), 10)
        assert [r.offset for r in result.records] == list(range(10, 20))
        assert result.records[0].value == b"p1-10" and result.records[0].key == b"k10"
        assert result.records[0].headers == [("n", b"10")]
        assert (result.high_watermark, result.next_offset) == (20, 20)
        assert client.fetch((unique, 1), 20).records == []
        with pytest.raises(KafkaError) as caught:
            client.fetch((unique, 1), 21)
        assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_resent_batch_is_appended_once(broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 1)
    tp = (unique, 0)
    records = [Record(0, BASE_TS, None, b"once"), Record(0, BASE_TS, None, b"twice?")]
    with DataClient(broker.bootstrap) as client:
        assert client.produce(tp, records) == 0
        # As if the answer had been lost: the same producer sends the same sequence again.
        client._sequences[tp] = 0
        assert client.produce(tp, records) == 0
        assert client.list_offsets([tp], LATEST) == {tp: 2}
        assert client.produce(tp, [Record(0, BASE_TS, None, b"next")]) == 2
        assert [r.value for r in client.fetch(tp, 0).records] == [b"once", b"twice?", b"next"]


def test_transactions_ended_by_another_client(broker: Any, unique: str) -> None:
    """The sink's two-phase commit: one client writes in a transaction, another ends it
    knowing only the handle; read_committed sees exactly the committed records."""
    make_topic(broker.bootstrap, unique, 2)
    tps = [(unique, 0), (unique, 1)]
    with DataClient(broker.bootstrap) as writer_client, DataClient(broker.bootstrap) as driver:
        assert transaction_state(driver, unique + "-tx") is None
        writer = TransactionalProducer(writer_client, unique + "-tx", 60_000)
        for commit in (True, False):
            writer.init()
            for tp in tps:
                writer.produce(
                    tp,
                    [
                        Record(0, BASE_TS, None, b"%s-%d" % (str(commit).encode(), i))
                        for i in range(3)
                    ],
                )
            assert writer.partitions == frozenset(tps)
            assert transaction_state(driver, unique + "-tx") == "Ongoing"
            # Read_committed stops at the open transaction (the last stable offset).
            assert driver.list_offsets(tps, LATEST, isolation_level=READ_COMMITTED) == {
                tp: 4 if not commit else 0 for tp in tps
            }
            end_transaction(driver, writer.handle, commit=commit)
            # EndTxn is answered once the decision is logged; the markers follow.
            decided = (
                ("PrepareCommit", "CompleteCommit") if commit else ("PrepareAbort", "CompleteAbort")
            )
            assert transaction_state(driver, unique + "-tx") in decided
        # A third transaction left open is aborted by the next init (the producer fenced).
        writer.init()
        writer.produce(tps[0], [Record(0, BASE_TS, None, b"left-open")])
        stale = writer.handle
        writer.init()
        with pytest.raises(KafkaError) as fenced:
            end_transaction(driver, stale, commit=True)
        assert fenced.value.code == ErrorCode.PRODUCER_FENCED
        for tp in tps:
            committed = _values(driver, tp, READ_COMMITTED)
            assert committed == [b"True-0", b"True-1", b"True-2"]
            assert len(_values(driver, tp, READ_UNCOMMITTED)) == 6 + (1 if tp == tps[0] else 0)


def _values(client: DataClient, tp: tuple[str, int], isolation_level: int) -> list[bytes | None]:
    """Every value of a partition at an isolation level (a fetch stops at a segment's end)."""
    values: list[bytes | None] = []
    offset = 0
    while True:
        result = client.fetch(tp, offset, isolation_level=isolation_level)
        values += [r.value for r in result.records]
        if result.next_offset == offset:
            return values
        offset = result.next_offset
