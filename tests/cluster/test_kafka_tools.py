"""Kafka's ZooKeeper layout of ACLs, SCRAM credentials and client quotas, checked with
Apache Kafka 3.9's own tools (``kafka-acls.sh``, ``kafka-configs.sh``; compat_tests/
kafka_tools.py) on one ZooKeeper shared with two kbroker brokers.

Kafka 3.9's ``kafka-configs.sh --zookeeper`` alters SCRAM credentials and nothing else of a
user (a quota is refused, and so are the entity types clients and ips): Kafka writes
quotas through a broker (AlterClientQuotas), which in ZooKeeper mode writes the znodes
itself. So a Kafka 3.9 broker joins the ZooKeeper while kbroker's brokers are stopped, and
``kafka-configs.sh --bootstrap-server`` reads and writes quotas through it. The phases, in
the module's fixture:

1. kbroker's brokers run; ``kbroker acls|users|quotas`` write ACLs, credentials and quotas.
2. kbroker's brokers stop and Kafka's broker starts; in one JVM Kafka's tools read what
   kbroker wrote, write their own, and read everything back; Kafka's broker stops.
3. kbroker's brokers start again on what Kafka's tools wrote.

Each ``kafka-*.sh`` run is a JVM start: they are batched, a few JVMs in all.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from local_cluster import LocalCluster

from compat_tests.broker_process import free_port
from compat_tests.kafka_process import KafkaProcess, kafka_available
from compat_tests.kafka_tools import KafkaTools, ToolRun
from compat_tests.support import require
from compat_tests.zookeeper_process import java_available
from controller import acl_store, config_znodes, quota_store, zk_paths
from kbroker.cli import main as kbroker_main
from kbroker.security.acls import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    parse_name,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# An ACL as both sides print it, in Kafka's upper-case names:
# (resource type, name, pattern type, principal, host, operation, permission).
Acl = tuple[str, str, str, str, str, str, str]
# A quota entity: sorted (type, name) pairs, None for a default; with its quotas.
QuotaTable = dict[tuple[tuple[str, str | None], ...], dict[str, float]]
# user -> {mechanism: iterations}
Credentials = dict[str, dict[str, int]]

SASL = "SASL_PLAINTEXT"
# An entity Kafka's tools give a quota, then take it back.
GONE = ("--entity-type", "users", "--entity-name", "gone", "--entity-type", "clients",
        "--entity-name", "x")  # fmt: skip
SCRAM_PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "dave": "dave-secret"}


@dataclass
class Listing:
    """ACLs, quotas and credentials as one side lists them."""

    acls: set[Acl]
    quotas: QuotaTable
    credentials: Credentials


@dataclass
class Setup:
    cluster: LocalCluster
    tools: KafkaTools
    sasl_ports: dict[int, int]
    written_by_kbroker: Listing  # phase 1, as kbroker lists it
    kafka_read_before: Listing  # phase 2, before Kafka's tools wrote anything
    kafka_read_after: Listing  # phase 2, after

    @property
    def zookeeper(self) -> str:
        return self.cluster.zookeeper.connect


def acls_tool(zookeeper: str) -> tuple[str, ...]:
    """kafka-acls.sh on ZooKeeper, through Kafka's ZooKeeper authorizer."""
    return ("kafka-acls.sh", "--authorizer-properties", f"zookeeper.connect={zookeeper}")


def scram_tool(zookeeper: str) -> tuple[str, ...]:
    """kafka-configs.sh on ZooKeeper, altering users (SCRAM credentials only)."""
    return ("kafka-configs.sh", "--zookeeper", zookeeper, "--alter", "--entity-type", "users")


# --- kbroker's tools, in this process ------------------------------------------------------


