"""__transaction_state records: Kafka's key and value layouts, both value versions."""

from __future__ import annotations

import struct

import pytest

from kbroker.txn.log_records import (
    TV_2,
    LoadedTransactions,
    TxnState,
    TxnValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from wire.errors import DecodeError
from wire.records.record import Record, build_batch, decode_batch

VALUE = TxnValue(42, 3, 60_000, TxnState.ONGOING, frozenset({("a", 1), ("a", 0), ("b", 2)}), 9, 8)


def test_key_is_version_0_and_the_id() -> None:
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(encode_key("tx")) == "tx"


def test_value_version_0_bytes() -> None:
    data = encode_value(VALUE)
    assert data is not None
    expected = (
        struct.pack(">hqhib", 0, 42, 3, 60_000, 1)
        + struct.pack(">i", 2)
        + b"\x00\x01a"
        + struct.pack(">iii", 2, 0, 1)
        + b"\x00\x01b"
        + struct.pack(">ii", 1, 2)
        + struct.pack(">qq", 9, 8)
    )
    assert data == expected
    assert decode_value(data) == VALUE


def test_value_version_1_flexible_with_tagged_fields() -> None:
    data = (
        struct.pack(">hqhib", 1, 42, 3, 60_000, 1)
        + b"\x02"  # one topic (compact array: n + 1)
        + b"\x02a"  # compact string "a"
        + b"\x02"
        + struct.pack(">i", 0)
        + b"\x00"  # the topic's tagged fields
        + struct.pack(">qq", 9, 8)
        + b"\x01"  # one tagged field: previous producer id
        + b"\x00\x08"
        + struct.pack(">q", 41)
    )
    value = decode_value(data)
    assert value.partitions == frozenset({("a", 0)})
    assert (value.producer_id, value.state, value.start_ms) == (42, TxnState.ONGOING, 8)


def test_a_version_2_transaction_is_written_as_value_version_1() -> None:
    # Kafka's tagged fields: 1 next producer id, 2 client transaction version (KIP-890).
    value = TxnValue(42, 3, 60_000, TxnState.PREPARE_COMMIT, frozenset({("a", 0)}), 9, 8, TV_2, 77)
    data = encode_value(value)
    assert data == (
        struct.pack(">hqhib", 1, 42, 3, 60_000, 2)
        + b"\x02\x02a\x02"
        + struct.pack(">i", 0)
        + b"\x00"
        + struct.pack(">qq", 9, 8)
        + b"\x02"
        + b"\x01\x08"
        + struct.pack(">q", 77)
        + b"\x02\x02"
        + struct.pack(">h", 2)
    )
    assert decode_value(data) == value
    handed_over = TxnValue(43, 0, 60_000, TxnState.COMPLETE_COMMIT, frozenset(), 9, 8, TV_2)
    assert decode_value(encode_value(handed_over) or b"") == handed_over


def test_unknown_status_and_version_are_refused() -> None:
    with pytest.raises(DecodeError):
        decode_value(struct.pack(">hqhib", 0, 1, 0, 1, 9) + struct.pack(">iqq", -1, 0, 0))
    with pytest.raises(DecodeError):
        decode_value(struct.pack(">h", 2))


def test_replay_keeps_the_latest_value_and_drops_tombstones() -> None:
    later = TxnValue(42, 4, 60_000, TxnState.EMPTY, frozenset(), 10, -1)
    records = [
        (encode_key("a"), encode_value(VALUE)),
        (encode_key("b"), encode_value(VALUE)),
        (encode_key("a"), encode_value(later)),
        (encode_key("b"), None),
    ]
    batch = build_batch(
        [
            Record(offset=i, timestamp=0, key=k, value=v, headers=[])
            for i, (k, v) in enumerate(records)
        ]
    )
    header, decoded = decode_batch(batch)
    loaded = LoadedTransactions()
    loaded.apply_batch(header, decoded)
    assert loaded.transactions == {"a": later}
