"""Broker-side schema validation (kbroker/schema_validation.py) on the bytes of produced
batches: exactly the invalid records named (KIP-467), whatever their framing, uncompressed
and compressed, and runs of records of one shape checked without the Python walk."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from kbroker import schema_validation
from kbroker.record_validation import RecordValidationError
from kbroker.schema_registry.state import RegistryState
from tests.schema_registry.test_state import register
from wire.errors import KafkaError
from wire.records.batch import BATCH_HEADER_SIZE
from wire.records.compression import LZ4, NONE, ZSTD, DecompressionLimitError
from wire.records.record import Record, build_batch, decode_batch

TOPIC = "orders"
MAX_MESSAGE_BYTES = 1_048_588
BASE_TIMESTAMP = 1_700_000_000_000


def schema(name: str, *fields: str) -> str:
    columns = [{"name": f, "type": "int", "default": 0} for f in fields]
    return json.dumps({"type": "record", "name": name, "fields": columns})


@pytest.fixture(scope="module")
def state() -> RegistryState:
    """Ids 1 and 2 under the value subject, 3 under the key subject, 4 another topic's."""
    registry = RegistryState()
    assert register(registry, f"{TOPIC}-value", schema("A")) == 1
    assert register(registry, f"{TOPIC}-value", schema("A", "b")) == 2
    assert register(registry, f"{TOPIC}-key", schema("K")) == 3
    assert register(registry, "elsewhere-value", schema("C")) == 4
    return registry


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def check(
    state: RegistryState, batch: bytes, *, keys: bool = False, values: bool = True
) -> list[int]:
    """The indexes of the records refused."""
    try:
        schema_validation.check_schema_ids(
            memoryview(bytearray(batch)),
            TOPIC,
            state,
            keys=keys,
            values=values,
            max_message_bytes=MAX_MESSAGE_BYTES,
        )
    except RecordValidationError as e:
        return [error.batch_index for error in e.record_errors]
    return []


def expected(batch: bytes, *, keys: bool, values: bool) -> list[int]:
    """What validation must refuse, from the batch decoded record by record."""

    def valid(field: bytes | None, ids: tuple[int, ...]) -> bool:
        return (
            field is not None
            and len(field) >= 5
            and field[0] == 0
            and int.from_bytes(field[1:5], "big") in ids
        )

    records = decode_batch(batch, max_message_bytes=MAX_MESSAGE_BYTES)[1]
    return [
        index
        for index, record in enumerate(records)
        if (keys and not valid(record.key, (3,))) or (values and not valid(record.value, (1, 2)))
    ]


def random_field(rng: random.Random, ids: tuple[int, ...]) -> bytes | None:
    kind = rng.random()
    if kind < 0.05:
        return None
    if kind < 0.1:
        return b"\x00\x00\x00"[: rng.randrange(4)]  # shorter than a schema id prefix
    if kind < 0.15:
        return framed(4, b"p")  # another subject's id
    if kind < 0.2:
        return b"\x01" + bytes(rng.randrange(256) for _ in range(rng.randrange(4, 40)))
    return framed(rng.choice(ids), bytes(rng.randrange(256) for _ in range(rng.randrange(300))))


def random_batch(rng: random.Random, codec: int) -> bytes:
    """Runs of identical records (a producer's fixed-size records), a bad one now and then
    inside a run, between records of every framing: keys, headers, multi-byte deltas."""
    records: list[Record] = []
    offset = 0
    timestamp = BASE_TIMESTAMP
    while len(records) < 400:
        key, value = random_field(rng, (3,)), random_field(rng, (1, 2))
        headers = [("h", b"v" * rng.randrange(3))] if rng.random() < 0.2 else []
        for _ in range(rng.choice((1, 1, 2, 20, 90))):
            offset += rng.choice((1, 1, 1, 1, 50, 9000))
            timestamp += rng.choice((0, 0, 1, 100, 20_000))
            if rng.random() < 0.02:
                records.append(Record(offset, timestamp, key, framed(4, b"x")))
            else:
                records.append(Record(offset, timestamp, key, value, headers))
    return build_batch(records, base_offset=records[0].offset, compression=codec)


@pytest.mark.parametrize("codec", [NONE, LZ4, ZSTD])
@pytest.mark.parametrize(("keys", "values"), [(False, True), (True, False), (True, True)])
def test_exactly_the_invalid_records_are_named(
    state: RegistryState, codec: int, keys: bool, values: bool
) -> None:
    rng = random.Random(f"{codec}-{keys}-{values}")
    for _ in range(12):
        batch = random_batch(rng, codec)
        assert check(state, batch, keys=keys, values=values) == expected(
            batch, keys=keys, values=values
        )