def kbroker(*argv: str) -> str:
    """Run ``kbroker ARGV``; its standard output (the test fails when it fails)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            kbroker_main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
    assert code == 0, f"kbroker {' '.join(argv)} exited with {code}: {err.getvalue()}"
    return out.getvalue()


def _kafka_name(enum: Any, text: str) -> str:
    return str(parse_name(enum, text).name)


def kbroker_listing(bootstrap: str) -> Listing:
    common = ("--bootstrap-server", bootstrap, "--json")
    acls = {
        (
            _kafka_name(ResourceType, a["resource_type"]),
            a["name"],
            _kafka_name(PatternType, a["pattern"]),
            a["principal"],
            a["host"],
            _kafka_name(AclOperation, a["operation"]),
            _kafka_name(PermissionType, a["permission"]),
        )
        for a in json.loads(kbroker("acls", "list", *common))
    }
    quotas = {
        tuple(sorted(e["entity"].items())): e["quotas"]
        for e in json.loads(kbroker("quotas", "describe", *common))
    }
    credentials = {
        user: {c["mechanism"]: c["iterations"] for c in creds}
        for user, creds in json.loads(kbroker("users", "list", *common)).items()
    }
    return Listing(acls, quotas, credentials)


# --- what Kafka's tools print ----------------------------------------------------------------

_ACL_RESOURCE = re.compile(r"ResourcePattern\(resourceType=(\w+), name=(.*), patternType=(\w+)\)")
_ACL_ENTRY = re.compile(r"\(principal=(.*), host=(.*), operation=(\w+), permissionType=(\w+)\)")
_CONFIGS = re.compile(r"^(Quota|SCRAM credential) configs for (.+) are (.*)$")
_ENTITY_TYPES = {"user-principal": "user", "client-id": "client-id", "ip": "ip"}


def kafka_acls(listing: str) -> set[Acl]:
    """The ACLs ``kafka-acls.sh --list`` prints."""
    acls: set[Acl] = set()
    resource: tuple[str, ...] = ()
    for line in listing.splitlines():
        if found := _ACL_RESOURCE.search(line):
            resource = found.groups()
        elif found := _ACL_ENTRY.search(line):
            acls.add((*resource, *found.groups()))  # type: ignore[arg-type]
    return acls


def _entity(text: str) -> tuple[tuple[str, str | None], ...]:
    """``user-principal 'alice', the default client-id`` as an entity."""
    parts: list[tuple[str, str | None]] = []
    for part in text.split(", "):
        if part.startswith("the default "):
            parts.append((_ENTITY_TYPES[part.removeprefix("the default ")], None))
        else:
            kind, _, name = part.partition(" ")
            parts.append((_ENTITY_TYPES[kind], name.strip("'")))
    return tuple(sorted(parts))


def kafka_configs(runs: Sequence[ToolRun]) -> tuple[QuotaTable, Credentials]:
    """The quotas and SCRAM credentials ``kafka-configs.sh --describe`` runs print."""
    quotas: QuotaTable = {}
    credentials: Credentials = {}
    for run in runs:
        for line in run.check().stdout.splitlines():
            found = _CONFIGS.match(line)
            if found is None:
                continue
            kind, entity, values = found.groups()
            pairs = [v.split("=", 1) for v in values.split(", ")]
            if kind == "Quota":
                quotas[_entity(entity)] = {k: float(v) for k, v in pairs}
            else:
                ((_, user),) = _entity(entity)
                assert user is not None
                credentials[user] = {k: int(v.removeprefix("iterations=")) for k, v in pairs}
    return quotas, credentials


def kafka_reads(zookeeper: str, bootstrap: str) -> list[tuple[str, ...]]:
    """The invocations that list every ACL, quota and credential."""
    describe = ("kafka-configs.sh", "--bootstrap-server", bootstrap, "--describe")
    return [
        (*acls_tool(zookeeper), "--list"),
        (*describe, "--entity-type", "users"),
        (*describe, "--entity-type", "clients"),
        (*describe, "--entity-type", "users", "--entity-type", "clients"),
        (*describe, "--entity-type", "ips"),
    ]


def kafka_listing(runs: Sequence[ToolRun]) -> Listing:
    acls_run, *config_runs = runs
    return Listing(kafka_acls(acls_run.check().stdout), *kafka_configs(config_runs))


# --- the cluster ---------------------------------------------------------------------------


def _start_brokers(cluster: LocalCluster) -> None:
    """Start the brokers side by side (each start waits for its broker to answer)."""
    with ThreadPoolExecutor() as pool:
        list(pool.map(lambda broker: broker.start(timeout=60), cluster.brokers.values()))
    cluster.wait_registered()


def _stop_brokers(cluster: LocalCluster) -> None:
    for broker in cluster.brokers.values():
        broker.stop(timeout=30)


def _write_with_kbroker(bootstrap: str, zookeeper: str) -> None:
    boot = ("--bootstrap-server", bootstrap)
    kbroker("acls", "add", *boot, "--allow-principal", "User:kb-alice", "--operation", "Read",
            "--operation", "Describe", "--topic", "kb-topic", "--group", "kb-group")  # fmt: skip
    kbroker("acls", "add", *boot, "--deny-principal", "User:kb-bob", "--deny-host", "10.0.0.1",
            "--operation", "Write", "--topic", "kb-",
            "--resource-pattern-type", "prefixed")  # fmt: skip
    kbroker("acls", "add", *boot, "--allow-principal", "User:kb-carol", "--operation",
            "IdempotentWrite", "--cluster")  # fmt: skip
    kbroker("acls", "add", *boot, "--allow-principal", "User:kb-carol", "--operation", "Write",
            "--transactional-id", "kb-tx")  # fmt: skip
    kbroker("users", "add", "kb-user", "--password", "p1", "--mechanism", "SCRAM-SHA-512",
            "--iterations", "8192", *boot)  # fmt: skip
    kbroker("users", "add", "kb-zk-user", "--password", "p2", "--zookeeper", zookeeper)
    quotas = ("quotas", "alter", *boot)
    kbroker(*quotas, "--user", "kb-u", "--add", "producer_byte_rate=1024",
            "--add", "request_percentage=50")  # fmt: skip
    kbroker(*quotas, "--user", "kb-u", "--client-id", "kb-c", "--add", "consumer_byte_rate=2048")
    kbroker(*quotas, "--user-default", "--client-default", "--add", "controller_mutation_rate=10")
    kbroker(*quotas, "--client-id", "kb c*", "--add", "request_percentage=12.5")
    kbroker(*quotas, "--user", "kb-gone", "--client-id", "x", "--add", "producer_byte_rate=1")
    kbroker(*quotas, "--user", "kb-gone", "--client-id", "x", "--delete", "producer_byte_rate")


def _kafka_writes(zookeeper: str, bootstrap: str) -> list[tuple[str, ...]]:
    acls = (*acls_tool(zookeeper), "--add")
    scram = scram_tool(zookeeper)
    quota = ("kafka-configs.sh", "--bootstrap-server", bootstrap, "--alter", "--add-config")
    return [
        (*acls, "--allow-principal", "User:alice", "--operation", "Write",
         "--topic", "orders", "--resource-pattern-type", "prefixed"),
        (*acls, "--deny-principal", "User:*", "--operation", "Write",
         "--topic", "orders-locked"),
        (*acls, "--allow-principal", "User:bob", "--operation", "Read",
         "--topic", "orders-1", "--group", "app"),
        (*scram, "--entity-name", "alice", "--add-config", "SCRAM-SHA-256=[password=alice-secret]"),
        (*scram, "--entity-name", "bob",
         "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]"),
        (*scram, "--entity-name", "dave", "--add-config", "SCRAM-SHA-256=[password=dave-secret]"),
        (*scram, "--entity-name", "carol", "--add-config", "SCRAM-SHA-256=[password=carol-1]"),
        (*acls, "--allow-principal", "User:carol", "--operation", "Write",
         "--topic", "live-1"),
        (*quota, "producer_byte_rate=10240", "--entity-type", "users", "--entity-name", "alice"),
        (*quota, "producer_byte_rate=1073741824", "--entity-type", "users", "--entity-name",
         "alice", "--entity-type", "clients", "--entity-name", "fast"),
        (*quota, "controller_mutation_rate=1000", "--entity-type", "users", "--entity-default",
         "--entity-type", "clients", "--entity-default"),
        (*quota, "consumer_byte_rate=2048", "--entity-type", "clients", "--entity-name", "app 1"),
        (*quota, "connection_creation_rate=1000", "--entity-type", "ips", "--entity-default"),
        (*quota, "producer_byte_rate=1", *GONE),
        ("kafka-configs.sh", "--bootstrap-server", bootstrap, "--alter",
         "--delete-config", "producer_byte_rate", *GONE),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, kafka_tools: KafkaTools) -> Iterator[Setup]:
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    require(kafka_available(), "Apache Kafka 3.9 is missing from ../shared/kafka-3.9")
    work = tmp_path_factory.mktemp("layout")
    tools = kafka_tools
    cluster = LocalCluster(
        work,
        size=2,
        overrides={
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
            "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{SASL}:{SASL}",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "quota.window.num": "2",
            "quota.window.size.seconds": "1",
        },
    )
    sasl_ports = {broker_id: free_port() for broker_id in cluster.brokers}
    for broker_id, broker in cluster.brokers.items():
        broker.overrides["listeners"] = (
            f"PLAINTEXT://127.0.0.1:{broker.port},{SASL}://127.0.0.1:{sasl_ports[broker_id]}"
        )
    kafka = KafkaProcess(work / "kafka", cluster.zookeeper.connect)
    try:
        cluster.zookeeper.start()
        zookeeper = cluster.zookeeper.connect
        # Phase 1: kbroker writes.
        _start_brokers(cluster)
        _write_with_kbroker(cluster.brokers[1].bootstrap, zookeeper)
        written_by_kbroker = kbroker_listing(cluster.bootstrap)
        # Phase 2: Kafka reads, writes and reads again.
        _stop_brokers(cluster)
        kafka.start()
        reads = kafka_reads(zookeeper, kafka.bootstrap)
        writes = _kafka_writes(zookeeper, kafka.bootstrap)
        runs = tools.run(*reads, *writes, *reads)
        for run in runs[len(reads) : len(reads) + len(writes)]:
            run.check()
        before, after = kafka_listing(runs[: len(reads)]), kafka_listing(runs[-len(reads) :])
        kafka.stop(timeout=30)
        # Phase 3: kbroker on what Kafka wrote.
        _start_brokers(cluster)
        yield Setup(cluster, tools, sasl_ports, written_by_kbroker, before, after)
    finally:
        kafka.kill()
        cluster.kill_all()


# --- clients -------------------------------------------------------------------------------


def _sasl(setup: Setup, broker_id: int, user: str, password: str) -> dict[str, Any]:
    mechanism = "SCRAM-SHA-512" if user == "bob" else "SCRAM-SHA-256"
    return {
        "bootstrap.servers": f"127.0.0.1:{setup.sasl_ports[broker_id]}",
        "security.protocol": SASL,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def logs_in(setup: Setup, broker_id: int, user: str, password: str) -> bool:
    """Whether `user` authenticates with `password` on the broker's SASL listener."""
    failures: list[KafkaError] = []
    admin = AdminClient(
        {
            **_sasl(setup, broker_id, user, password),
            "error_cb": lambda error: failures.append(error),
        }
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.5)
            return True
        except KafkaException:
            admin.poll(0.1)  # serves error_cb
            if any(e.code() == KafkaError._AUTHENTICATION for e in failures):
                return False
    raise AssertionError(f"{user} neither logged in nor was refused: {failures}")


