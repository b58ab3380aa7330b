"""Apache Kafka's Java client 3.9.0 (producer, consumer, admin) and Kafka Streams 3.9.0
against the broker.

Each test runs one of our Java programs (compat_tests/jvm/, compiled once per session) for a
group of scenarios, so that the JVM starts a few times rather than once per check; see
compat_tests/java_programs.py. Every test also checks the request versions the client sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.java_programs import JavaPrograms, JavaRun
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
JAVA_CLIENT_VERSIONS: dict[str, int] = {
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
    # KIP-714: kbroker serves client telemetry (Kafka 3.9 in ZooKeeper mode does not), so
    # the client asks for its subscription; with none, it pushes nothing.
    "GET_TELEMETRY_SUBSCRIPTIONS": 0,
}


@pytest.fixture(scope="session")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaPrograms]:
    programs = JavaPrograms.compile(tmp_path_factory.mktemp("jvm"))
    yield programs
    # The table of every request the Java client sent in this session, for the record.
    lines = [f"{api} v{version}: {n}" for (api, version), n in sorted(programs.requests.items())]
    (programs.build_dir / "request-versions.txt").write_text("\n".join(lines) + "\n")


def assert_scenario(run: JavaRun, expected_checks: list[str]) -> None:
    """The program passed every check group, in order, and negotiated Kafka 3.9's versions."""
    assert run.returncode == 0 and run.passed == expected_checks, run.report()
    assert run.requests, f"no request found in the client's request log\n{run.report()}"
    unexpected = {
        f"{api} v{version}"
        for api, version in run.requests
        if JAVA_CLIENT_VERSIONS.get(api) != version
    }
    assert not unexpected, f"versions the Java client does not send to Kafka 3.9: {unexpected}"


def test_java_admin(java: JavaPrograms, bootstrap: str, unique_topic: Callable[[], str]) -> None:
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
    )


def test_java_idempotent_producer_codecs_and_sizes(
    java: JavaPrograms, bootstrap: str, unique_topic: Callable[[], str], log_dir: Path | None
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
    )
    assert run.requests[("INIT_PRODUCER_ID", JAVA_CLIENT_VERSIONS["INIT_PRODUCER_ID"])] > 0
    for codec in CODECS:
        assert_stored_codec(log_dir, f"{prefix}-{codec}", 0, codec)


def test_java_consumers_groups_commits_rebalance_seek(
    java: JavaPrograms, bootstrap: str, unique_topic: Callable[[], str]
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
    )


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_kafka_streams_stateless_topology(
    java: JavaPrograms,
    bootstrap: str,
    unique_topic: Callable[[], str],
    tmp_path: Path,
    guarantee: str,
) -> None:
    run = java.run("StreamsScenario", bootstrap, unique_topic(), "200", guarantee, str(tmp_path))
    assert_scenario(run, ["every-input-reaches-its-output", "input-committed"])


def test_java_transactions_commit_abort_offsets_fencing(
    java: JavaPrograms, bootstrap: str, unique_topic: Callable[[], str]
) -> None:
    run = java.run("TransactionScenario", bootstrap, unique_topic())
    assert_scenario(run, ["commit-and-abort", "offsets-in-transactions", "fencing"])
    assert run.requests[("END_TXN", JAVA_CLIENT_VERSIONS["END_TXN"])] >= 5
