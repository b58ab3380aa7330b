"""The console's pure cores: samples, Prometheus text, record views, schema decoding, basic
auth and CSRF tokens."""

from __future__ import annotations

import base64
import io
import json

import fastavro
from google.protobuf import timestamp_pb2

from kbroker.console import samples
from kbroker.console.auth import CsrfTokens, basic_user
from kbroker.console.formatting import format_rate, format_size, format_timestamp
from kbroker.console.prometheus import counters_by_label
from kbroker.console.record_view import MAX_SHOWN_BYTES, schema_framed, show
from kbroker.console.schemas import AVRO, PROTOBUF, RegisteredSchema, decode, protobuf_indexes


def test_throughput_is_the_growth_of_end_offsets_per_second() -> None:
    store = samples.SampleStore(retention=3600)
    store.record_end_offsets(100.0, {("a", 0): 10, ("a", 1): 0, ("b", 0): 5})
    assert store.series(samples.TOTAL_THROUGHPUT) == []
    store.record_end_offsets(110.0, {("a", 0): 60, ("a", 1): 50, ("b", 0): 5})
    assert store.latest(samples.throughput_key("a")) == 10.0
    assert store.latest(samples.throughput_key("b")) == 0.0
    assert store.latest(samples.TOTAL_THROUGHPUT) == 10.0
    # A topic deleted and created again starts from zero: its new end offset is its growth.
    store.record_end_offsets(120.0, {("a", 0): 20, ("a", 1): 50, ("b", 0): 5})
    assert store.latest(samples.throughput_key("a")) == 2.0


def test_lag_per_group_and_partition() -> None:
    store = samples.SampleStore()
    committed = {"g": {("a", 0): 5, ("a", 1): 9, ("gone", 0): 3}}
    store.record_lag(1.0, committed, {("a", 0): 10, ("a", 1): 9})
    assert store.latest(samples.lag_key("g")) == 5
    assert store.partition_lag["g"] == {("a", 0): 5, ("a", 1): 0}


def test_series_keep_an_hour_and_vanished_ones_are_dropped() -> None:
    store = samples.SampleStore(retention=3600)
    store.add("x", 0.0, 1)
    store.add("y", 0.0, 1)
    store.add("x", 3000.0, 2)
    store.add("x", 3700.0, 3)
    assert store.series("x") == [(3000.0, 2), (3700.0, 3)]
    store.prune(3700.0)
    assert store.series("y") == []
    assert store.latest("x") == 3


def test_counter_rates_survive_a_broker_restart() -> None:
    store = samples.SampleStore()
    name = "kbroker_bytes_in_total"
    store.record_counters(0.0, {(name, "t"): 1000.0})
    store.record_counters(10.0, {(name, "t"): 3000.0})
    assert store.latest(samples.metric_key(name, "t")) == 200.0
    store.record_counters(20.0, {(name, "t"): 500.0})
    assert store.latest(samples.metric_key(name, "t")) == 50.0


def test_prometheus_counters_by_topic() -> None:
    text = "\n".join(
        [
            "# HELP kbroker_bytes_in_total Record bytes produced, per topic.",
            "# TYPE kbroker_bytes_in_total counter",
            'kbroker_bytes_in_total{topic="a"} 100',
            'kbroker_bytes_in_total{topic="we\\"ird"} 7',
            'kbroker_bytes_out_total{topic="a"} 2.5e3',
            'kbroker_requests_total{api="Produce"} 9',
            "kbroker_bytes_in_total{topic=broken",
        ]
    )
    found = counters_by_label(text, ("kbroker_bytes_in_total", "kbroker_bytes_out_total"), "topic")
    assert found == {
        ("kbroker_bytes_in_total", "a"): 100.0,
        ("kbroker_bytes_in_total", 'we"ird'): 7.0,
        ("kbroker_bytes_out_total", "a"): 2500.0,
    }


def test_record_views() -> None:
    assert show(None, "auto").kind == "null"
    assert show(b'{"a": [1, 2]}', "auto").text == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert show(b"<script>alert(1)</script>", "auto").text == "<script>alert(1)</script>"
    assert show(b"bell\x07", "text").text == "bell\\x07"
    assert show(b"\x00\x01\x02\xff" * 4, "auto").kind == "hex"
    assert show(b"ab", "hex").text == "00000000  61 62"
    assert show(b"not json", "json").note == "not JSON: shown as text"
    big = show(b"x" * (MAX_SHOWN_BYTES + 10), "text")
    assert len(big.text) == MAX_SHOWN_BYTES and "of" in big.note


def test_schema_framing_and_avro() -> None:
    schema = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), {"name": "<b>ada</b>"})
    framed = b"\x00" + (7).to_bytes(4, "big") + out.getvalue()
    schema_id, payload = schema_framed(framed) or (0, b"")
    assert schema_id == 7
    shown = decode(RegisteredSchema(7, AVRO, json.dumps(schema)), payload)
    assert shown.kind == "avro" and json.loads(shown.text) == {"name": "<b>ada</b>"}
    assert schema_framed(b"\x01abcd") is None and schema_framed(b"\x00ab") is None


def test_protobuf_from_a_serialized_descriptor() -> None:
    # google/protobuf/timestamp.proto's descriptor stands for any registered schema.
    proto = timestamp_pb2.DESCRIPTOR.serialized_pb
    message = timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=5)
    schema = RegisteredSchema(3, PROTOBUF, base64.b64encode(proto).decode())
    # A single 0 byte: the first message of the file (Confluent's short form).
    shown = decode(schema, b"\x00" + message.SerializeToString())
    assert shown.kind == "protobuf" and shown.note == "google.protobuf.Timestamp"
    assert json.loads(shown.text) == "2023-11-14T22:13:20.000000005Z"
    assert protobuf_indexes(b"\x04\x02\x06rest") == ([1, 3], b"rest")


def test_basic_auth_and_csrf_tokens() -> None:
    users = {"ops": "s3cret"}
    header = "Basic " + base64.b64encode(b"ops:s3cret").decode()
    assert basic_user(header, users) == "ops"
    assert basic_user("Basic " + base64.b64encode(b"ops:wrong").decode(), users) is None
    assert basic_user("Basic !!!", users) is None
    assert basic_user(None, users) is None
    tokens = CsrfTokens(b"k" * 32)
    session = tokens.new_session()
    assert tokens.valid(session, tokens.token(session))
    assert not tokens.valid(session, tokens.token(tokens.new_session()))
    assert not tokens.valid(session, None)
    assert not CsrfTokens().valid(session, tokens.token(session))


def test_sizes_rates_and_times_as_pages_show_them() -> None:
    assert [format_size(s) for s in (None, 1023, 1536, 5 * 1024**3)] == [
        "-", "1023 B", "1.5 KiB", "5.0 GiB",
    ]  # fmt: skip
    assert [format_rate(r) for r in (None, 2.25, 12345.6)] == ["-", "2.2/s", "12,346/s"]
    assert format_timestamp(1_700_000_000_123) == "2023-11-14 22:13:20.123Z"
    assert format_timestamp(-1) == "-"
