"""Option parsing, offset arithmetic and partitioning: no Spark session, no broker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2

from kbroker.client_core.partitioner import murmur2, partition_for_key
from spark_conn.offsets import from_json, rate_limit, to_json
from spark_conn.options import OptionError, parse_source_options
from spark_conn.pipeline import PipelineConfig
from spark_conn.session import kafka_jars, kafka_package

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_differ_between_batch_and_streaming() -> None:
    batch = parse_source_options({**BOOT, "subscribe": "a,b"}, streaming=False)
    stream = parse_source_options({**BOOT, "subscribe": "a"}, streaming=True)
    assert batch.subscribe == ("a", "b")
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert stream.starting.kind == "latest"


def test_option_names_are_case_insensitive() -> None:
    o = parse_source_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "x.*", "INCLUDEHEADERS": "TRUE"},
        streaming=True,
    )
    assert o.pattern == "x.*" and o.include_headers and o.bootstrap == "h:1"
    assert o.matches("xy") and not o.matches("yx")


@pytest.mark.parametrize(
    ("options", "streaming", "complaint"),
    [
        ({"subscribe": "a", "assign": '{"a": [0]}'}, False, "exactly one"),
        ({}, False, "exactly one"),
        ({"subscribe": "a", "startingOffsets": "latest"}, False, "latest"),
        ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "earliest"),
        ({"subscribe": "a", "endingOffsets": "latest"}, True, "batch"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "positive"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "5"}, False, "streaming"),
        ({"subscribe": "a", "startingOffsets": "{nope"}, False, "JSON"),
        ({"assign": '["a"]'}, False, "assign"),
        ({"subscribePattern": "("}, False, "subscribePattern"),
        ({"subscribe": "a", "includeHeaders": "yes"}, False, "includeHeaders"),
    ],
)
def test_bad_options_are_refused(options: dict[str, str], streaming: bool, complaint: str) -> None:
    with pytest.raises(OptionError, match=complaint):
        parse_source_options({**BOOT, **options}, streaming=streaming)


def test_bootstrap_is_required() -> None:
    with pytest.raises(OptionError, match="bootstrap"):
        parse_source_options({"subscribe": "a"}, streaming=False)


def test_timestamp_options_take_precedence() -> None:
    o = parse_source_options(
        {**BOOT, "subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "1000"},
        streaming=False,
    )
    assert (o.starting.kind, o.starting.timestamp) == ("timestamps", 1000)
    o = parse_source_options(
        {**BOOT, "assign": '{"a": [1, 0]}', "startingOffsetsByTimestamp": '{"a": {"0": 5}}'},
        streaming=False,
    )
    assert o.assign == (("a", 0), ("a", 1))
    assert o.starting.offsets == {("a", 0): 5}


def test_offsets_json_round_trip() -> None:
    offsets = {("a", 0): 3, ("a", 10): 0, ("b", 2): 99}
    assert to_json(offsets) == {"a": {"0": 3, "10": 0}, "b": {"2": 99}}
    assert from_json(to_json(offsets)) == offsets


@given(
    st.dictionaries(
        st.tuples(st.sampled_from("abc"), st.integers(0, 5)),
        st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
        min_size=1,
    ),
    st.integers(1, 3000),
)
def test_rate_limit_never_exceeds_the_limit_and_always_moves(
    ranges: dict[tuple[str, int], tuple[int, int]], limit: int
) -> None:
    start = {tp: s for tp, (s, _) in ranges.items()}
    latest = {tp: s + n for tp, (s, n) in ranges.items()}
    end = rate_limit(start, latest, limit)
    waiting = sum(latest[tp] - start[tp] for tp in latest)
    taken = sum(end[tp] - start[tp] for tp in end)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)
    assert taken == min(limit, waiting)


def test_rate_limit_shares_in_proportion() -> None:
    start = {("a", 0): 0, ("a", 1): 100}
    end = rate_limit(start, {("a", 0): 300, ("a", 1): 200}, 40)
    assert end == {("a", 0): 30, ("a", 1): 110}


def test_murmur2_matches_kafka_python() -> None:
    for key in [b"", b"a", b"ab", b"abc", b"21", b"foobar", b"a-little-bit-long-string", b"x" * 37]:
        # kafka-python returns the unsigned form of the same 32 bits.
        assert murmur2(key) & 0xFFFFFFFF == kafka_murmur2(key) & 0xFFFFFFFF
        assert -(2**31) <= murmur2(key) < 2**31


def test_key_partition_is_in_range_and_stable() -> None:
    assert {partition_for_key(b"user-%d" % i, 3) for i in range(50)} == {0, 1, 2}
    assert partition_for_key(b"same", 7) == partition_for_key(b"same", 7)


def test_kafka_connector_locations(tmp_path: pytest.TempPathFactory) -> None:
    assert kafka_package("4.0.1") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1"
    directory = tmp_path / "jars"  # type: ignore[operator]
    directory.mkdir()
    (directory / "b.jar").write_bytes(b"")
    (directory / "a.jar").write_bytes(b"")
    (directory / "notes.txt").write_bytes(b"")
    single = tmp_path / "c.jar"  # type: ignore[operator]
    single.write_bytes(b"")
    assert kafka_jars(f"{directory},{single}") == [
        str(directory / "a.jar"),
        str(directory / "b.jar"),
        str(single),
    ]
    assert kafka_jars("") == []
    with pytest.raises(FileNotFoundError):
        kafka_jars(str(tmp_path / "missing.jar"))  # type: ignore[operator]


def test_security_options_take_the_kafka_prefix() -> None:
    """As Spark's Kafka source: kafka.security.protocol, kafka.sasl.*, kafka.ssl.*."""
    o = parse_source_options(
        {
            **BOOT,
            "subscribe": "a",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="spark" password="pw";'
            ),
            "kafka.ssl.truststore.location": "/ca.pem",
            "kafka.ssl.truststore.type": "PEM",
        },
        streaming=False,
    )
    assert (o.security.protocol, o.security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (o.security.sasl_username, o.security.ssl_cafile) == ("spark", "/ca.pem")
    assert parse_source_options({**BOOT, "subscribe": "a"}, streaming=False).security.tls is False


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"kafka.security.protocol": "SASL_PLAINTEXT"}, "kafka.security.protocol=SASL_PLAINTEXT"),
        ({"kafka.ssl.truststore.type": "JKS", "kafka.ssl.truststore.location": "/t"}, "PEM"),
    ],
)
def test_bad_security_options(options: dict[str, str], complaint: str) -> None:
    with pytest.raises(OptionError, match=complaint):
        parse_source_options({**BOOT, "subscribe": "a", **options}, streaming=False)


def test_audit_options_name_the_counts_topic_and_window() -> None:
    plain = parse_source_options({**BOOT, "subscribe": "a"}, streaming=True)
    assert (plain.audit_topic, plain.audit_window_ms) == (None, 600_000)
    counted = parse_source_options(
        {**BOOT, "subscribe": "a", "AuditTopic": "a-read", "auditWindowMs": "60000"},
        streaming=False,
    )
    assert (counted.audit_topic, counted.audit_window_ms) == ("a-read", 60_000)
    for bad in ("0", "10m"):
        with pytest.raises(OptionError, match="auditWindowMs"):
            parse_source_options({**BOOT, "subscribe": "a", "auditWindowMs": bad}, streaming=True)
    # Spark's own connector has no such option: the pipeline refuses rather than not count.
    with pytest.raises(ValueError, match="audit_topic"):
        PipelineConfig("h:1", "out", "cp", source_format="kafka", audit_topic="read")
