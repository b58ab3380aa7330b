"""Loading broker properties: file syntax, precedence, unknown names, bad values, listeners."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.config import (
    BrokerConfig,
    ConfigError,
    Listener,
    env_properties,
    load_properties,
    parse_overrides,
    parse_properties,
    resolve_properties,
)
from kbroker.config_defs import BROKER_DEFS, NO_EFFECT_YET

# The non-comment lines of the server.properties Kafka ships (ZooKeeper mode).
STOCK_SERVER_PROPERTIES = """\
# Licensed to the Apache Software Foundation (ASF) ...
############################# Server Basics #############################
broker.id=0
############################# Socket Server Settings #############################
#listeners=PLAINTEXT://:9092
#advertised.listeners=PLAINTEXT://your.host.name:9092
#listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


def test_stock_server_properties_load(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(STOCK_SERVER_PROPERTIES)
    config = BrokerConfig.from_properties(load_properties(path))
    assert config.broker_id == 0
    assert config.log_dirs == [Path("/tmp/kafka-logs")]
    assert config.zookeeper_connect == "localhost:2181"
    assert config.zookeeper_connection_timeout_ms == 18000
    assert config.offsets_topic_replication_factor == 1
    assert config.group_initial_rebalance_delay_ms == 0
    assert config.listeners == [Listener("PLAINTEXT", "", 9092)]
    assert config.no_effect_properties() == [
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
    ]


def test_every_property_the_brief_names_is_known() -> None:
    names = """broker.id num.network.threads num.io.threads socket.send.buffer.bytes
    socket.receive.buffer.bytes socket.request.max.bytes log.dirs log.dir num.partitions
    num.recovery.threads.per.data.dir offsets.topic.replication.factor
    transaction.state.log.replication.factor transaction.state.log.min.isr log.retention.hours
    log.retention.minutes log.retention.ms log.retention.bytes log.segment.bytes
    log.retention.check.interval.ms zookeeper.connect zookeeper.connection.timeout.ms
    zookeeper.session.timeout.ms group.initial.rebalance.delay.ms listeners advertised.listeners
    listener.security.protocol.map inter.broker.listener.name broker.rack
    default.replication.factor min.insync.replicas auto.create.topics.enable
    delete.topic.enable log.roll.ms log.roll.hours log.index.interval.bytes
    log.index.size.max.bytes log.flush.interval.messages log.flush.interval.ms
    log.flush.scheduler.interval.ms message.max.bytes log.message.timestamp.type
    log.cleanup.policy log.cleaner.enable unclean.leader.election.enable
    auto.leader.rebalance.enable controlled.shutdown.enable metrics.port""".split()
    assert [n for n in names if n not in BROKER_DEFS] == []
    assert NO_EFFECT_YET <= set(BROKER_DEFS)


def test_every_default_parses() -> None:
    for d in BROKER_DEFS.values():
        if d.default is not None:
            d.parse(d.default)


def test_defaults_when_nothing_is_set() -> None:
    config = BrokerConfig.from_properties({})
    assert config.broker_id == 0
    assert config.log_dirs == [Path("/tmp/kafka-logs")]
    assert config.num_partitions == 1
    assert config.default_replication_factor == 1
    assert config.auto_create_topics_enable is True
    assert config.delete_topic_enable is True
    assert config.message_max_bytes == 1048588
    assert config.zookeeper_connect is None
    assert config.zookeeper_connection_timeout_ms == 18000
    assert config.socket_request_max_bytes == 104857600
    assert config.metrics_port is None
    assert config.get("log.retention.hours") == 168
    assert config.get("log.cleanup.policy") == ["delete"]
    assert config.no_effect_properties() == []


def test_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! another comment\n"
        "\n"
        "  a=1\n"
        "b : 2\n"
        "c 3\n"
        "d=one \\\n"
        "    two\n"
        "e=tab\\there\n"
        "f=\\u0041\n"
        "key\\=with\\:sep=v\n"
        "empty\n"
        "a=last wins\n"
    )
    assert parse_properties(text) == {
        "a": "last wins",
        "b": "2",
        "c": "3",
        "d": "one two",
        "e": "tab\there",
        "f": "A",
        "key=with:sep": "v",
        "empty": "",
    }


def test_missing_properties_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read properties file"):
        load_properties(tmp_path / "nope.properties")