def produce(
    setup: Setup,
    user: str,
    topic: str,
    *,
    password: str | None = None,
    client_id: str = "app",
    count: int = 1,
) -> tuple[list[int], int]:
    """Produce `count` 1000-byte records as `user` (with `password`, else the one Kafka's
    tools set): the delivery error codes (0 for delivered) and the longest throttle time
    the broker reported."""
    outcomes: list[int] = []
    throttles: list[int] = []
    producer = Producer(
        {
            **_sasl(setup, 1, user, password or SCRAM_PASSWORDS[user]),
            "client.id": client_id,
            "message.timeout.ms": 10000,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    for _ in range(count):
        producer.produce(
            topic,
            b"x" * 1000,
            on_delivery=lambda err, _msg: outcomes.append(0 if err is None else err.code()),
        )
    assert producer.flush(30) == 0
    producer.poll(0.5)
    return outcomes, max(throttles, default=0)


def wait_until(check: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


# --- the tests -----------------------------------------------------------------------------


def test_kafkas_tools_read_what_kbroker_wrote(setup: Setup) -> None:
    """kafka-acls.sh --list and kafka-configs.sh --describe show exactly what kbroker's
    tools wrote and list; an entity whose last quota was removed is gone."""
    assert setup.kafka_read_before == setup.written_by_kbroker
    kbroker_side = setup.written_by_kbroker
    assert ("TOPIC", "kb-", "PREFIXED", "User:kb-bob", "10.0.0.1", "WRITE", "DENY") in (
        kbroker_side.acls
    )
    assert kbroker_side.credentials == {
        "kb-user": {"SCRAM-SHA-512": 8192},
        "kb-zk-user": {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 4096},
    }
    assert kbroker_side.quotas[(("client-id", "kb c*"),)] == {"request_percentage": 12.5}
    assert not any(("user", "kb-gone") in key for key in kbroker_side.quotas)


def test_kbroker_reads_what_kafkas_tools_wrote(setup: Setup) -> None:
    assert kbroker_listing(setup.cluster.bootstrap) == setup.kafka_read_after
    written = setup.kafka_read_after
    assert written.credentials["bob"] == {"SCRAM-SHA-512": 8192}
    assert written.quotas[(("client-id", "fast"), ("user", "alice"))] == {
        "producer_byte_rate": 1073741824.0
    }
    assert written.quotas[(("ip", None),)] == {"connection_creation_rate": 1000.0}


def test_kbroker_writes_znodes_as_kafka_does(setup: Setup) -> None:
    """The znodes Kafka's tools wrote are byte for byte what kbroker writes for the same
    ACLs, quotas and changes, and both sides delete an emptied quota entity's znodes."""
    zk = KazooClient(hosts=setup.zookeeper)
    zk.start()
    try:
        alice = AclBinding(
            ResourceType.TOPIC, "orders", PatternType.PREFIXED, "User:alice", "*",
            AclOperation.WRITE, PermissionType.ALLOW,
        )  # fmt: skip
        assert zk.get(acl_store.resource_path(acl_store.pattern_of(alice)))[0] == (
            acl_store.encode_acls([alice])
        )
        for entity, key, value in (
            ((("client-id", "fast"), ("user", "alice")), "producer_byte_rate", 1073741824),
            ((("client-id", None), ("user", None)), "controller_mutation_rate", 1000),
            ((("client-id", "app 1"),), "consumer_byte_rate", 2048),
            ((("ip", None),), "connection_creation_rate", 1000),
        ):
            path = config_znodes.config_path(quota_store.entity_path(entity))
            encoded = zk_paths.encode_config({key: quota_store.encode_quota(key, value)})
            assert zk.get(path)[0] == encoded
        for root in config_znodes.NOTIFICATION_ROOTS:
            for child in zk.get_children(root):
                data = zk.get(f"{root}/{child}")[0]
                if root == config_znodes.CHANGES:
                    entity_path = json.loads(data)["entity_path"]
                    assert data == config_znodes.encode_change(entity_path)
                elif root == acl_store.EXTENDED_CHANGES:
                    event = json.loads(data)
                    pattern = (
                        parse_name(ResourceType, event["resourceType"]),
                        event["name"],
                        parse_name(PatternType, event["patternType"]),
                    )
                    assert data == acl_store.change_notification(pattern)[1]
                else:
                    kind, _, name = data.decode().partition(":")
                    pattern = (parse_name(ResourceType, kind), name, PatternType.LITERAL)
                    assert data == acl_store.change_notification(pattern)[1]
        assert zk.exists("/config/users/gone") is None
        assert zk.exists("/config/users/kb-gone") is None
    finally:
        zk.stop()
        zk.close()


def test_kbroker_enforces_what_kafkas_tools_wrote(setup: Setup) -> None:
    admin = AdminClient({"bootstrap.servers": setup.cluster.bootstrap})
    topics = [NewTopic(t, 1, 2) for t in ("orders-1", "orders-locked")]
    for future in admin.create_topics(topics).values():
        future.result(30)
    # SCRAM logins with the passwords kafka-configs.sh set, on both brokers.
    for broker_id in (1, 2):
        assert logs_in(setup, broker_id, "alice", "alice-secret")
        assert logs_in(setup, broker_id, "bob", "bob-secret")
        assert not logs_in(setup, broker_id, "alice", "not-the-password")
    # ACLs: alice may write to topics prefixed "orders" unless everyone is denied; bob may
    # only read.
    assert produce(setup, "alice", "orders-1", client_id="fast")[0] == [0]
    assert produce(setup, "alice", "orders-locked")[0] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert produce(setup, "bob", "orders-1")[0] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # Quotas: alice's producer_byte_rate throttles her, except as client "fast", whose
    # user and client id quota takes precedence.
    assert produce(setup, "alice", "orders-1", count=30)[1] > 0
    assert produce(setup, "alice", "orders-1", client_id="fast", count=30)[1] == 0


def test_kbroker_follows_changes_kafkas_tools_make_while_it_runs(setup: Setup) -> None:
    """ACLs and credentials added, changed and removed by Kafka's tools while kbroker runs
    apply at once, on every broker (kbroker watches the znodes; Kafka's brokers read the
    change notifications)."""
    admin = AdminClient({"bootstrap.servers": setup.cluster.bootstrap})
    admin.create_topics([NewTopic("live-1", 1, 2)])["live-1"].result(30)
    assert produce(setup, "carol", "live-1", password="carol-1")[0] == [0]
    assert logs_in(setup, 2, "dave", "dave-secret")
    assert not logs_in(setup, 2, "erin", "erin-1")
    scram = scram_tool(setup.zookeeper)
    acls = acls_tool(setup.zookeeper)
    setup.tools.check(
        (*scram, "--entity-name", "erin", "--add-config", "SCRAM-SHA-256=[password=erin-1]"),
        (*acls, "--add", "--allow-principal", "User:erin", "--operation", "Write",
         "--topic", "live-1"),
        (*scram, "--entity-name", "carol", "--add-config", "SCRAM-SHA-256=[password=carol-2]"),
        (*acls, "--remove", "--force", "--allow-principal", "User:carol",
         "--operation", "Write", "--topic", "live-1"),
        (*scram, "--entity-name", "dave", "--delete-config", "SCRAM-SHA-256"),
    )  # fmt: skip
    for broker_id in (1, 2):
        wait_until(lambda b=broker_id: logs_in(setup, b, "erin", "erin-1"), "erin's login")
        wait_until(lambda b=broker_id: logs_in(setup, b, "carol", "carol-2"), "carol's password")
        assert not logs_in(setup, broker_id, "carol", "carol-1")
        wait_until(lambda b=broker_id: not logs_in(setup, b, "dave", "dave-secret"), "no dave")
    assert produce(setup, "erin", "live-1", password="erin-1")[0] == [0]
    assert produce(setup, "carol", "live-1", password="carol-2")[0] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    ]