def one_shape_batch(count: int, codec: int = NONE) -> bytes:
    """kcat's records: one schema id, one size; the deltas widen along the batch."""
    value = framed(1, b"x" * 95)
    records = [Record(i, BASE_TIMESTAMP + i // 4, None, value) for i in range(count)]
    return build_batch(records, compression=codec)


@pytest.mark.parametrize("codec", [NONE, LZ4])
def test_records_of_one_shape_are_not_walked_in_python(
    state: RegistryState, codec: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def walk(*args: object) -> list[tuple[int, str, int, int]]:
        raise AssertionError("walked in Python")

    monkeypatch.setattr(schema_validation, "_scan", walk)
    assert check(state, one_shape_batch(10_000, codec)) == []


def test_a_batch_of_many_shapes_makes_at_most_max_runs_patterns(
    state: RegistryState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new shape every MIN_RUN records: past MAX_RUNS runs the rest is walked in Python
    (a pattern per run would cost more), and the bad records there are named all the same."""
    records = [
        Record(i, BASE_TIMESTAMP, None, framed(1, b"x" * (20 + i // schema_validation.MIN_RUN)))
        for i in range(schema_validation.MIN_RUN * 3 * schema_validation.MAX_RUNS)
    ]
    last = len(records) - 1
    records[last] = Record(last, BASE_TIMESTAMP, None, framed(4, b"x"))
    patterns = []
    run_pattern_at = schema_validation._run_pattern_at

    def counted(*args: Any) -> Any:
        patterns.append(args[1])
        return run_pattern_at(*args)

    monkeypatch.setattr(schema_validation, "_run_pattern_at", counted)
    assert check(state, build_batch(records)) == [last]
    assert len(patterns) == schema_validation.MAX_RUNS


def test_a_record_laid_out_unlike_its_run_is_named(state: RegistryState) -> None:
    """A record of its neighbours' size whose bytes, read at their field positions, show their
    key length, value length and schema id; but its timestamp delta is a byte wider, so its
    own fields start a byte later: a key one byte longer, then a value of length 0."""
    key, value = b"k" * 8, framed(1, b"x" * 25)
    records = [Record(i, BASE_TIMESTAMP, key, value) for i in range(40)]
    batch = bytearray(build_batch(records))
    size = len(batch[BATCH_HEADER_SIZE:]) // 40
    body = bytes([0, 0x80, 0x01, 2 * len(key), 2 * len(key)]) + key[1:]
    body += bytes([2 * len(value)]) + value[:5] + b"x" * (len(value) - 4)
    at = BATCH_HEADER_SIZE + 20 * size
    assert len(body) == size - 1 and batch[at] == 2 * len(body)
    batch[at + 1 : at + size] = body
    assert check(state, bytes(batch)) == [20]


def test_a_record_with_a_longer_key_than_its_run_is_named(state: RegistryState) -> None:
    """Its key length field alone differs from its neighbours': one byte more of key, and
    its value length field is then the first byte of what they have as schema id, 0."""
    key, value = b"k" * 8, framed(1, b"x" * 25)
    records = [Record(i, BASE_TIMESTAMP, key, value) for i in range(40)]
    batch = bytearray(build_batch(records))
    size = len(batch[BATCH_HEADER_SIZE:]) // 40
    key_length_at = BATCH_HEADER_SIZE + 20 * size + 4
    assert batch[key_length_at] == 2 * len(key)
    batch[key_length_at] = 2 * (len(key) + 1)
    assert check(state, bytes(batch)) == [20]


def test_messages_name_what_is_missing(state: RegistryState) -> None:
    records = [Record(i, BASE_TIMESTAMP, None, framed(1, b"x" * 20)) for i in range(50)]
    records[30] = Record(30, BASE_TIMESTAMP, None, framed(4, b"x" * 20))
    records[31] = Record(31, BASE_TIMESTAMP, None, b"plain")
    with pytest.raises(RecordValidationError) as caught:
        schema_validation.check_schema_ids(
            build_batch(records),
            TOPIC,
            state,
            keys=False,
            values=True,
            max_message_bytes=MAX_MESSAGE_BYTES,
        )
    assert [(e.batch_index, e.message) for e in caught.value.record_errors] == [
        (30, f"Log record value schema id 4 is not registered under subject {TOPIC}-value"),
        (31, f"Log record value has no schema id (topic {TOPIC} validates values)"),
    ]


def test_records_overrunning_their_batch_do_not_parse(state: RegistryState) -> None:
    records = [Record(i, BASE_TIMESTAMP, None, framed(1, b"x" * 20)) for i in range(50)]
    batch = bytearray(build_batch(records))
    assert batch[-32] == 62  # the last record's length, 31 (zig-zag)
    batch[-32] = 126  # 63: past the batch's end
    with pytest.raises(KafkaError, match="records do not parse"):
        schema_validation.check_schema_ids(
            batch, TOPIC, state, keys=False, values=True, max_message_bytes=MAX_MESSAGE_BYTES
        )


@pytest.mark.parametrize("codec", [LZ4, ZSTD])
def test_a_batch_decompressing_past_the_topics_cap_is_refused(
    state: RegistryState, codec: int
) -> None:
    """Validation decompresses with the cap of wire.records.compression.decompression_cap:
    here 10 records of at most 100 bytes, and the batch holds 10 of 1,000."""
    records = [Record(i, BASE_TIMESTAMP, None, framed(1, b"x" * 995)) for i in range(10)]
    with pytest.raises(DecompressionLimitError):
        schema_validation.check_schema_ids(
            build_batch(records, compression=codec),
            TOPIC,
            state,
            keys=False,
            values=True,
            max_message_bytes=100,
        )