def test_precedence_file_env_override(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nlog.dirs=/file\nbroker.id=5\n")
    env = {"KBROKER_NUM_PARTITIONS": "3", "KBROKER_LOG_DIRS": "/env"}
    props = resolve_properties(path, env, ["log.dirs=/flag"])
    config = BrokerConfig.from_properties(props)
    assert config.broker_id == 5
    assert config.num_partitions == 3
    assert config.log_dirs == [Path("/flag")]


def test_env_ignores_unrelated_kbroker_variables() -> None:
    env = {"KBROKER_BOOTSTRAP": "localhost:9092", "KBROKER_LOG_DIR": "/x", "LOG_DIRS": "/y"}
    assert env_properties(env) == {"log.dir": "/x"}


def test_override_without_equals_sign() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["log.dirs"])
    assert parse_overrides(["a.b=c=d"]) == {"a.b": "c=d"}


def test_unknown_property_is_named() -> None:
    with pytest.raises(ConfigError, match="'log.dirz'"):
        BrokerConfig.from_properties({"log.dirz": "/x"})


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("num.partitions", "many", "expected an integer"),
        ("num.partitions", "0", "at least 1"),
        ("broker.id", "-2", "at least -1"),
        ("socket.request.max.bytes", "4294967296", "does not fit"),
        ("auto.create.topics.enable", "yes", "true or false"),
        ("log.message.timestamp.type", "Now", "not one of"),
        ("log.cleanup.policy", "delete,shred", "not one of"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "at most 1"),
        ("log.cleaner.min.cleanable.ratio", "half", "expected a number"),
        ("offsets.topic.replication.factor", "40000", "does not fit in a short"),
        ("metrics.port", "70000", "at most 65535"),
    ],
)
def test_bad_values_are_named(name: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({name: value})
    assert name in str(info.value)
    assert reason in str(info.value)


def test_values_are_trimmed_and_booleans_case_insensitive() -> None:
    config = BrokerConfig.from_properties(
        {"num.partitions": " 4 ", "auto.create.topics.enable": "FALSE"}
    )
    assert config.num_partitions == 4
    assert config.auto_create_topics_enable is False
    assert config.props["num.partitions"] == "4"


def test_broker_id_generation_with_zookeeper_is_refused() -> None:
    with pytest.raises(ConfigError, match="broker.id"):
        BrokerConfig.from_properties({"zookeeper.connect": "localhost:2181"})


def test_log_dirs_wins_over_log_dir_and_splits() -> None:
    config = BrokerConfig.from_properties({"log.dir": "/one", "log.dirs": "/a, /b"})
    assert config.log_dirs == [Path("/a"), Path("/b")]
    assert BrokerConfig.from_properties({"log.dir": "/one"}).log_dirs == [Path("/one")]
    with pytest.raises(ConfigError, match="log.dirs"):
        BrokerConfig.from_properties({"log.dirs": " , "})


def test_cordoned_log_dirs_are_log_dirs() -> None:
    config = BrokerConfig.from_properties({"log.dirs": "/a,/b", "cordoned.log.dirs": "/b"})
    assert (config.log_dirs, config.cordoned_log_dirs) == ([Path("/a"), Path("/b")], [Path("/b")])
    every = BrokerConfig.from_properties({"log.dirs": "/a,/b", "cordoned.log.dirs": "*"})
    assert every.cordoned_log_dirs == [Path("/a"), Path("/b")]
    assert BrokerConfig.from_properties({"log.dirs": "/a"}).cordoned_log_dirs == []
    with pytest.raises(ConfigError, match="cordoned.log.dirs: /c not in log.dirs"):
        BrokerConfig.from_properties({"log.dirs": "/a,/b", "cordoned.log.dirs": "/c"})


def test_zookeeper_connection_timeout_defaults_to_session_timeout() -> None:
    config = BrokerConfig.from_properties({"zookeeper.session.timeout.ms": "6000"})
    assert config.zookeeper_connection_timeout_ms == 6000


def test_no_effect_properties_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    config = BrokerConfig.from_properties({"num.io.threads": "4", "num.partitions": "2"})
    with caplog.at_level("INFO"):
        config.log_no_effect()
    assert "accepted, no effect yet: num.io.threads" in caplog.text
    assert "num.partitions" not in caplog.text


def _escape(text: str, *, key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch in "=: #!" and (key or (i == 0 and ch == " ")):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


_TEXT = st.text(alphabet=st.sampled_from("ab.=: #!\\\t\nz9é"), max_size=12)


@given(st.dictionaries(_TEXT.filter(bool), _TEXT, max_size=6))
def test_escaped_properties_parse_back(props: dict[str, str]) -> None:
    text = "".join(f"{_escape(k, key=True)}={_escape(v, key=False)}\n" for k, v in props.items())
    assert parse_properties(text) == props
