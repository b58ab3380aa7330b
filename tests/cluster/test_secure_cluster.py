"""Three brokers with an ACL authorizer whose replication runs over SASL_SSL with
SCRAM-SHA-512, as their own super user, created in ZooKeeper before any broker starts
(``kbroker users add --zookeeper``, as Kafka's documentation does it with ``kafka-configs.sh
--zookeeper``). Users added through one broker authenticate on the others (the credentials
live in ZooKeeper's /config/users)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from helpers import wait_for
from local_cluster import LocalCluster

from compat_tests.broker_process import free_port
from compat_tests.support import require
from compat_tests.zookeeper_process import java_available
from tests.security.certs import Pki, write_pki

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
REPO = Path(__file__).resolve().parents[2]


def kbroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbroker", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def secure_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalCluster, Pki, dict[int, int]]]:
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    work = tmp_path_factory.mktemp("secure-cluster")
    pki = write_pki(work / "pki")
    cluster = LocalCluster(work)
    internal = {broker_id: free_port() for broker_id in cluster.brokers}
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";'
    )
    for broker_id, broker in cluster.brokers.items():
        broker.overrides.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},INTERNAL://127.0.0.1:{internal[broker_id]}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
                "inter.broker.listener.name": "INTERNAL",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.internal.scram-sha-512.sasl.jaas.config": jaas,
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(pki.broker_keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(pki.ca),
                # With an authorizer the brokers' own user needs CLUSTER_ACTION: a super user,
                # as with Kafka (the PLAINTEXT listener's ANONYMOUS sets up the tests).
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": f"User:{BROKER_USER};User:ANONYMOUS",
            }
        )
    try:
        cluster.zookeeper.start()
        made = kbroker(
            "users", "add", BROKER_USER, "--password", BROKER_PASSWORD,
            "--mechanism", "SCRAM-SHA-512", "--zookeeper", cluster.zookeeper.connect,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        for broker in cluster.brokers.values():
            broker.start(timeout=60)
        cluster.wait_registered()
        yield cluster, pki, internal
    finally:
        cluster.kill_all()


def sasl_ssl(pki: Pki, port: int, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(pki.ca),
    }


def test_replication_over_sasl_ssl(
    secure_cluster: tuple[LocalCluster, Pki, dict[int, int]],
) -> None:
    cluster, pki, internal = secure_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = "secure-replicated"
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "3"})])[topic].result(
        30
    )
    producer = Producer({**sasl_ssl(pki, internal[1], BROKER_USER, BROKER_PASSWORD), "acks": "all"})
    delivered: list[object] = []
    for i in range(50):
        producer.produce(
            topic, f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err)
        )
    assert producer.flush(60) == 0
    # min.insync.replicas=3 with acks=all: every write reached both followers, which fetch
    # from the leader over SASL_SSL.
    assert delivered == [None] * 50


def test_a_user_added_on_one_broker_authenticates_on_another(
    secure_cluster: tuple[LocalCluster, Pki, dict[int, int]],
) -> None:
    cluster, pki, internal = secure_cluster
    added = kbroker(
        "users", "add", "dana", "--password", "dana-secret",
        "--bootstrap-server", cluster.brokers[1].bootstrap,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    started = time.monotonic()

    def logs_in() -> bool | None:
        admin = AdminClient(sasl_ssl(pki, internal[3], "dana", "dana-secret"))
        try:
            return bool(admin.list_topics(timeout=2).brokers) or None
        except KafkaException:
            return None

    wait_for(logs_in, 10, "dana authenticated on broker 3")
    assert time.monotonic() - started < 5
    listed = kbroker("users", "list", "--bootstrap-server", cluster.brokers[2].bootstrap)
    assert "dana" in listed.stdout and "SCRAM-SHA-512" in listed.stdout
