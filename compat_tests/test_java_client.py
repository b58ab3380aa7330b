"""Apache Kafka's Java client and Kafka Streams, 3.9.0 and 4.3, against the broker.

Each test runs one of our Java programs (compat_tests/jvm/, compiled once per session and
client generation) for a group of scenarios, so that the JVM starts a few times rather than
once per check; see compat_tests/java_programs.py. Test ids name the client, then the broker
(``[java4.3-kafka43]``). Every test also checks the request versions the client sent: against
Apache Kafka, the versions in the tables below (measured); against kbroker, the versions the
client sends to Kafka 4.3 (the newest each API has), lowered to what kbroker advertises, so
that the expectations follow kbroker as it serves newer versions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.advertised import Advertised, advertised
from compat_tests.java_programs import JAVA_CLIENT_39, JAVA_CLIENTS, JavaPrograms, JavaRun
from compat_tests.support import (
    CODECS,
    NEAR_LIMIT_VALUE_SIZE,
    OVER_LIMIT_VALUE_SIZE,
    assert_stored_codec,
    base_timestamp_ms,
)

pytestmark = pytest.mark.slow

# The version of each API the Java client 3.9.0 sends to Apache Kafka 3.9.0 (ZooKeeper mode):
# the newest both know. A broker that advertises less, or more than it should, changes this.
# The 4.3 client sends the same to Kafka 3.9: the broker's newest are the 3.9 client's newest.
JAVA39_TO_KAFKA39: dict[str, int] = {
    "API_VERSIONS": 4,
    "METADATA": 12,
    "PRODUCE": 11,
    "FETCH": 17,
    "LIST_OFFSETS": 9,
    "OFFSET_FOR_LEADER_EPOCH": 4,
    "INIT_PRODUCER_ID": 5,
    "FIND_COORDINATOR": 6,
    "JOIN_GROUP": 9,
    "SYNC_GROUP": 5,
    "HEARTBEAT": 4,
    "LEAVE_GROUP": 5,
    "OFFSET_COMMIT": 9,
    "OFFSET_FETCH": 9,
    "OFFSET_DELETE": 0,
    "CREATE_TOPICS": 7,
    "DELETE_TOPICS": 6,
    "DELETE_RECORDS": 2,
    "DESCRIBE_LOG_DIRS": 4,
    "CREATE_PARTITIONS": 3,
    "DESCRIBE_CONFIGS": 4,
    "INCREMENTAL_ALTER_CONFIGS": 1,
    "DESCRIBE_CLUSTER": 1,
    "LIST_GROUPS": 5,
    "DESCRIBE_GROUPS": 5,
    # Kafka 3.9 advertises the KIP-848 describe, which the admin client tries first.
    "CONSUMER_GROUP_DESCRIBE": 0,
    "DELETE_GROUPS": 2,
    # Transactions (Kafka Streams with exactly_once_v2); AddPartitionsToTxn v4+ is the
    # brokers' batched form (KIP-890), which clients do not send.
    "ADD_PARTITIONS_TO_TXN": 3,
    "ADD_OFFSETS_TO_TXN": 4,
    "END_TXN": 4,
    "TXN_OFFSET_COMMIT": 4,
}

# Kafka 4.3 (KRaft) also advertises DescribeTopicPartitions, which the admin client's
# describeTopics uses instead of Metadata when it may (KIP-966).
JAVA39_TO_KAFKA43: dict[str, int] = {**JAVA39_TO_KAFKA39, "DESCRIBE_TOPIC_PARTITIONS": 0}

# The 4.3 client to Kafka 4.3: the newest stable version of each API, except OffsetCommit and
# OffsetFetch v10 (topic ids), which the classic consumer and the admin client do not send.
# Kafka 4.3 finalizes transaction.version 2 (KIP-890): transactional producers add partitions
# with Produce itself and offsets with TxnOffsetCommit v5, without AddPartitionsToTxn or
# AddOffsetsToTxn, and end transactions with EndTxn v5 (epoch bump per transaction).
# InitProducerId v6 (KIP-939) is not advertised by default.
JAVA43_TO_KAFKA43: dict[str, int] = {
    **JAVA39_TO_KAFKA43,
    "METADATA": 13,
    "PRODUCE": 13,
    "FETCH": 18,
    "LIST_OFFSETS": 11,
    "DESCRIBE_LOG_DIRS": 5,
    "DESCRIBE_CLUSTER": 2,
    "DESCRIBE_GROUPS": 6,
    "CONSUMER_GROUP_DESCRIBE": 1,
    "END_TXN": 5,
    "TXN_OFFSET_COMMIT": 5,
}
del JAVA43_TO_KAFKA43["ADD_PARTITIONS_TO_TXN"], JAVA43_TO_KAFKA43["ADD_OFFSETS_TO_TXN"]

ORACLE_VERSIONS: dict[tuple[str, str], dict[str, int]] = {
    ("3.9", "kafka"): JAVA39_TO_KAFKA39,
    ("4.3", "kafka"): JAVA39_TO_KAFKA39,
    ("3.9", "kafka43"): JAVA39_TO_KAFKA43,
    ("4.3", "kafka43"): JAVA43_TO_KAFKA43,
}

# What the client does differently when the broker does not finalize transaction.version 2:
# the transactional APIs as with Kafka 3.9, and transactional producers cap Produce at v11
# (non-transactional ones still send the newest).
# What both clients send when a broker advertises it, which neither Kafka does as started here
# as a rule: client telemetry (KIP-714; Kafka 4.3 advertises it only with a metrics reporter that
# receives it, Kafka 3.9 in ZooKeeper mode never). kbroker serves it, so the client asks for
# its subscription, and pushes only under one.
ADVERTISED_ELSEWHERE: dict[str, int] = {"GET_TELEMETRY_SUBSCRIPTIONS": 0, "PUSH_TELEMETRY": 0}

TRANSACTION_V2_APIS = (
    "ADD_PARTITIONS_TO_TXN",
    "ADD_OFFSETS_TO_TXN",
    "END_TXN",
    "TXN_OFFSET_COMMIT",
)


def derived_versions(client: str, broker: Advertised) -> dict[str, set[int]]:
    """The versions `client` may send to a broker that advertises `broker`: what it sends to
    Kafka 4.3 (or would, for the APIs Kafka does not advertise here), capped by the broker's
    newest version of each API it advertises."""
    newest = {**ORACLE_VERSIONS[(client, "kafka43")], **ADVERTISED_ELSEWHERE}
    before_v2 = ORACLE_VERSIONS[(client, "kafka")]
    candidates = {api: {version} for api, version in newest.items()}
    if broker.finalized_features.get("transaction.version", 0) < 2:
        for api in TRANSACTION_V2_APIS:
            candidates[api] = {before_v2[api]}
        candidates["PRODUCE"] |= {before_v2["PRODUCE"]}
    return {
        api: {min(version, broker.max_versions[api]) for version in versions}
        for api, versions in candidates.items()
        if api in broker.max_versions
    }


@pytest.fixture(scope="session", params=sorted(JAVA_CLIENTS), ids=lambda v: f"java{v}")
def java(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JavaPrograms]:
    client = JAVA_CLIENTS[request.param]
    programs = JavaPrograms.compile(tmp_path_factory.mktemp(f"jvm{client.name}"), client)
    yield programs
    # The table of every request the Java client sent in this session, for the record.
    lines = [f"{api} v{version}: {n}" for (api, version), n in sorted(programs.requests.items())]
    (programs.build_dir / "request-versions.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="session")
def broker_advertises(broker_kind: str, bootstrap: str) -> Advertised | None:
    """What the broker advertises, for the brokers without a table (kbroker, external)."""
    return None if (JAVA_CLIENT_39.name, broker_kind) in ORACLE_VERSIONS else advertised(bootstrap)


@pytest.fixture
def expected(
    java: JavaPrograms, broker_kind: str, broker_advertises: Advertised | None
) -> dict[str, set[int]]:
    """API -> the versions this client may send to this broker."""
    if broker_advertises is None:
        # The telemetry requests are allowed too: a fresh Kafka 4.3 was seen (2026-11-28) to
        # answer the 3.9 client's GetTelemetrySubscriptions with no receiver configured, in one
        # session's order of tests and not in another's.
        table = {**ORACLE_VERSIONS[(java.client.name, broker_kind)], **ADVERTISED_ELSEWHERE}
        return {api: {version} for api, version in table.items()}
    return derived_versions(java.client.name, broker_advertises)


def sent(run: JavaRun, api: str) -> int:
    """How many requests of `api` the client sent, at any version."""
    return sum(n for (name, _), n in run.requests.items() if name == api)


def assert_scenario(
    run: JavaRun, expected_checks: list[str], expected: dict[str, set[int]]
) -> None:
    """The program passed every check group, in order, and sent the expected versions."""
    assert run.returncode == 0 and run.passed == expected_checks, run.report()
    assert run.requests, f"no request found in the client's request log\n{run.report()}"
    unexpected = {
        f"{api} v{version}"
        for api, version in run.requests
        if version not in expected.get(api, set())
    }
    assert not unexpected, (
        f"versions the Java client should not send to this broker: {sorted(unexpected)}; "
        f"expected {expected}"
    )


def test_java_admin(
    java: JavaPrograms,
    bootstrap: str,
    unique_topic: Callable[[], str],
    expected: dict[str, set[int]],
) -> None:
    run = java.run("AdminScenario", bootstrap, unique_topic())
    assert_scenario(
        run,
        [
            "create-topics",
            "describe-topics",
            "configs",
            "create-partitions",
            "describe-cluster",
            "offsets-and-records",
            "consumer-groups",
            "delete-topics",
        ],
        expected,
    )


def test_java_idempotent_producer_codecs_and_sizes(
    java: JavaPrograms,
    bootstrap: str,
    unique_topic: Callable[[], str],
    log_dir: Path | None,
    expected: dict[str, set[int]],
) -> None:
    prefix = unique_topic()
    run = java.run(
        "ProducerScenario",
        bootstrap,
        prefix,
        "200",
        str(base_timestamp_ms()),
        str(NEAR_LIMIT_VALUE_SIZE),
        str(OVER_LIMIT_VALUE_SIZE),
    )
    assert_scenario(
        run,
        [
            *(f"codec-{codec}" for codec in CODECS),
            "near-limit-record-accepted",
            "over-limit-record-refused",
            "producer-carries-on",
        ],
        expected,
    )
    assert sent(run, "INIT_PRODUCER_ID") > 0
    for codec in CODECS:
        assert_stored_codec(log_dir, f"{prefix}-{codec}", 0, codec)


def test_java_consumers_groups_commits_rebalance_seek(
    java: JavaPrograms,
    bootstrap: str,
    unique_topic: Callable[[], str],
    expected: dict[str, set[int]],
) -> None:
    run = java.run("ConsumerScenario", bootstrap, unique_topic(), "20", str(base_timestamp_ms()))
    assert_scenario(
        run,
        [
            "manual-commits",
            "auto-commits",
            "rebalance-range",
            "rebalance-cooperative",
            "offsets-for-times",
            "seek",
        ],
        expected,
    )


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_kafka_streams_stateless_topology(
    java: JavaPrograms,
    bootstrap: str,
    unique_topic: Callable[[], str],
    tmp_path: Path,
    guarantee: str,
    expected: dict[str, set[int]],
) -> None:
    run = java.run("StreamsScenario", bootstrap, unique_topic(), "200", guarantee, str(tmp_path))
    assert_scenario(run, ["every-input-reaches-its-output", "input-committed"], expected)


def test_java_transactions_commit_abort_offsets_fencing(
    java: JavaPrograms,
    bootstrap: str,
    unique_topic: Callable[[], str],
    expected: dict[str, set[int]],
) -> None:
    run = java.run("TransactionScenario", bootstrap, unique_topic())
    assert_scenario(run, ["commit-and-abort", "offsets-in-transactions", "fencing"], expected)
    assert sent(run, "END_TXN") >= 5
