"""Pure parts of the operations tooling: partitioner, tables, log lines, console formats."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.cli.ops.admin import OpsError, parse_bootstrap, user_records
from kbroker.cli.ops.console import (
    ConsumerOptions,
    ProducerOptions,
    ShareConsumerOptions,
    format_record,
    format_share_record,
    parse_line,
    share_acknowledge_type,
)
from kbroker.cli.ops.group_member import range_assign
from kbroker.cli.ops.output import Progress, table
from kbroker.client_core.partitioner import murmur2, partition_for_key
from kbroker.logfmt import KeyValueFormatter, fields, format_value
from kbroker.share_consumer import AcknowledgeType, ShareRecord
from wire.records.record import Record, build_batch

# Values Kafka's own MurmurHash2 gives for these strings (its partitioner's unit tests).
KNOWN_HASHES = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize(("text", "expected"), sorted(KNOWN_HASHES.items()))
def test_murmur2_matches_kafka(text: str, expected: int) -> None:
    assert murmur2(text.encode()) == expected


@given(st.binary(), st.integers(min_value=1, max_value=1000))
def test_partition_for_key_is_in_range(key: bytes, n: int) -> None:
    assert 0 <= partition_for_key(key, n) < n


def test_table_pads_columns() -> None:
    assert table(("A", "LONGER"), [(1, "x"), (22222, None)]).splitlines() == [
        "A      LONGER",
        "1      x",
        "22222",
    ]


def test_progress_is_quiet_for_short_operations_and_always_says_done() -> None:
    out = io.StringIO()
    progress = Progress("job", out=out, interval=60)
    progress.update("1 of 2")
    progress.done("finished")
    assert out.getvalue() == "job: finished\n"


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1,[::1]:2") == [("a", 1), ("::1", 2)]
    with pytest.raises(OpsError, match="HOST:PORT"):
        parse_bootstrap("nohost")


def test_producer_line_with_headers_and_key() -> None:
    options = ProducerOptions(
        topic="t", key_separator=":", parse_headers=True, headers=(("src", "cli"),)
    )
    assert parse_line("h1:v1,h2:\tk:v:w", options) == (
        b"k",
        b"v:w",
        [("src", b"cli"), ("h1", b"v1"), ("h2", b"")],
    )
    assert parse_line("plain", ProducerOptions(topic="t")) == (None, b"plain", [])
    with pytest.raises(OpsError, match="key separator"):
        parse_line("nokey", options.__class__(topic="t", key_separator=":"))


def test_consumer_text_and_json_lines() -> None:
    record = Record(5, 1000, b"k", None, [("h", b"v")])
    options = ConsumerOptions(
        topic="t", print_key=True, print_headers=True, print_offset=True, key_separator="|"
    )
    assert format_record(record, 2, options) == "partition=2 offset=5 h:v\tk|null"
    as_json = json.loads(format_record(record, 2, ConsumerOptions(topic="t", as_json=True)))
    assert as_json == {
        "topic": "t",
        "partition": 2,
        "offset": 5,
        "timestamp": 1000,
        "key": "k",
        "value": None,
        "headers": [["h", "v"]],
    }


def _log_line(record: logging.LogRecord) -> str:
    return KeyValueFormatter("%(levelname)s %(name)s %(message)s").format(record)


def test_log_line_carries_fields_on_one_line() -> None:
    record = logging.LogRecord("kbroker.x", logging.INFO, __file__, 1, "hello\nworld", (), None)
    record.__dict__.update(fields(api="FETCH", ms=1.5, note="two words"))
    assert _log_line(record) == 'INFO kbroker.x hello\\nworld api=FETCH ms=1.5 note="two words"'


def test_log_line_keeps_an_exception_on_the_same_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("k", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = _log_line(record)
    assert "\n" not in line
    assert line.startswith('ERROR k failed exc="Traceback')
    assert "ValueError: boom" in line


def test_format_value_quotes_only_when_needed() -> None:
    assert format_value("plain") == "plain"
    assert format_value("") == '""'
    assert format_value('a"b') == '"a\\"b"'
    assert format_value("k=v") == '"k=v"'


def test_fetched_control_batches_are_not_shown() -> None:
    data = build_batch([Record(0, 1, b"k", b"v")], base_offset=0)
    marker = build_batch([Record(1, 2, b"\x00\x00\x00\x00", b"")], base_offset=1, control=True)
    more = build_batch([Record(2, 3, None, b"w")], base_offset=2)
    records = user_records(data + marker + more + more[:20])
    assert [(r.offset, r.value) for r in records] == [(0, b"v"), (2, b"w")]
    assert user_records(None) == []


def test_range_assignment() -> None:
    subscriptions = {"b": ["t", "u"], "a": ["t"], "c": ["t"]}
    assert range_assign(subscriptions, {"t": 7, "u": 2}) == {
        "a": {"t": [0, 1, 2]},
        "b": {"t": [3, 4], "u": [0, 1]},
        "c": {"t": [5, 6]},
    }
    assert range_assign({"a": ["t"], "b": ["t"]}, {"t": 1}) == {"a": {"t": [0]}, "b": {}}


def test_share_console_acknowledges_every_nth_as_asked_and_prints_deliveries() -> None:
    options = ShareConsumerOptions("t", "g", release_every=2, reject_every=3)
    types = [share_acknowledge_type(n, options) for n in range(1, 7)]
    a, rel, rej = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT
    assert types == [a, rel, rej, rel, a, rej]
    record = ShareRecord("t", 2, 7, 0, 0, b"k", None, [], 3)
    assert format_share_record(record, ShareConsumerOptions("t", "g")) == "null"
    shown = ShareConsumerOptions(
        "t", "g", print_key=True, print_offset=True, print_delivery_count=True
    )
    assert format_share_record(record, shown) == "partition=2 offset=7 delivery=3 k\tnull"
